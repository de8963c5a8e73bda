"""The native SDK's two requests (protocol/native.py): LAYOUT and Swift's WRITE.

A WRITE is answered once its batch is in memory, with the partition's (V, S, C): the writer
keeps what it sent until C covers it, and resends it if the partition is reloaded (S changes)
or the topic changes (V). A batch is checked as a produced one is (gateway/writes.py);
transactional batches are Kafka's business and refused here. When unpersisted data fills the
memory budget, the write waits for room up to its timeout, then is refused REQUEST_TIMED_OUT
with nothing appended. A partition this node is opening is waited for, as Produce does.
"""

from __future__ import annotations

import time
import uuid

from kio.schema.errors import ErrorCode

from ...engine.api import Durability, Topic, TopicPartition, errors
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ...protocol.native import (
    NO_NODE,
    NO_PARENT,
    UNKNOWN,
    PartitionLayout,
    TopicLayout,
    Write,
    Written,
    decode_layout_request,
    decode_write_request,
    encode_layout_answer,
    encode_write_answer,
)
from ...records.errors import InvalidBatch
from ..context import Context
from ..mapping import batch_code, error_code, refusal_code
from ..writes import Refused, checked
from .api import Codec, handles
from .metadata import address
from .produce import room

NO_ID = uuid.UUID(int=0)
NOT_TRANSACTIONAL = "the native write takes no transactional batches: use a Kafka producer for transactions"


@handles(ApiKey.NATIVE_LAYOUT, 0, 0, Codec(decode_layout_request, encode_layout_answer))
async def layout(ctx: Context, header: RequestHeader, names: list[str]) -> list[TopicLayout]:
    return [_layout(ctx, name, header.peer.listener) for name in names]


def find(ctx: Context, name: str) -> Topic | None:
    """A topic by its name or its resource name (owner#name#uuid: only while that uuid is current)."""
    if "#" not in name:
        return ctx.topics.find(name)
    parts = name.split("#")
    topic = ctx.topics.find(parts[1]) if len(parts) == 3 else None
    return topic if topic is not None and str(topic.resource) == name else None


def _layout(ctx: Context, name: str, listener: str) -> TopicLayout:
    """The topic's partitions, their leaders named by where a client on `listener` reaches them."""
    topic = find(ctx, name)
    if topic is None:
        return TopicLayout(ErrorCode.unknown_topic_or_partition, name, "", NO_ID, UNKNOWN, ())
    partitions = []
    splits = {child: (parent, offset) for child, parent, offset in topic.splits}
    for index, (start, end) in enumerate(topic.ranges):
        leader = ctx.cluster.leader_of(topic.name, index)
        host, port = ("", -1) if leader is None else address(ctx, leader, listener)
        session = ctx.partitions.session_if_open(topic.name, index)
        checkpoint = UNKNOWN if session is None else ctx.partitions.info(TopicPartition(topic.name, index)).checkpoint
        partitions.append(PartitionLayout(
            index, start, end, NO_NODE if leader is None else leader.node_id, host, port,
            UNKNOWN if session is None else session, checkpoint,
            *splits.get(index, (NO_PARENT, UNKNOWN))))
    return TopicLayout(ErrorCode.none, topic.name, str(topic.resource), topic.resource.uid, topic.version,
                       tuple(partitions))


@handles(ApiKey.NATIVE_WRITE, 0, 0, Codec(decode_write_request, encode_write_answer))
async def write(ctx: Context, header: RequestHeader, request: tuple[int, list[Write]]) -> list[Written]:
    timeout_ms, writes = request
    timeout_s = max(timeout_ms, 1) / 1000
    started = time.monotonic()
    if any(w.records for w in writes) and not await room(ctx, 1, timeout_s):
        return [_refused(w, ErrorCode.request_timed_out, "the broker's memory is full of unpersisted data")
                for w in writes]
    if ctx.partitions.opening():
        named = [TopicPartition(w.topic, w.partition) for w in writes]
        await ctx.partitions.wait_opened(named, max(timeout_s - (time.monotonic() - started), 0.001))
    return [_write(ctx, w) for w in writes]


def _write(ctx: Context, w: Write) -> Written:
    topic = find(ctx, w.topic)
    if topic is None or not 0 <= w.partition < topic.partition_count:
        return _refused(w, ErrorCode.unknown_topic_or_partition)
    tp = TopicPartition(topic.name, w.partition)
    base_offset = -1
    try:
        if w.records:
            written = checked(topic, tp, memoryview(w.records), ctx.clock.now_ms())
            if written.header.is_transactional:
                return _refused(w, ErrorCode.invalid_record, NOT_TRANSACTIONAL)
            base_offset = ctx.partitions.append(tp, written.batch, written.header, Durability.MEMORY, w.version, w.session,
                                                topic.version).base_offset
        info = ctx.partitions.info(tp)
    except Refused as refused:
        return _refused(w, refusal_code(refused.refusal), refused.message or str(refused))
    except InvalidBatch as invalid:
        return _refused(w, batch_code(invalid), str(invalid))
    except errors.StaleSession as stale:
        return Written(w.topic, w.partition, ErrorCode.fenced_leader_epoch, -1, stale.version, stale.session,
                       stale.checkpoint, UNKNOWN, str(stale))
    except errors.EngineError as error:
        return _refused(w, error_code(error), str(error))
    return Written(w.topic, w.partition, ErrorCode.none, base_offset, topic.version, info.session, info.checkpoint,
                   info.start_offset)


def _refused(w: Write, code: int, message: str = "") -> Written:
    return Written(w.topic, w.partition, code, -1, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, message)
