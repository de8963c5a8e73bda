"""Produce (key 0): check each batch, take it into memory, answer per partition.

- acks=0 gets no answer, acks=1 is answered once the batches are in memory, and acks=all
  once the checkpoint C covers them (persisted to the store). Topics in `sync` flush mode
  make acks=1 wait for C as well. A wait for C is bounded by the request's timeout_ms and
  then answered REQUEST_TIMED_OUT, as Kafka answers when replication is slow; the
  producer's retry is recognised as a duplicate if it is idempotent. (Waits end a little
  before timeout_ms, see _answer_within.)
- On a CreateTime topic, records stamped more than message.timestamp.before.max.ms before
  now or message.timestamp.after.max.ms after it (Kafka's default: one hour) refuse their
  batch with INVALID_TIMESTAMP, each named in record_errors with Kafka's message.
- Transactional batches (KIP-98) are stored like any other; the partition keeps the
  producer's transaction open until the coordinator's marker (engine/log/producers.py), and
  refuses a batch outside it from a producer with one open (INVALID_TXN_STATE). Control
  batches are the broker's own: a produced one is INVALID_RECORD (records/validate.py).
- A compressed batch holding a record larger, decompressed, than the topic's
  max.decompressed.message.bytes is refused INVALID_RECORD (no message, as Kafka), before
  any other record check; records of an uncompressed batch are bounded by max.message.bytes.
- A topic whose compression.type names a codec stores every batch in it: one sent in another
  codec is recompressed (its records block as one piece; offsets, timestamps and producer
  fields stay), as Kafka does.
- A partition this node is opening (a cluster just moved it here) is waited for, up to
  timeout_ms, rather than refused: see Partitions.wait_opened.
- Once its batches are appended, the request lets its connection go on to the next one
  while it waits for C (gateway/ordering.py); answers still leave in request order.
- When unpersisted data fills the memory budget, the request waits for room before anything
  is appended (the connection reads nothing more meanwhile), and the answer reports the
  wait as throttle_time_ms. If no room appears within timeout_ms, nothing is appended and
  every partition is answered REQUEST_TIMED_OUT, which producers retry.
"""

from __future__ import annotations

import asyncio
import time

from kio.schema.errors import ErrorCode

from ...engine.api import Durability, Topic, TopicPartition, TxnError, errors
from ...protocol.answers import (
    PartitionProduceAnswer,
    ProduceAnswer,
    ProduceNodeEndpointAnswer,
    TopicProduceAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...protocol.produce_wire import PartitionData, ProduceRequest, TopicData, decode_produce, encode_produce_response
from ...records.errors import InvalidBatch
from ...records.header import BatchHeader
from ..context import Context
from ..internal_topics import WRITE_REFUSED, internal_by_id, is_internal
from ..mapping import batch_code, error_code, refusal_code
from ..ordering import next_request_may_start
from ..writes import Refused, checked
from .api import Codec, handles
from .common import millis

ACKS_ALLOWED = (0, 1, -1)
DURABILITY = {0: Durability.MEMORY, 1: Durability.MEMORY, -1: Durability.PERSISTED}
NOT_ADDED = "Partition was not added to the transaction"  # Kafka's words
TRANSACTION_ABORTABLE_FROM = 11  # the Produce version from which a failed check is TRANSACTION_ABORTABLE
# A write that waits for C: its answer as appended, and the wait (settled once the request's wait is over)
Waiting = tuple[PartitionProduceAnswer, "asyncio.Future[None]"]


@handles(ApiKey.PRODUCE, 3, 13, Codec(decode_produce, encode_produce_response))
async def produce(ctx: Context, header: RequestHeader, request: ProduceRequest) -> ProduceAnswer | None:
    _name_by_id(ctx, request)
    timeout_s = _answer_within(max(millis(request.timeout), 0) / 1000)
    throttled_ms = 0
    if request.acks not in ACKS_ALLOWED:
        responses = _all_failed(request, ErrorCode.invalid_required_acks)
    else:
        started = time.monotonic()
        has_room = ctx.partitions.has_room() or await room(ctx, request.acks, timeout_s)  # no coroutine when there is room
        throttled_ms = int((time.monotonic() - started) * 1000)
        if not has_room:
            responses = _all_failed(request, ErrorCode.request_timed_out)  # memory full
        else:
            if ctx.settings.auto_create_topics:
                await _create_missing(ctx, request)
            if ctx.partitions.opening():
                named = [TopicPartition(t.name, p.index) for t in request.topic_data for p in t.partition_data]
                await ctx.partitions.wait_opened(named, max(timeout_s - (time.monotonic() - started), 0.001))
            waits: list[Waiting] = []
            responses = [_topic(ctx, request, header.api_version, topic, waits) for topic in request.topic_data]
            next_request_may_start()  # appended: only the wait for C is left
            if waits:
                await asyncio.wait([wait for _, wait in waits], timeout=max(timeout_s - (time.monotonic() - started), 0.001))
                for written, wait in waits:
                    _settle(written, wait)
    if request.acks == 0:
        return None
    answer: ProduceAnswer = {"responses": responses, "throttle_time": throttled_ms}
    endpoints = _leader_endpoints(ctx, responses)
    if endpoints:
        answer["node_endpoints"] = endpoints
    return answer


def _leader_endpoints(ctx: Context, responses: list[TopicProduceAnswer]) -> list[ProduceNodeEndpointAnswer]:
    """KIP-951: the address of every node a NOT_LEADER_OR_FOLLOWER answer names as leader."""
    named = {p["current_leader"]["leader_id"] for topic in responses for p in topic["partition_responses"]
             if "current_leader" in p}
    if not named:  # the usual case: no node to look up (ctx.cluster.alive() builds a list)
        return []
    return [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}
            for node in ctx.cluster.alive() if node.node_id in named]


