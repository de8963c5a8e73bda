"""The UDP front end's datagram formats, rate limit and config (gateway/udp.py); the listener
itself is driven over real sockets in tests/integration/test_udp.py."""

from __future__ import annotations

import struct

import pytest

from martlet.broker.config import ConfigError, from_document, with_udp
from martlet.gateway.udp import (
    DATAGRAM_BYTES_MAX,
    KEY_BYTES_MAX,
    BatchDatagram,
    Malformed,
    RateLimiter,
    TextDatagram,
    parse,
)
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.header import HEADER_BYTES


def binary(topic: str, partition: int, batch: bytes) -> bytes:
    name = topic.encode()
    return b"\x00" + struct.pack(">h", len(name)) + name + struct.pack(">i", partition) + batch


def a_batch(count: int = 2, **kwargs: object) -> bytearray:
    return build_batch([NewRecord(b"k%d" % i, b"v%d" % i, 1_000 + i) for i in range(count)], **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("data", "expected"), [
    (b"metrics host1\ncpu=0.5", TextDatagram("metrics", b"host1", b"cpu=0.5")),
    (b"metrics\ncpu=0.5", TextDatagram("metrics", None, b"cpu=0.5")),
    (b"metrics\n", TextDatagram("metrics", None, b"")),
    (b"m.x_y-1 a key with spaces\n\x00\xff\nbinary\n", TextDatagram("m.x_y-1", b"a key with spaces", b"\x00\xff\nbinary\n")),
])
def test_text_datagrams(data: bytes, expected: TextDatagram) -> None:
    assert parse(data) == expected


@pytest.mark.parametrize(("data", "why"), [
    (b"", "empty"),
    (b"metrics", "no newline"),
    (b"metrics \nvalue", "no key"),
    (b"bad/topic\nvalue", "not a topic name"),
    (b"..\nvalue", "not a topic name"),
    (b"t" * 250 + b"\nvalue", "not a topic name"),
    (b"t" * 300 + b"\nvalue", "not a topic name"),
    (b"t " + b"k" * (KEY_BYTES_MAX + 1) + b"\nvalue", "over 1024"),
    (b"t" * 249 + b" " + b"k" * (KEY_BYTES_MAX + 1) + b"\nvalue", "no newline"),
    (b"t\n" + b"v" * DATAGRAM_BYTES_MAX, "over"),
])
def test_malformed_text(data: bytes, why: str) -> None:
    with pytest.raises(Malformed, match=why):
        parse(data)


def test_a_key_of_the_largest_size_is_taken() -> None:
    datagram = parse(b"t " + b"k" * KEY_BYTES_MAX + b"\nv")
    assert isinstance(datagram, TextDatagram) and datagram.key == b"k" * KEY_BYTES_MAX


def test_binary_datagram() -> None:
    batch = a_batch(3)
    datagram = parse(binary("metrics", 2, batch))
    assert isinstance(datagram, BatchDatagram)
    assert (datagram.topic, datagram.partition, bytes(datagram.batch)) == ("metrics", 2, bytes(batch))
    assert datagram.header.record_count == 3
    assert parse(binary("metrics", -1, batch)).partition == -1  # type: ignore[union-attr]


def corrupt_crc(batch: bytearray) -> bytearray:
    batch[-1] ^= 0xFF
    return batch


@pytest.mark.parametrize(("data", "why"), [
    (b"\x00", "shorter"),
    (b"\x00\x00\x05abc", "does not fit"),
    (b"\x00\xff\xffabc\x00\x00\x00\x00", "does not fit"),
    (binary("metrics", 0, b"")[:-2], "does not fit"),
    (binary("bad topic", 0, a_batch()), "not a topic name"),
    (binary("metrics", -2, a_batch()), "partition -2"),
    (binary("metrics", 0, b""), "shorter than a batch header"),
    (binary("metrics", 0, a_batch()[:HEADER_BYTES + 3]), "truncated"),
    (binary("metrics", 0, corrupt_crc(a_batch())), "CRC"),
    (binary("metrics", 0, a_batch() + a_batch()), "exactly one batch"),
    (binary("metrics", 0, a_batch(transactional=True, producer=Producer(7, 0, 0))), "transactional"),
])
def test_malformed_binary(data: bytes, why: str) -> None:
    with pytest.raises(Malformed, match=why):
        parse(data)


def test_a_control_batch_is_malformed() -> None:
    with pytest.raises(Malformed, match="control"):
        parse(binary("metrics", 0, a_batch(control=True)))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limit_is_a_token_bucket_per_source() -> None:
    clock = Clock()
    limiter = RateLimiter(10, clock)
    assert [limiter.allow("a") for _ in range(12)] == [True] * 10 + [False] * 2  # a burst of one second's worth
    assert limiter.allow("b")  # another source has its own bucket
    clock.now += 0.25
    assert [limiter.allow("a") for _ in range(3)] == [True, True, False]  # 2.5 tokens back
    clock.now += 60
    assert sum(limiter.allow("a") for _ in range(20)) == 10  # refilled to the burst, not beyond


def test_no_rate_limit() -> None:
    limiter = RateLimiter(0, Clock())
    assert all(limiter.allow("a") for _ in range(100_000))
    assert limiter.sources == 0


def test_the_rate_limiter_tracks_a_bounded_number_of_sources() -> None:
    clock = Clock()
    limiter = RateLimiter(5, clock, sources_max=3)
    for source in "abcdef":
        limiter.allow(source)
        assert limiter.sources <= 3
    for _ in range(5):
        limiter.allow("f")
    assert not limiter.allow("f")  # the newest source's bucket was kept


def test_udp_config() -> None:
    config = from_document({"udp": {"listen": "127.0.0.1:9093", "rate_per_source": 50}})
    assert (config.udp_listen, config.udp_rate_per_source) == ("127.0.0.1:9093", 50)
    default = from_document({})
    assert (default.udp_listen, default.udp_rate_per_source) == ("", 10_000)
    assert with_udp(config, "off").udp_listen == ""


@pytest.mark.parametrize("section", [{"listen": "nowhere"}, {"listen": 9093}, {"rate_per_source": -1},
                                     {"rate_per_source": "10"}, {"nope": 1}])
def test_bad_udp_config(section: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"\[udp\]|HOST:PORT"):
        from_document({"udp": section})
