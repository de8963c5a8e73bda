"""Fetch (key 1): sessionless fetches with long polling.

Consumers see offsets below the high watermark, which is the checkpoint C: only what is
persisted, so nothing a consumer saw can be taken back by a crash (docs/decisions.md). A topic
with `martlet.visibility = memory` moves the high watermark to the end of what is in memory:
delivery no longer waits for the store, and a crash may take back what was read (the new
leader epoch tells KIP-320 consumers, through OffsetForLeaderEpoch).

A read_committed fetch (isolation_level 1, KIP-98) stops at the last stable offset (LSO): the
first offset of a transaction not yet decided, or the high watermark. Its answer lists the
aborted transactions that overlap the records returned, as [producer id, first offset], so the
consumer drops their batches up to each one's ABORT marker. Every answer names the LSO.

The answer is sent as soon as min_bytes are available or an error occurred, else when
max_wait_ms runs out (capped by the gateway's fetch_wait_ms_max). max_bytes bounds the
whole answer and partition_max_bytes each partition, except that the first batch found
is always sent whole, so a batch larger than the limits still gets through (KIP-74).

From v13 topics are named by id, in the request and the answer; an id no topic has is
answered UNKNOWN_TOPIC_ID for each partition asked. From v16 a partition that another
node serves (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) names its current leader, and the
answer lists that node's address (KIP-951), so the consumer goes there without a Metadata
round trip. Fetch sessions (KIP-227) are not kept: session_id 0 makes every client send
full fetches, which is what Kafka answers when it has no session slot left.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v18.request import FetchRequest

from ...engine.api import Fetched, TopicPartition, errors
from ...protocol.answers import (
    FetchableTopicAnswer,
    FetchAbortedTransactionAnswer,
    FetchAnswer,
    FetchNodeEndpointAnswer,
    FetchPartitionDataAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...protocol.fetch_wire import encode_fetch_response
from ..context import Context
from ..internal_topics import READ_REFUSED, internal_by_id, is_internal
from ..mapping import error_code
from .api import Codec, handles
from .common import millis


@dataclass(slots=True)
class Wanted:
    tp: TopicPartition
    offset: int
    leader_epoch: int
    max_bytes: int
    topic_id: uuid.UUID | None = None  # v13+: the id the request named the topic by
    unknown: bool = False  # v13+: no topic has that id


TOPIC_IDS_FROM = 13
CURRENT_LEADER_FROM = 16
READ_UNCOMMITTED = 0
# Refusals Kafka answers before reading, with an empty aborted_transactions list (null after
# a read that failed, and for every read_uncommitted answer).
BEFORE_READING = (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id, ErrorCode.topic_authorization_failed)
NAMES_LEADER = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)


@handles(ApiKey.FETCH, 4, 18, Codec(encode=encode_fetch_response))
async def fetch(ctx: Context, header: RequestHeader, request: FetchRequest) -> FetchAnswer:
    wanted = _wanted(ctx, request, header.api_version >= TOPIC_IDS_FROM)
    committed = request.isolation_level != READ_UNCOMMITTED
    wait_ms = min(max(millis(request.max_wait), 0), ctx.settings.fetch_wait_ms_max)
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        answers, size, failed = await _collect(ctx, wanted, request.max_bytes, committed)
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if size >= request.min_bytes or failed or remaining_ms <= 0 or not wanted:
            break
        await ctx.partitions.wait_for_data([(w.tp, w.offset) for w in wanted], remaining_ms, committed)
    if not committed:
        for _, partition in answers:
            if partition["error_code"] == ErrorCode.none:
                partition["aborted_transactions"] = None  # as Kafka: the list is for read_committed only
    answer: FetchAnswer = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
                           "responses": _group(answers)}
    if header.api_version >= CURRENT_LEADER_FROM:
        endpoints = _leader_endpoints(ctx, answers)
        if endpoints:
            answer["node_endpoints"] = endpoints
    return answer


def _wanted(ctx: Context, request: FetchRequest, by_id: bool) -> list[Wanted]:
    wanted = []
    for topic in request.topics:
        name, topic_id, unknown = getattr(topic, "topic", ""), None, False
        if by_id:
            topic_id = topic.topic_id
            found = ctx.topics.by_id(topic_id) if topic_id is not None else None
            name, unknown = (found.name, False) if found is not None else ("", True)
            if unknown and (internal := internal_by_id(ctx, topic_id)) is not None:
                name, unknown = internal, False
        for p in topic.partitions:
            wanted.append(Wanted(TopicPartition(name, p.partition), p.fetch_offset,
                                 getattr(p, "current_leader_epoch", -1), p.partition_max_bytes, topic_id, unknown))
    return wanted


async def _collect(ctx: Context, wanted: list[Wanted], max_bytes: int,
                   committed: bool) -> tuple[list[tuple[Wanted, FetchPartitionDataAnswer]], int, bool]:
    answers = []
    size = 0
    failed = False
    for item in wanted:  # each partition's read in this one coroutine (one more each cost 0.4 us)
        if item.unknown:
            answer = _answer(item, ErrorCode.unknown_topic_id)
        elif is_internal(item.tp.topic):
            answer = _answer(item, READ_REFUSED)
        else:
            try:
                fetched = await ctx.partitions.fetch(item.tp, item.offset, item.leader_epoch,
                                                     min(item.max_bytes, max(max_bytes - size, 0)),
                                                     first=size == 0, committed=committed)
            except errors.EngineError as error:
                answer = _pointed(ctx, item, _answer(item, error_code(error)))
            except OSError:  # the store failed the read or did not answer in time: clients retry (Kafka's offline log dir)
                answer = _answer(item, ErrorCode.kafka_storage_error)
            else:
                answer = _answer(item, ErrorCode.none, fetched)
        size += len(answer["records"] or b"")
        failed = failed or answer["error_code"] != ErrorCode.none
        answers.append((item, answer))
    return answers, size, failed


def _answer(item: Wanted, code: ErrorCode, fetched: Fetched | None = None) -> FetchPartitionDataAnswer:
    """A partition's answer; as Kafka, a refused read names no offsets (-1), and its aborted
    transactions are an empty list when it was refused before reading, else null."""
    if fetched is None:
        return {"partition_index": item.tp.partition, "error_code": code, "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1,
                "aborted_transactions": [] if code in BEFORE_READING else None, "preferred_read_replica": -1,
                "records": b""}
    aborted: list[FetchAbortedTransactionAnswer] = [
        {"producer_id": producer_id, "first_offset": first_offset} for producer_id, first_offset in fetched.aborted]
    return {"partition_index": item.tp.partition, "error_code": code, "high_watermark": fetched.high_watermark,
            "last_stable_offset": fetched.last_stable, "log_start_offset": fetched.start_offset,
            "aborted_transactions": aborted, "preferred_read_replica": -1, "records": fetched.records}


def _pointed(ctx: Context, item: Wanted, answer: FetchPartitionDataAnswer) -> FetchPartitionDataAnswer:
    """KIP-951: name the current leader of a partition that another node serves."""
    if answer["error_code"] in NAMES_LEADER:
        leader = ctx.cluster.leader_of(item.tp.topic, item.tp.partition)
        if leader is not None and leader.node_id != ctx.node_id:
            answer["current_leader"] = {"leader_id": leader.node_id,
                                        "leader_epoch": ctx.cluster.leader_epoch_of(item.tp.topic, item.tp.partition)}
    return answer


def _leader_endpoints(ctx: Context, answers: list[tuple[Wanted, FetchPartitionDataAnswer]]) -> list[FetchNodeEndpointAnswer]:
    """KIP-951: the address of every node a partition's answer names as its leader."""
    named = {answer["current_leader"]["leader_id"] for _, answer in answers if "current_leader" in answer}
    return [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}
            for node in ctx.cluster.alive() if node.node_id in named]


def _group(answers: list[tuple[Wanted, FetchPartitionDataAnswer]]) -> list[FetchableTopicAnswer]:
    """Consecutive partitions of one topic in one entry, named as the request named it."""
    grouped: list[FetchableTopicAnswer] = []
    last: tuple[str, uuid.UUID | None] | None = None
    for item, answer in answers:
        key = (item.tp.topic, item.topic_id)
        if key != last:
            grouped.append({"topic": item.tp.topic, "topic_id": item.topic_id, "partitions": []})
            last = key
        grouped[-1]["partitions"].append(answer)  # type: ignore[attr-defined]  # a list while grouping
    return grouped