def _answer_within(timeout_s: float) -> float:
    """Time out a little before the producer does (it sends request.timeout.ms as the
    request's timeout), so a REQUEST_TIMED_OUT answer arrives while it still listens and
    the batch it then resends was surely not appended."""
    return max(timeout_s - min(1.0, timeout_s / 10), 0.001)


async def room(ctx: Context, acks: int, timeout_s: float) -> bool:
    """Wait while the memory budget is full of unpersisted data: without limit for acks=0
    (no answer to time out), else up to timeout_s."""
    if ctx.partitions.has_room():
        return True  # the usual case: no waiting machinery on the hot path
    try:
        await asyncio.wait_for(ctx.partitions.wait_for_room(), None if acks == 0 else timeout_s)
    except TimeoutError:
        return False
    return True


def _name_by_id(ctx: Context, request: ProduceRequest) -> None:
    """v13+ names topics by id: give each the name of the topic with that id ("" if none has it)."""
    for topic_data in request.topic_data:
        if topic_data.topic_id is not None:
            topic = ctx.topics.by_id(topic_data.topic_id)
            topic_data.name = topic.name if topic is not None else internal_by_id(ctx, topic_data.topic_id) or ""


def _all_failed(request: ProduceRequest, code: ErrorCode) -> list[TopicProduceAnswer]:
    return [{"name": topic.name, "topic_id": topic.topic_id,
             "partition_responses": [_failure(p.index, code) for p in topic.partition_data]}
            for topic in request.topic_data]


def _topic(ctx: Context, request: ProduceRequest, version: int, topic_data: TopicData,
           waits: list[Waiting]) -> TopicProduceAnswer:
    topic = ctx.topics.find(topic_data.name) if topic_data.name else None
    answers = []
    for partition_data in topic_data.partition_data:
        if topic is not None:
            answers.append(_append(ctx, request, version, topic, partition_data, waits))
        elif is_internal(topic_data.name):
            answers.append(_failure(partition_data.index, WRITE_REFUSED))
        elif topic_data.topic_id is not None:
            answers.append(_failure(partition_data.index, ErrorCode.unknown_topic_id))
        else:
            answers.append(_failure(partition_data.index, ErrorCode.unknown_topic_or_partition))
    return {"name": topic_data.name, "topic_id": topic_data.topic_id, "partition_responses": answers}


async def _create_missing(ctx: Context, request: ProduceRequest) -> None:
    """Kafka's auto.create.topics.enable: create the topics the request names that do not
    exist (one that cannot be created is answered UNKNOWN_TOPIC_OR_PARTITION below)."""
    for topic_data in request.topic_data:
        if topic_data.topic_id is None and ctx.topics.find(topic_data.name) is None:
            try:
                await ctx.topics.create(topic_data.name, ctx.settings.default_partitions, {})
            except errors.EngineError:
                pass


