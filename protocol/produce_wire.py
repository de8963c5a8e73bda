"""Produce (key 0, v3-v13) read and written by hand: the request-rate hot path.

kio's generic reader and writer walk the schema for every field of every request; with
100-byte records at linger.ms=0 that was a quarter of the broker's time (py-spy). This
module reads the same bytes into small slotted objects with the attribute names kio uses
(so the handler does not care which codec ran) and writes the answer mapping straight to
bytes. The property tests hold it to kio: same fields decoded, same bytes encoded.

Layouts (Kafka's ProduceRequest.json / ProduceResponse.json); v9+ are flexible (compact
lengths as unsigned varints of n + 1, a tagged-field section after every struct, header v2
for requests and v1 for responses):

    request  : transactional_id (nullable string), acks int16, timeout_ms int32,
               topic_data [name string (v3-v12) | topic_id uuid (v13+),
                           partition_data [index int32, records nullable bytes]]
    response : responses [name | topic_id, partition_responses [index int32, error_code int16,
               base_offset int64, log_append_time_ms int64, log_start_offset int64 (v5+),
               record_errors [batch_index int32, batch_index_error_message nullable string]
               (v8+), error_message nullable string (v8+)]],
               throttle_time_ms int32

Records are returned as read-only views of the frame: nothing is copied on the way in.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .answers import PartitionProduceAnswer
from .codec import NO_PEER, Peer, ProtocolError, RequestHeader

FLEXIBLE_FROM = 9
CURRENT_LEADER_FROM = 10  # KIP-951: the answer may name a partition's current leader
TOPIC_IDS_FROM = 13  # topics are named by id, in the request and the answer
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
HEADER_FIXED = struct.Struct(">hhi")
ACKS_TIMEOUT = struct.Struct(">hi")
PARTITION_ANSWER = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
PARTITION_ANSWER_V5 = struct.Struct(">ihqqq")  # ... and log_start_offset (v5+)
# v8+, after log_start_offset, for a partition answered without record errors, message or leader:
PLAIN_KEYS = 5  # index, error_code, base_offset, log_append_time, log_start_offset: an answer with no other
PLAIN_END = {False: I32.pack(0) + I16.pack(-1), True: bytes((1, 0, 0))}  # [] errors, null message (, no tags)
I64 = struct.Struct(">q")


class PartitionData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicData:
    __slots__ = ("name", "topic_id", "partition_data")

    def __init__(self, name: str, partition_data: list[PartitionData], topic_id: uuid.UUID | None = None) -> None:
        self.name = name  # from v13 the handler fills it in from topic_id ("" if no topic has it)
        self.topic_id = topic_id  # v13+
        self.partition_data = partition_data


class ProduceRequest:
    __slots__ = ("transactional_id", "acks", "timeout", "topic_data")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: list[TopicData]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout = timeout_ms  # milliseconds (kio gives a timedelta; handlers take both)
        self.topic_data = topic_data


class _Reader:
    __slots__ = ("view", "pos", "flexible")

    def __init__(self, view: memoryview, pos: int, flexible: bool) -> None:
        self.view = view
        self.pos = pos
        self.flexible = flexible

    def fixed(self, shape: struct.Struct) -> tuple[Any, ...]:
        values = shape.unpack_from(self.view, self.pos)
        self.pos += shape.size
        return values

    def uvarint(self) -> int:
        byte = self.view[self.pos]
        if byte < 0x80:  # the usual case: one byte
            self.pos += 1
            return byte
        result = shift = 0
        while True:
            byte = self.view[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ProtocolError("varint longer than 5 bytes")

    def string(self, nullable: bool) -> str | None:
        size = self.uvarint() - 1 if self.flexible else self.fixed(I16)[0]
        if size < 0:
            if not nullable:
                raise ProtocolError("null string where the schema forbids it")
            return None
        return str(self.take(size), "utf-8")

    def array_length(self) -> int:
        size = self.uvarint() - 1 if self.flexible else self.fixed(I32)[0]
        if size < 0:
            raise ProtocolError("null array where the schema forbids it")
        return size

    def nullable_bytes(self) -> memoryview | None:
        size = self.uvarint() - 1 if self.flexible else self.fixed(I32)[0]
        return None if size < 0 else self.take(size)

    def take(self, size: int) -> memoryview:
        end = self.pos + size
        if end > len(self.view):
            raise ProtocolError("field runs past the end of the frame")
        data = self.view[self.pos:end]
        self.pos = end
        return data

    def tags(self) -> None:
        """Skip a tagged-field section (Produce requests define no tags we read)."""
        if self.flexible:
            if self.view[self.pos] == 0:  # the usual case: none
                self.pos += 1
                return
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self.take(self.uvarint())


def decode_produce(frame: bytes | bytearray | memoryview, version: int,
                   peer: Peer = NO_PEER) -> tuple[RequestHeader, ProduceRequest]:
    reader = _Reader(memoryview(frame).toreadonly(), 0, False)
    try:
        _, _, correlation_id = reader.fixed(HEADER_FIXED)
        client_id = reader.string(nullable=True)  # the header's client_id is never compact
        reader.flexible = version >= FLEXIBLE_FROM
        reader.tags()
        transactional_id = reader.string(nullable=True)
        acks, timeout_ms = reader.fixed(ACKS_TIMEOUT)
        topics = []
        for _ in range(reader.array_length()):
            topic_id = uuid.UUID(bytes=bytes(reader.take(16))) if version >= TOPIC_IDS_FROM else None
            name = "" if topic_id is not None else reader.string(nullable=False) or ""  # nullable=False: never None
            partitions = []
            for _ in range(reader.array_length()):
                (index,) = reader.fixed(I32)
                partitions.append(PartitionData(index, reader.nullable_bytes()))
                reader.tags()
            topics.append(TopicData(name, partitions, topic_id))
            reader.tags()
        reader.tags()
    except (struct.error, IndexError, UnicodeDecodeError) as error:
        raise ProtocolError(f"cannot decode api 0 v{version}: {error!r}") from error
    return (RequestHeader(0, version, correlation_id, client_id, peer),
            ProduceRequest(transactional_id, acks, timeout_ms, topics))


def response_start(correlation_id: int, flexible: bool) -> bytearray:
    """A response frame's start: room for its size (filled in last), the correlation id,
    and from a flexible version on the empty tagged fields of response header v1."""
    out = bytearray(8)
    I32.pack_into(out, 4, correlation_id)
    if flexible:
        out.append(0)
    return out


def encode_produce_response(header: RequestHeader, answer: Mapping[str, Any]) -> bytes:
    """A whole response frame (size prefix included) for the handler's answer mapping."""
    version = header.api_version
    flexible = version >= FLEXIBLE_FROM
    out = response_start(header.correlation_id, flexible)
    topics = answer["responses"]
    length(out, len(topics), flexible)
    for topic in topics:
        topic_key(out, topic["name"], topic["topic_id"] if version >= TOPIC_IDS_FROM else None, flexible)
        partitions = topic["partition_responses"]
        length(out, len(partitions), flexible)
        for p in partitions:
            if version >= 8 and len(p) == PLAIN_KEYS:  # the usual answer: no errors, message or leader
                out += PARTITION_ANSWER_V5.pack(p["index"], int(p["error_code"]), p["base_offset"],
                                                _append_time(p["log_append_time"]), p["log_start_offset"])
                out += PLAIN_END[flexible]
            else:
                _partition(out, p, version, flexible)
        if flexible:
            out.append(0)
    out += I32.pack(answer.get("throttle_time", 0))
    if flexible:
        node_endpoints_tag(out, answer.get("node_endpoints") if version >= CURRENT_LEADER_FROM else None)
    I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _append_time(value: int | None) -> int:
    """-1 for none: what kio writes for None and any negative."""
    return -1 if value is None or value < 0 else value


