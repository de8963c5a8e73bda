"""The transaction APIs (KIP-98, KIP-447): AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26), WriteTxnMarkers (27, between brokers), TxnOffsetCommit (28); InitProducerId with a transactional id is in
producers.py, FindCoordinator for transactional ids in groups.py.

The coordinator is engine/transactions (service.py). Each call goes to the node serving the
transactional id's shard; any other node answers NOT_COORDINATOR and the client looks the
coordinator up again. TxnOffsetCommit goes to the group's coordinator, as OffsetCommit.

Kafka's codes per version (mapping.py `txn_code`): a fenced producer is PRODUCER_FENCED from the
versions KIP-588 added (InitProducerId 4, AddPartitionsToTxn 2, AddOffsetsToTxn 2, EndTxn 2,
TxnOffsetCommit 3), INVALID_PRODUCER_EPOCH before. A transaction log the store would not
take answers COORDINATOR_NOT_AVAILABLE, which clients retry.

AddPartitionsToTxn v4+ is the batched form brokers send (KIP-890): several transactions in
one request, and `verify_only`, which checks that each partition is already in the producer's
open transaction instead of adding it. In v0-v3 a partition of an unknown topic answers
UNKNOWN_TOPIC_OR_PARTITION and the others of that request OPERATION_NOT_ATTEMPTED, as Kafka.
"""

from __future__ import annotations

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest
from kio.schema.write_txn_markers.v2.request import WritableTxnMarker, WriteTxnMarkersRequest

from ...engine.api import CommittedOffset, GroupError, TopicPartition, TxnAnswer, TxnError, errors
from ...protocol.answers import (
    AddOffsetsToTxnAnswer,
    AddPartitionsToTxnAnswer,
    AddPartitionsToTxnResultAnswer,
    AddPartitionsToTxnTopicResultAnswer,
    EndTxnAnswer,
    TxnOffsetCommitAnswer,
    TxnOffsetCommitTopicAnswer,
    WriteTxnMarkersAnswer,
    WriteTxnMarkersWritableTxnMarkerResultAnswer,
    WriteTxnMarkersWritableTxnMarkerTopicResultAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from ..internal_topics import OFFSETS
from ..mapping import error_code, group_code, txn_code
from .api import handles
from .group_offsets import METADATA_BYTES_MAX

BATCHED_FROM = 4  # AddPartitionsToTxn: the brokers' batched form


# -- AddPartitionsToTxn ----------------------------------------------------------------------


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def add_partitions_to_txn(ctx: Context, header: RequestHeader,
                                request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnAnswer:
    version = header.api_version
    if version >= BATCHED_FROM:
        results = [await _add_one(ctx, version, t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
                                  [(topic.name, list(topic.partitions)) for topic in t.topics])
                   for t in request.transactions]
        return {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}
    old = request  # v0-v3 name their one transaction's fields differently
    result = await _add_one(ctx, version, old.v3_and_below_transactional_id,  # type: ignore[attr-defined]
                            old.v3_and_below_producer_id, old.v3_and_below_producer_epoch,  # type: ignore[attr-defined]
                            False, [(t.name, list(t.partitions)) for t in old.v3_and_below_topics])  # type: ignore[attr-defined]
    return {"throttle_time": 0, "results_by_topic_v3_and_below": result["topic_results"]}


async def _add_one(ctx: Context, version: int, transactional_id: str, producer_id: int, epoch: int, verify_only: bool,
                   topics: list[tuple[str, list[int]]]) -> AddPartitionsToTxnResultAnswer:
    codes: dict[TopicPartition, ErrorCode] = {}
    unknown = {TopicPartition(name, p) for name, partitions in topics for p in partitions
               if not _exists(ctx, TopicPartition(name, p))}
    every = [TopicPartition(name, p) for name, partitions in topics for p in partitions]
    if not ctx.transactions.coordinates(transactional_id):
        codes = dict.fromkeys(every, ErrorCode.not_coordinator)
    elif unknown:
        codes = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                 for tp in every}
    elif verify_only:
        codes = {tp: txn_code(ctx.transactions.verify(transactional_id, producer_id, epoch, tp),
                              ApiKey.ADD_PARTITIONS_TO_TXN, version) for tp in every}
    else:
        answer = await ctx.transactions.add_partitions(transactional_id, producer_id, epoch, every)
        codes = dict.fromkeys(every, txn_code(answer.error, ApiKey.ADD_PARTITIONS_TO_TXN, version))
    results: list[AddPartitionsToTxnTopicResultAnswer] = [
        {"name": name, "results_by_partition": [{"partition_index": p,
                                                 "partition_error_code": codes[TopicPartition(name, p)]}
                                                for p in partitions]}
        for name, partitions in topics]
    return {"transactional_id": transactional_id, "topic_results": results}


def _exists(ctx: Context, tp: TopicPartition) -> bool:
    topic = ctx.topics.find(tp.topic)
    return topic is not None and 0 <= tp.partition < topic.partition_count


# -- AddOffsetsToTxn, EndTxn ---------------------------------------------------------------


@handles(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def add_offsets_to_txn(ctx: Context, header: RequestHeader,
                             request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnAnswer:
    if not ctx.transactions.coordinates(request.transactional_id):
        return {"throttle_time": 0, "error_code": ErrorCode.not_coordinator}
    answer = await ctx.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                request.producer_epoch, request.group_id)
    return {"throttle_time": 0, "error_code": txn_code(answer.error, ApiKey.ADD_OFFSETS_TO_TXN, header.api_version)}


@handles(ApiKey.END_TXN, 0, 5)
async def end_txn(ctx: Context, header: RequestHeader, request: EndTxnRequest) -> EndTxnAnswer:
    if not ctx.transactions.coordinates(request.transactional_id):
        return _end_answer(ErrorCode.not_coordinator, TxnAnswer(TxnError.NONE))
    answer = await ctx.transactions.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                            request.committed)
    return _end_answer(txn_code(answer.error, ApiKey.END_TXN, header.api_version), answer)


def _end_answer(code: ErrorCode, answer: TxnAnswer) -> EndTxnAnswer:
    return {"throttle_time": 0, "error_code": code, "producer_id": answer.producer_id,
            "producer_epoch": answer.epoch}


# -- TxnOffsetCommit -------------------------------------------------------------------------


@handles(ApiKey.TXN_OFFSET_COMMIT, 0, 5)
async def txn_offset_commit(ctx: Context, header: RequestHeader,
                            request: TxnOffsetCommitRequest) -> TxnOffsetCommitAnswer:
    error = _member_error(ctx, header.api_version, request)
    codes: dict[TopicPartition, ErrorCode] = {}
    staged: list[tuple[str, str, int, CommittedOffset]] = []
    now_ms = ctx.clock.now_ms()
    for topic in request.topics:
        known = ctx.topics.find(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if error is not None:
                codes[tp] = error
            elif known is None or not 0 <= p.partition_index < known.partition_count:
                codes[tp] = ErrorCode.unknown_topic_or_partition
            elif p.committed_metadata is not None and len(p.committed_metadata.encode()) > METADATA_BYTES_MAX:
                codes[tp] = ErrorCode.offset_metadata_too_large
            else:
                codes[tp] = ErrorCode.none
                staged.append((topic.name, known.resource.uid.hex, p.partition_index,
                               CommittedOffset(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                               p.committed_metadata, now_ms, known.resource.uid.hex)))
    if staged:
        try:
            await ctx.groups.commit_in_txn(request.group_id, request.producer_id, staged)
        except OSError:
            codes = {tp: ErrorCode.coordinator_not_available if code == ErrorCode.none else code
                     for tp, code in codes.items()}
    topics: list[TxnOffsetCommitTopicAnswer] = [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": codes[TopicPartition(t.name, p.partition_index)]}
                                        for p in t.partitions]}
        for t in request.topics]
    return {"throttle_time": 0, "topics": topics}


