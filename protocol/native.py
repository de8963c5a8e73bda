"""Martlet's own two requests, for the native SDK (martlet.client): Swift's write protocol
inside the Kafka framing, on the Kafka listener. No Kafka client sends them and ApiVersions
does not list them, so Kafka clients are unaffected.

Both use request header v1 (api_key int16, api_version int16, correlation_id int32,
client_id int16-length string) and response header v0 (correlation_id int32), as Kafka's
non-flexible APIs do. Every number is big-endian; a string is an int16 length and UTF-8
bytes; bytes are an int32 length (0: none) and the bytes.

LAYOUT (key 32000, v0): what a native writer needs to route and to name what it last saw.

    request : topics int32 count [name string]
    response: topics int32 count [error_code int16, name string, resource_name string,
              topic_id 16 bytes, version int32 (V),
              partitions int32 count [index int32, slot_start int32, slot_end int32 (a range
              [start, end) of the 65,536 logical partitions), leader_id int32 (-1: none),
              leader_host string, leader_port int32, session int32 (S, -1 when the leader is
              another node), checkpoint int64 (C, -1 likewise), parent int32 (the partition
              whose slots this one split off when the topic grew; -1 for an original one),
              split_offset int64 (where the parent held no record of the old ranges any more:
              a native reader delivers this partition's records of a key only after it has
              read the parent up to there; -1 unknown)]]

WRITE (key 32001, v0): one batch per partition, taken into the broker's memory.

    request : timeout_ms int32, partitions int32 count [topic string, partition int32,
              version int32 (V), session int32 (S), records bytes (one Kafka v2 record batch;
              empty: write nothing, answer the current V, S and C)]
    response: partitions int32 count [topic string, partition int32, error_code int16,
              base_offset int64 (-1 unless written), version int32, session int32,
              checkpoint int64, log_start_offset int64, error_message string ("" if none)]

A write naming a V or S other than the current ones is refused FENCED_LEADER_EPOCH with the
current (V, S, C): everything the writer sent at offsets from C on was not persisted and
must be sent again (C falls on batch boundaries). An answer is given once the batch is in
memory; C tells how much of the partition is persisted.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .codec import Peer, ProtocolError, RequestHeader

LAYOUT_KEY, WRITE_KEY = 32000, 32001
VERSION = 0
NO_NODE, NO_PARENT, UNKNOWN = -1, -1, -1

_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TIMEOUT_COUNT = struct.Struct(">ii")
_PARTITION_WRITE = struct.Struct(">iii")  # partition, version, session
_ANSWER_FIXED = struct.Struct(">ihqiiqq")  # partition, error, base_offset, version, session, checkpoint, log_start
_SLOTS = struct.Struct(">iiii")  # index, slot_start, slot_end, leader_id
_SESSION_CHECKPOINT = struct.Struct(">iqiq")  # session, checkpoint, parent, split_offset


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    index: int
    slot_start: int
    slot_end: int
    leader_id: int
    leader_host: str
    leader_port: int
    session: int
    checkpoint: int
    parent: int = -1
    split_offset: int = -1


@dataclass(frozen=True, slots=True)
class TopicLayout:
    error_code: int
    name: str
    resource_name: str
    topic_id: uuid.UUID
    version: int
    partitions: tuple[PartitionLayout, ...]


@dataclass(frozen=True, slots=True)
class Write:
    topic: str
    partition: int
    version: int
    session: int
    records: bytes | bytearray | memoryview  # empty: only ask for (V, S, C)


@dataclass(frozen=True, slots=True)
class Written:
    topic: str
    partition: int
    error_code: int
    base_offset: int
    version: int
    session: int
    checkpoint: int
    log_start_offset: int
    error_message: str = ""


# -- the requests -------------------------------------------------------------------------------


def layout_request(topics: list[str], correlation_id: int, client_id: str) -> bytes:
    out = bytearray(_request_header(LAYOUT_KEY, correlation_id, client_id))
    out += _I32.pack(len(topics))
    for name in topics:
        out += _string(name)
    return _framed(out)


def write_request(timeout_ms: int, writes: list[Write], correlation_id: int,
                  client_id: str) -> list[bytes | bytearray | memoryview]:
    """The frame as pieces to write in order (record batches are not copied)."""
    head = bytearray(_request_header(WRITE_KEY, correlation_id, client_id))
    head += _TIMEOUT_COUNT.pack(timeout_ms, len(writes))
    pieces: list[bytes | bytearray | memoryview] = [b"", bytes(head)]
    size = len(head)
    for write in writes:
        fixed = _string(write.topic) + _PARTITION_WRITE.pack(write.partition, write.version, write.session) \
            + _I32.pack(len(write.records))
        pieces += [fixed, write.records]
        size += len(fixed) + len(write.records)
    pieces[0] = _I32.pack(size)
    return pieces


def decode_layout_request(frame: bytes | bytearray | memoryview, version: int,
                          peer: Peer) -> tuple[RequestHeader, list[str]]:
    reader = _Reader(memoryview(frame))
    header = reader.header(peer)
    return header, [reader.string() for _ in range(reader.count())]


def decode_write_request(frame: bytes | bytearray | memoryview, version: int,
                         peer: Peer) -> tuple[RequestHeader, tuple[int, list[Write]]]:
    reader = _Reader(memoryview(frame))
    header = reader.header(peer)
    timeout_ms, count = reader.fixed(_TIMEOUT_COUNT)
    _check_count(count, reader)
    writes = []
    for _ in range(count):
        topic = reader.string()
        partition, topic_version, session = reader.fixed(_PARTITION_WRITE)
        writes.append(Write(topic, partition, topic_version, session, reader.data()))
    reader.end()
    return header, (timeout_ms, writes)


# -- the answers --------------------------------------------------------------------------------


def encode_layout_answer(header: RequestHeader, topics: list[TopicLayout]) -> bytes:
    out = bytearray(_I32.pack(header.correlation_id))
    out += _I32.pack(len(topics))
    for topic in topics:
        out += _I16.pack(topic.error_code) + _string(topic.name) + _string(topic.resource_name)
        out += topic.topic_id.bytes + _I32.pack(topic.version) + _I32.pack(len(topic.partitions))
        for p in topic.partitions:
            out += _SLOTS.pack(p.index, p.slot_start, p.slot_end, p.leader_id) + _string(p.leader_host)
            out += _I32.pack(p.leader_port) + _SESSION_CHECKPOINT.pack(p.session, p.checkpoint, p.parent,
                                                                        p.split_offset)
    return _framed(out)


def encode_write_answer(header: RequestHeader, answers: list[Written]) -> bytes:
    out = bytearray(_I32.pack(header.correlation_id))
    out += _I32.pack(len(answers))
    for a in answers:
        out += _string(a.topic) + _ANSWER_FIXED.pack(a.partition, a.error_code, a.base_offset, a.version, a.session,
                                                      a.checkpoint, a.log_start_offset) + _string(a.error_message)
    return _framed(out)


def decode_layout_answer(frame: bytes | memoryview) -> tuple[int, list[TopicLayout]]:
    """(correlation id, topics) of an answer frame without its size prefix."""
    reader = _Reader(memoryview(frame))
    (correlation_id,) = reader.fixed(_I32)
    topics = []
    for _ in range(reader.count()):
        (error_code,) = reader.fixed(_I16)
        name, resource_name = reader.string(), reader.string()
        topic_id = uuid.UUID(bytes=bytes(reader.take(16)))
        (version,) = reader.fixed(_I32)
        partitions = []
        for _ in range(reader.count()):
            index, start, end, leader = reader.fixed(_SLOTS)
            host = reader.string()
            (port,) = reader.fixed(_I32)
            session, checkpoint, parent, split_offset = reader.fixed(_SESSION_CHECKPOINT)
            partitions.append(PartitionLayout(index, start, end, leader, host, port, session, checkpoint, parent,
                                              split_offset))
        topics.append(TopicLayout(error_code, name, resource_name, topic_id, version, tuple(partitions)))
    return correlation_id, topics


def decode_write_answer(frame: bytes | memoryview) -> tuple[int, list[Written]]:
    reader = _Reader(memoryview(frame))
    (correlation_id,) = reader.fixed(_I32)
    answers = []
    for _ in range(reader.count()):
        topic = reader.string()
        partition, error, base_offset, version, session, checkpoint, log_start = reader.fixed(_ANSWER_FIXED)
        answers.append(Written(topic, partition, error, base_offset, version, session, checkpoint, log_start,
                               reader.string()))
    return correlation_id, answers


# -- pieces -------------------------------------------------------------------------------------


def _request_header(api_key: int, correlation_id: int, client_id: str) -> bytes:
    return _HEADER.pack(api_key, VERSION, correlation_id) + _string(client_id)


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def _framed(body: bytearray) -> bytes:
    return _I32.pack(len(body)) + bytes(body)


def _check_count(count: int, reader: _Reader) -> None:
    if count < 0 or count > len(reader.view) - reader.pos:
        raise ProtocolError(f"a count of {count} in a frame of {len(reader.view)} bytes")


class _Reader:
    __slots__ = ("view", "pos")

    def __init__(self, view: memoryview) -> None:
        self.view = view
        self.pos = 0

    def header(self, peer: Peer) -> RequestHeader:
        api_key, api_version, correlation_id = self.fixed(_HEADER)
        return RequestHeader(api_key, api_version, correlation_id, self.string(), peer)

    def fixed(self, shape: struct.Struct) -> tuple[int, ...]:
        if self.pos + shape.size > len(self.view):
            raise ProtocolError("the frame ends inside a field")
        values = shape.unpack_from(self.view, self.pos)
        self.pos += shape.size
        return values

    def count(self) -> int:
        (count,) = self.fixed(_I32)
        _check_count(count, self)
        return count

    def take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.view):
            raise ProtocolError("a length runs past the frame")
        piece = self.view[self.pos:self.pos + size]
        self.pos += size
        return piece

    def string(self) -> str:
        (size,) = self.fixed(_I16)
        try:
            return str(self.take(size), "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("a string is not UTF-8") from None

    def data(self) -> memoryview:
        (size,) = self.fixed(_I32)
        return self.take(size)

    def end(self) -> None:
        if self.pos != len(self.view):
            raise ProtocolError(f"{len(self.view) - self.pos} bytes after the request")