def _partition(out: bytearray, p: PartitionProduceAnswer, version: int, flexible: bool) -> None:
    out += PARTITION_ANSWER.pack(p["index"], int(p["error_code"]), p["base_offset"], _append_time(p["log_append_time"]))
    if version >= 5:
        out += I64.pack(p["log_start_offset"])
    if version >= 8:
        record_errors = p.get("record_errors", ())  # the records that made a batch refused
        length(out, len(record_errors), flexible)
        for record_error in record_errors:
            out += I32.pack(record_error["batch_index"])
            string(out, record_error.get("batch_index_error_message"), flexible)
            if flexible:
                out.append(0)
        string(out, p.get("error_message"), flexible)
    if flexible:
        leader_tag(out, 0, p.get("current_leader") if version >= CURRENT_LEADER_FROM else None)


def topic_key(out: bytearray, name: str, topic_id: uuid.UUID | None, flexible: bool) -> None:
    """A topic as an answer names it: its id where the version names topics by id, else its name."""
    if topic_id is not None:
        out += topic_id.bytes
    else:
        string(out, name, flexible)


def leader_tag(out: bytearray, tag: int, leader: Mapping[str, object] | None) -> None:
    """A partition's tagged-field section holding at most a CurrentLeader (KIP-951) under
    `tag` (Produce v10+: 0, Fetch v12+: 1): the node a NOT_LEADER_OR_FOLLOWER answer points
    the client to. The default (-1, -1) is not written."""
    if not leader or (leader["leader_id"], leader["leader_epoch"]) == (-1, -1):
        out.append(0)
        return
    out += bytes((1, tag, 9))  # one tagged field, its tag, 9 bytes
    out += I32.pack(leader["leader_id"]) + I32.pack(leader["leader_epoch"]) + b"\x00"


def node_endpoints_tag(out: bytearray, endpoints: Sequence[Mapping[str, Any]] | None) -> None:
    """The response's tagged fields: tag 0 is NodeEndpoints (KIP-951; Produce v10+, Fetch
    v16+), the address of every node a CurrentLeader names."""
    if not endpoints:
        out.append(0)
        return
    field = bytearray()
    length(field, len(endpoints), True)
    for node in endpoints:
        field += I32.pack(node["node_id"])
        string(field, node["host"], True)
        field += I32.pack(node["port"])
        string(field, node.get("rack"), True)
        field.append(0)
    out.append(1)
    _uvarint(out, 0)
    _uvarint(out, len(field))
    out += field


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def length(out: bytearray, size: int, flexible: bool) -> None:
    """An array, bytes or string length; -1 for null."""
    if flexible:
        _uvarint(out, size + 1)
    else:
        out += I32.pack(size)


def string(out: bytearray, text: str | None, flexible: bool) -> None:
    if text is None:
        if flexible:
            out.append(0)
        else:
            out += I16.pack(-1)
        return
    data = text.encode()
    if flexible:
        _uvarint(out, len(data) + 1)
    else:
        out += I16.pack(len(data))
    out += data
