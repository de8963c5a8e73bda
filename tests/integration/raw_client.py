"""A tiny raw Kafka client for tests: one blocking socket, kio entities in and out.

It sends exactly the bytes a test asks for (a kio request entity, or raw bytes), so tests can
speak to a broker below the level real clients allow: bad frames, unsupported versions,
corrupt batches, resent idempotent batches. Also builds magic v2 record batches by hand.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from typing import Any

import crc32c
from kio.index import load_response_schema
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader

from martlet.protocol.codec import encode_request as codec_encode_request

TIMEOUT_S = 10.0
FRAME_BYTES_MAX = 64 * 1024 * 1024
API_VERSIONS_KEY = 18
SIZE = struct.Struct(">i")


class RawClient:
    """One connection; requests are answered in order, one at a time."""

    def __init__(self, bootstrap: str, timeout_s: float = TIMEOUT_S, client_id: str = "raw") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.client_id = client_id
        self._correlation_id = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def request(self, entity: Any) -> Any:
        """Send a kio request entity and return the decoded kio response entity."""
        correlation_id = self.send(entity)
        return self.receive(entity.__api_key__, entity.__version__, correlation_id)

    def send(self, entity: Any) -> int:
        self._correlation_id += 1
        self.send_bytes(encode_request(entity, self._correlation_id, self.client_id))
        return self._correlation_id

    def receive(self, api_key: int, api_version: int, correlation_id: int) -> Any:
        """Read one response frame and decode it as the response to (api_key, api_version)."""
        header, body = decode_response(self.read_frame(), api_key, api_version)
        assert header.correlation_id == correlation_id, f"correlation id {header.correlation_id}, not {correlation_id}"
        return body

    def send_bytes(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def read_frame(self) -> bytes:
        """One response frame, without its size prefix."""
        (size,) = SIZE.unpack(self._read_exactly(SIZE.size))
        assert 0 <= size <= FRAME_BYTES_MAX, f"response frame size {size}"
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        parts = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            parts.append(chunk)
            count -= len(chunk)
        return b"".join(parts)


def encode_request(entity: Any, correlation_id: int, client_id: str | None = "raw") -> bytes:
    """A whole request frame (size prefix included) for a kio request entity: the gateway's
    own encoder (what a broker sends another broker)."""
    return codec_encode_request(entity, correlation_id, client_id)


def decode_response(frame_bytes: bytes, api_key: int, api_version: int) -> tuple[Any, Any]:
    """Header and body of a response frame (no size prefix). ApiVersions answers always use
    response header v0, so a client that asked too new a version can still read it (KIP-511)."""
    cls = load_response_schema(api_key, api_version)
    header_cls = ResponseHeaderV0 if api_key == API_VERSIONS_KEY else cls.__header_schema__
    header, used = entity_reader(header_cls)(frame_bytes, 0)
    body, _ = entity_reader(cls)(frame_bytes, used)
    return header, body


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


def is_closed(sock: socket.socket, timeout_s: float) -> bool:
    """True if the peer closed `sock` (recv returns b"") within `timeout_s`; data is skipped."""
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


# -- record batches (magic v2, KIP-98), built by hand

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
CRC_START = 21


def zigzag(value: int) -> bytes:
    """A zig-zag varint, as record fields use."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(offset_delta: int, timestamp_delta: int, value: bytes) -> bytes:
    """A v2 record: no key, no headers."""
    body = (b"\x00" + zigzag(timestamp_delta) + zigzag(offset_delta) + zigzag(-1)
            + zigzag(len(value)) + value + zigzag(0))
    return zigzag(len(body)) + body


def record_batch(values: Sequence[bytes], timestamps_ms: Sequence[int] | int = 1_000,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A valid uncompressed batch of one record per value; base offset 0."""
    assert values, "a batch holds at least one record"
    times = [timestamps_ms] * len(values) if isinstance(timestamps_ms, int) else list(timestamps_ms)
    base_time = times[0]
    records = b"".join(record(i, t - base_time, v) for i, (v, t) in enumerate(zip(values, times, strict=True)))
    length = BATCH_HEADER.size - 12 + len(records)
    header = BATCH_HEADER.pack(0, length, -1, 2, 0, 0, len(values) - 1, base_time, max(times),
                               producer_id, producer_epoch, base_sequence, len(values))
    batch = bytearray(header + records)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def batch_of_size(size: int, timestamp_ms: int = 1_000) -> bytes:
    """A one-record batch of exactly `size` bytes."""
    overhead = len(record_batch([b""], timestamp_ms))
    value_bytes = size - overhead
    for _ in range(3):  # the value's length varint grows with the value
        batch = record_batch([b"v" * value_bytes], timestamp_ms)
        value_bytes -= len(batch) - size
    assert len(batch) == size, (len(batch), size)
    return batch


def serving(client: RawClient, topics: dict[str, int]) -> bool:
    """Every partition of these topics (name -> partition count) has a leader in Metadata and
    answers ListOffsets: the reference Kafka names a new partition's leader a moment before the
    leader serves it, and a Produce or ListOffsets in between gets NOT_LEADER_OR_FOLLOWER."""
    from martlet.protocol.codec import build, request_type

    metadata = client.request(build(request_type(3, 12), {"topics": [{"name": name} for name in topics]}))
    if not all(t.error_code == 0 and len(t.partitions) == topics[t.name] and all(p.leader_id >= 0 for p in t.partitions)
               for t in metadata.topics):
        return False
    asked = [{"name": name, "partitions": [{"partition_index": index, "current_leader_epoch": -1, "timestamp": -1}
                                           for index in range(count)]} for name, count in topics.items()]
    answer = client.request(build(request_type(2, 7), {"replica_id": -1, "isolation_level": 0, "topics": asked}))
    return all(p.error_code == 0 for t in answer.topics for p in t.partitions)