def _append(ctx: Context, request: ProduceRequest, version: int, topic: Topic, partition_data: PartitionData,
            waits: list[Waiting]) -> PartitionProduceAnswer:
    index = partition_data.index
    tp = TopicPartition(topic.name, index)
    try:
        written = checked(topic, tp, partition_data.records, ctx.clock.now_ms())
        header = written.header
        if header.is_transactional and (unverified := _not_in_transaction(ctx, request, version, tp, header)):
            return unverified
        appended = ctx.partitions.append(tp, written.batch, header, DURABILITY[request.acks])
    except Refused as refused:
        return refusal_answer(index, refused)
    except InvalidBatch as invalid:
        return _failure(index, batch_code(invalid), str(invalid))
    except errors.EngineError as error:
        failure = _failure(index, error_code(error))
        if failure["error_code"] == ErrorCode.not_leader_or_follower:
            _point_to_leader(ctx, tp, failure)
        return failure
    answer: PartitionProduceAnswer = {
        "index": index, "error_code": ErrorCode.none, "base_offset": appended.base_offset,
        "log_append_time": -1 if appended.duplicate else written.append_time, "log_start_offset": appended.start_offset}
    if appended.must_persist:
        waits.append((answer, asyncio.ensure_future(ctx.partitions.wait_persisted(tp, appended.base_offset))))
    return answer


def _settle(answer: PartitionProduceAnswer, wait: asyncio.Future[None]) -> None:
    """The answer of a write that waited for C, once the request's wait is over: as appended if
    C covers it; if not in time, REQUEST_TIMED_OUT; if the partition failed it (closed, moved,
    the store gave up), that error. A failed write names no offset."""
    if not wait.done():
        wait.cancel()
        code = ErrorCode.request_timed_out
    elif wait.cancelled():
        code = ErrorCode.request_timed_out
    elif (error := wait.exception()) is None:
        return
    else:
        code = error_code(error) if isinstance(error, errors.EngineError) else ErrorCode.request_timed_out
    answer.update({"error_code": code, "base_offset": -1, "log_append_time": -1})


def _point_to_leader(ctx: Context, tp: TopicPartition, failure: PartitionProduceAnswer) -> None:
    """KIP-951: name the partition's current leader, so the producer goes there at once."""
    leader = ctx.cluster.leader_of(tp.topic, tp.partition)
    if leader is not None and leader.node_id != ctx.node_id:
        failure["current_leader"] = {"leader_id": leader.node_id,
                                     "leader_epoch": ctx.cluster.leader_epoch_of(tp.topic, tp.partition)}


def _not_in_transaction(ctx: Context, request: ProduceRequest, version: int, tp: TopicPartition,
                        header: BatchHeader) -> PartitionProduceAnswer | None:
    """KIP-890 part 1: the first transactional batch of a producer in a partition is taken
    only if the coordinator has the partition in that producer's ongoing transaction, so a
    late write of a transaction that ended cannot open one nobody will ever close (a hanging
    transaction holding read_committed readers back). Kafka's answer when it is not: before
    Produce v11 INVALID_TXN_STATE with this message, from v11 TRANSACTION_ABORTABLE. The
    check needs the coordinator: a transactional id coordinated by another node is taken
    unchecked (the previous behaviour)."""
    if ctx.partitions.in_transaction(tp, header.producer_id):
        return None
    transactional_id = request.transactional_id or ""
    if transactional_id and not ctx.transactions.coordinates(transactional_id):
        return None
    error = ctx.transactions.verify(transactional_id, header.producer_id, header.producer_epoch, tp)
    if error is TxnError.NONE:
        return None
    if error is TxnError.PRODUCER_FENCED:
        return _failure(tp.partition, ErrorCode.invalid_producer_epoch)
    if version >= TRANSACTION_ABORTABLE_FROM:
        return _failure(tp.partition, ErrorCode.transaction_abortable)
    return _failure(tp.partition, ErrorCode.invalid_txn_state, NOT_ADDED)


def refusal_answer(index: int, refused: Refused) -> PartitionProduceAnswer:
    """A batch the topic refused (gateway/writes.py), as Kafka answers it: the code, Kafka's
    message, and each record at fault by index."""
    answer = _failure(index, refusal_code(refused.refusal), refused.message)
    if refused.records:
        answer["record_errors"] = [{"batch_index": at, "batch_index_error_message": message}
                                   for at, message in refused.records]
    return answer


def _failure(index: int, code: ErrorCode, message: str | None = None) -> PartitionProduceAnswer:
    """A partition's refusal; as Kafka, only a refused batch's records get a message."""
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "error_message": message}
