"""The native SDK's wire (protocol/native.py): what one side writes the other reads,
and a malformed request is a ProtocolError, never another exception."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from martlet.protocol.codec import NO_PEER, Peer, ProtocolError, RequestHeader
from martlet.protocol.native import (
    LAYOUT_KEY,
    WRITE_KEY,
    PartitionLayout,
    TopicLayout,
    Write,
    Written,
    decode_layout_answer,
    decode_layout_request,
    decode_write_answer,
    decode_write_request,
    encode_layout_answer,
    encode_write_answer,
    layout_request,
    write_request,
)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
ints = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)


def _unframed(frame: bytes) -> bytes:
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    return frame[4:]


@given(st.lists(st.tuples(names, ints, ints, ints, st.binary(max_size=64)), max_size=5), ints, st.integers(0, 2**31 - 1))
def test_a_write_reads_back_as_written(parts: list[tuple[str, int, int, int, bytes]], timeout_ms: int,
                                       correlation_id: int) -> None:
    writes = [Write(*part) for part in parts]
    frame = b"".join(write_request(timeout_ms, writes, correlation_id, "client-x"))
    header, (timeout, decoded) = decode_write_request(_unframed(frame), 0, Peer("/127.0.0.1"))
    assert (header.api_key, header.correlation_id, header.client_id) == (WRITE_KEY, correlation_id, "client-x")
    assert timeout == timeout_ms
    assert [(w.topic, w.partition, w.version, w.session, bytes(w.records)) for w in decoded] == parts


@given(st.lists(st.builds(Written, names, ints, st.integers(-1, 120), longs, ints, ints, longs, longs, names),
                max_size=5))
def test_a_write_answer_reads_back(answers: list[Written]) -> None:
    frame = encode_write_answer(RequestHeader(WRITE_KEY, 0, 7, "c"), answers)
    assert decode_write_answer(_unframed(frame)) == (7, answers)


def test_a_layout_reads_back() -> None:
    topics = [TopicLayout(0, "t", "o#t#" + str(uuid.UUID(int=5)), uuid.UUID(int=5), 3,
                          (PartitionLayout(0, 0, 32768, 1, "127.0.0.1", 9092, 4, 100),
                           PartitionLayout(1, 32768, 65536, -1, "", -1, -1, -1, 0, 1234))),
              TopicLayout(3, "gone", "", uuid.UUID(int=0), -1, ())]
    request = layout_request(["t", "gone"], 9, "c")
    header, names_asked = decode_layout_request(_unframed(request), 0, NO_PEER)
    assert (header.api_key, names_asked) == (LAYOUT_KEY, ["t", "gone"])
    assert decode_layout_answer(_unframed(encode_layout_answer(header, topics))) == (9, topics)


@given(st.binary(max_size=80))
def test_garbage_is_a_protocol_error(data: bytes) -> None:
    frame = write_request(100, [Write("t", 0, 1, 1, b"abc")], 1, "c")
    whole = _unframed(b"".join(frame))
    for candidate in (data, whole[:len(data) % (len(whole) + 1)], whole + data[:3] if data else whole + b"x"):
        try:
            decode_write_request(candidate, 0, NO_PEER)
        except ProtocolError:
            continue


def test_a_count_beyond_the_frame_is_refused() -> None:
    frame = bytearray(_unframed(layout_request(["t"], 1, "c")))
    frame[-7:-3] = (2**31 - 1).to_bytes(4, "big")  # the topic count
    with pytest.raises(ProtocolError):
        decode_layout_request(bytes(frame), 0, NO_PEER)