def _member_error(ctx: Context, version: int, request: TxnOffsetCommitRequest) -> ErrorCode | None:
    """The group's checks, as OffsetCommit's: this node coordinates the group, and from v3 a
    member that names itself is checked like a committing member (Kafka skips the check for a
    producer that names no member)."""
    if not request.group_id:
        return ErrorCode.invalid_group_id
    if not ctx.groups.coordinates(request.group_id):
        return ErrorCode.not_coordinator
    member_id = getattr(request, "member_id", "")
    if version < 3 or not member_id:
        return None
    error = ctx.groups.validate_commit(request.group_id, member_id, request.generation_id,
                                       getattr(request, "group_instance_id", None))
    return None if error is GroupError.NONE else group_code(error)


# -- WriteTxnMarkers (from the coordinator's node) ---------------------------------------------


@handles(ApiKey.WRITE_TXN_MARKERS, 1, 2)
async def write_txn_markers(ctx: Context, header: RequestHeader, request: WriteTxnMarkersRequest) -> WriteTxnMarkersAnswer:
    """Markers for partitions (and `__consumer_offsets` shards) this node serves, sent by the
    node coordinating the transaction (engine/transactions/service.py `send_markers`)."""
    results: list[WriteTxnMarkersWritableTxnMarkerResultAnswer] = []
    for marker in request.markers:
        topics: list[WriteTxnMarkersWritableTxnMarkerTopicResultAnswer] = []
        for topic in marker.topics:
            codes = [await _mark(ctx, marker, topic.name, index) for index in topic.partition_indexes]
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": index, "error_code": code} for index, code in zip(topic.partition_indexes, codes,
                                                                                      strict=True)]})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": results}


async def _mark(ctx: Context, marker: WritableTxnMarker, topic: str, index: int) -> ErrorCode:
    producer_id, commit = marker.producer_id, marker.transaction_result
    if topic == OFFSETS:
        if not ctx.groups.serves_shard(index):
            return ErrorCode.not_coordinator
        try:
            await ctx.groups.end_txn(index, producer_id, commit)
        except OSError:
            return ErrorCode.coordinator_not_available
        return ErrorCode.none
    tp = TopicPartition(topic, index)
    try:
        offset = ctx.partitions.append_control(tp, producer_id, marker.producer_epoch, commit,
                                               marker.coordinator_epoch, ctx.clock.now_ms())
        await ctx.partitions.wait_persisted(tp, offset)
    except (errors.UnknownPartition, errors.NotServedHere, errors.PartitionClosed, errors.StaleProducerEpoch,
            errors.CoordinatorFenced) as error:
        return error_code(error)
    return ErrorCode.none
