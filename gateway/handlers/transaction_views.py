"""The transaction admin views (KIP-664): ListTransactions (66), DescribeTransactions (65) and
DescribeProducers (61), which `kafka-transactions.sh`, Admin.listTransactions and
Admin.describeProducers use (and Flink's pooling transactional-id strategy, to find its ids).

Each node answers for what it holds, as a Kafka broker does: ListTransactions for the
transactional ids it coordinates (clients ask every node and merge), DescribeTransactions
for an id it coordinates (any other: NOT_COORDINATOR), DescribeProducers for a partition it
serves (any other: NOT_LEADER_OR_FOLLOWER).

DescribeTransactions lists the `__consumer_offsets` partition of each group whose offsets the
transaction commits (AddOffsetsToTxn), as Kafka: the group's coordinator shard.

DescribeProducers of a `__consumer_offsets` partition, a coordinator shard (internal_topics.py):
the shard this node serves has no producers, any other NOT_LEADER_OR_FOLLOWER. Its records are
Martlet's, not Kafka batches, so it has no producer state: the offsets a transaction stages
there have no Kafka offset an abort could name, and end with the coordinator's marker (Kafka
lists the transactional producers of the partition). `kafka-transactions.sh find-hanging
--broker-id N` asks about every partition the broker leads, this topic's too: answered
UNKNOWN_TOPIC_OR_PARTITION, which the Admin client retries, it ran into its timeout.

Kafka's filters in ListTransactions: states by Kafka's names (an unknown name is returned in
unknown_state_filters and matches nothing), producer ids, a duration (only transactions
running longer than it), and from v2 a regular expression the whole id must match (KIP-1152;
a bad one is INVALID_REGULAR_EXPRESSION).
"""

from __future__ import annotations

import re
from collections import defaultdict

from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v2.request import ListTransactionsRequest

from ...engine.api import TopicPartition, TxnMetadata, TxnState, errors
from ...protocol.answers import (
    DescribeProducersAnswer,
    DescribeProducersPartitionAnswer,
    DescribeTransactionsAnswer,
    DescribeTransactionsTransactionStateAnswer,
    ListTransactionsAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from ..internal_topics import OFFSETS, is_internal
from ..mapping import error_code
from .api import handles

STATES = {state.value: state for state in TxnState}
# DescribeProducers of a topic that does not exist: Kafka 4.4 answers its error's text (of a
# missing partition of a topic that does, no text)
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


@handles(ApiKey.LIST_TRANSACTIONS, 0, 2)
async def list_transactions(ctx: Context, header: RequestHeader, request: ListTransactionsRequest) -> ListTransactionsAnswer:
    pattern = getattr(request, "transactional_id_pattern", None)
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_regular_expression, "transaction_states": []}
    unknown = [name for name in request.state_filters if name not in STATES]
    states = {STATES[name] for name in request.state_filters if name in STATES}
    producer_ids = set(request.producer_id_filters)
    duration_ms = getattr(request, "duration_filter", -1)
    now_ms = ctx.clock.now_ms()

    def listed(meta: TxnMetadata) -> bool:
        return ((not request.state_filters or meta.state in states)
                and (not producer_ids or meta.producer_id in producer_ids)
                and (duration_ms < 0 or now_ms - meta.started_ms > duration_ms)
                and (matcher is None or matcher.fullmatch(meta.transactional_id) is not None))

    return {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                                    "transaction_state": meta.state.value}
                                   for meta in ctx.transactions.listing() if listed(meta)]}


@handles(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
async def describe_transactions(ctx: Context, header: RequestHeader,
                                request: DescribeTransactionsRequest) -> DescribeTransactionsAnswer:
    return {"throttle_time": 0,
            "transaction_states": [_described(ctx, transactional_id) for transactional_id in request.transactional_ids]}


def _described(ctx: Context, transactional_id: str) -> DescribeTransactionsTransactionStateAnswer:
    if not transactional_id:
        return _not_described(ErrorCode.invalid_request, transactional_id)
    if not ctx.transactions.coordinates(transactional_id):
        return _not_described(ErrorCode.not_coordinator, transactional_id)
    meta = ctx.transactions.describe(transactional_id)
    if meta is None:
        return _not_described(ErrorCode.transactional_id_not_found, transactional_id)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(meta.partitions):
        by_topic[tp.topic].append(tp.partition)
    if meta.groups:  # as Kafka, which adds the group's offsets partition at AddOffsetsToTxn
        by_topic[OFFSETS] = sorted({ctx.groups.shard_of(group) for group in meta.groups})
    return {"error_code": ErrorCode.none, "transactional_id": transactional_id, "transaction_state": meta.state.value,
            "transaction_timeout": meta.timeout_ms, "transaction_start_time": meta.started_ms,
            "producer_id": meta.producer_id, "producer_epoch": meta.epoch,
            "topics": [{"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()]}


def _not_described(code: ErrorCode, transactional_id: str) -> DescribeTransactionsTransactionStateAnswer:
    """Only the code and the id, every other field zero, as Kafka answers."""
    return {"error_code": code, "transactional_id": transactional_id, "transaction_state": "", "transaction_timeout": 0,
            "transaction_start_time": 0, "producer_id": 0, "producer_epoch": 0, "topics": []}


@handles(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
async def describe_producers(ctx: Context, header: RequestHeader, request: DescribeProducersRequest) -> DescribeProducersAnswer:
    return {"throttle_time": 0, "topics": [
        {"name": topic.name, "partitions": [_producers(ctx, TopicPartition(topic.name, index))
                                            for index in topic.partition_indexes]}
        for topic in request.topics]}


def _producers(ctx: Context, tp: TopicPartition) -> DescribeProducersPartitionAnswer:
    if is_internal(tp.topic):
        return _shard_producers(ctx, tp.partition)
    if ctx.topics.find(tp.topic) is None:
        return {"partition_index": tp.partition, "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": UNKNOWN_TOPIC_MESSAGE, "active_producers": []}
    try:
        active = ctx.partitions.producers(tp)
    except (errors.UnknownPartition, errors.NotServedHere) as error:
        return {"partition_index": tp.partition, "error_code": error_code(error), "active_producers": []}
    return {"partition_index": tp.partition, "error_code": ErrorCode.none, "active_producers": [
        {"producer_id": p.producer_id, "producer_epoch": p.epoch, "last_sequence": p.last_sequence,
         "last_timestamp": p.last_timestamp, "coordinator_epoch": p.coordinator_epoch,
         "current_txn_start_offset": p.txn_start_offset} for p in active]}


def _shard_producers(ctx: Context, index: int) -> DescribeProducersPartitionAnswer:
    if not 0 <= index < ctx.groups.shard_count:
        code = ErrorCode.unknown_topic_or_partition
    elif not ctx.cluster.owns_shard(index):
        code = ErrorCode.not_leader_or_follower
    else:
        code = ErrorCode.none
    return {"partition_index": index, "error_code": code, "active_producers": []}
