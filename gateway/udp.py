"""The datagram front end: `[udp] listen = "HOST:PORT"` takes UDP datagrams into topics, for
fire-and-forget telemetry. Nothing is answered; what happened to each datagram is counted
(`UdpCounters`: /metrics and GET /api/v1/status, "udp").

A datagram is one of two formats, told apart by its first byte:

1. text: a first line `TOPIC` or `TOPIC KEY` (one space between; the key is every byte after
   it up to the newline, at least one, at most KEY_BYTES_MAX), then `\\n`, then the value:
   every remaining byte, binary-safe, possibly none. One record, stamped with the time the
   broker took it in. From bash: `printf 'metrics host1\\ncpu=0.5' > d; cat d > /dev/udp/127.0.0.1/9093`
   (each write is a datagram: bash's printf writes a line at a time, cat the file at once).
2. binary: a byte 0x00 (no topic name starts with it), the topic name's length (int16,
   big-endian) and its UTF-8 bytes, the partition (int32, -1: the broker picks), then exactly
   one Kafka v2 record batch, the bytes a producer sends in Produce. It is checked as a
   produced batch is (records/validate.py, the topic's max.message.bytes, timestamps window,
   keyless records on compacted topics, compression.type); control and transactional
   batches are refused, and an idempotent one goes through its producer's sequence checks.

Routing: a keyed text record goes to the partition whose slot range holds its key
(`Topic.partition_for_key`, as the native SDK routes); a keyless one, and a binary batch for
partition -1, round robin over the topic's partitions this node serves. Decisions:

- A datagram is at most DATAGRAM_BYTES_MAX (65,507: the largest UDP payload over IPv4);
  anything larger (IPv6) is malformed, as is an empty one or a text one with no newline.
- A topic not among `[udp] topics` (when the list is given; it must be when the listeners use
  TLS or SASL, since a datagram cannot authenticate): counted not_allowed and dropped, never
  created.
- A topic that does not exist: the datagram is counted unknown_topic and dropped. With
  auto_create_topics on (as Produce does) it also starts the topic's creation, so later
  datagrams for it are taken.
- A partition this node does not serve (a cluster) is counted not_served and dropped: UDP
  has no answer to send the sender elsewhere.
- A full memory budget (unpersisted data waiting for the store) drops the datagrams and
  counts them dropped_full: the receive loop never waits.
- Rate limit: a token bucket per source IP address (not port: a new socket gets no new
  budget), rate_per_source datagrams per second, bursts of one second's worth; 0 turns it
  off. At most SOURCES_MAX sources are tracked.
- A malformed datagram is logged at most once a minute per source IP address.

Text datagrams that arrive together (those ready when the receive loop runs) are gathered
into one record batch per partition, up to FLUSH_RECORDS_MAX records or FLUSH_BYTES_MAX,
and appended as Produce with acks=1 appends (memory, persisted later with the rest).
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import asyncio_dgram

from ..engine.api import Durability, Topic, TopicPartition, errors
from ..records.build import NewRecord, build_batch
from ..records.compression import NONE as UNCOMPRESSED
from ..records.errors import InvalidBatch
from ..records.header import BatchHeader, parse_header, stamp_log_append_time
from ..records.validate import validate_produced
from .context import Context
from .internal_topics import is_internal
from .topic_configs import compression_of
from .writes import Refused, rules_of, within_rules

logger = logging.getLogger(__name__)

DATAGRAM_BYTES_MAX = 65_507  # the largest UDP payload over IPv4 (65,535 - 8 UDP - 20 IP header bytes)
BINARY_MARK = 0x00
KEY_BYTES_MAX = 1024
TOPIC_NAME = re.compile(rb"[A-Za-z0-9._-]{1,249}")  # Kafka's legal topic names (engine/catalog/names.py)
HEADER_LINE_BYTES_MAX = 249 + 1 + KEY_BYTES_MAX
NO_PARTITION = -1
FLUSH_RECORDS_MAX = 4096
FLUSH_BYTES_MAX = 1 << 20
SOURCES_MAX = 10_000
LOG_EVERY_S = 60.0
RECEIVE_BUFFER_BYTES = 4 << 20  # asked of the kernel (net.core.rmem_max caps it): bursts wait there
CREATIONS_MAX = 16  # topic creations in flight at once (auto_create_topics)
_SHORT = struct.Struct(">h")
_INT = struct.Struct(">i")


class Malformed(Exception):
    """A datagram that is neither format; the message says why."""


@dataclass(frozen=True, slots=True)
class TextDatagram:
    topic: str
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class BatchDatagram:
    topic: str
    partition: int  # NO_PARTITION: the broker picks
    batch: bytearray
    header: BatchHeader


def parse(data: bytes) -> TextDatagram | BatchDatagram:
    """The datagram's topic and record(s); Malformed if it is neither format."""
    if not data:
        raise Malformed("empty datagram")
    if len(data) > DATAGRAM_BYTES_MAX:
        raise Malformed(f"datagram of {len(data)} bytes, over {DATAGRAM_BYTES_MAX}")
    if data[0] == BINARY_MARK:
        return _parse_binary(data)
    return _parse_text(data)


def _parse_text(data: bytes) -> TextDatagram:
    end = data.find(b"\n", 0, HEADER_LINE_BYTES_MAX + 1)
    if end < 0:
        raise Malformed(f"no newline in the first {HEADER_LINE_BYTES_MAX + 1} bytes")
    name, space, key = data[:end].partition(b" ")
    if space and not key:
        raise Malformed("a space after the topic but no key")
    if len(key) > KEY_BYTES_MAX:
        raise Malformed(f"key of {len(key)} bytes, over {KEY_BYTES_MAX}")
    return TextDatagram(_topic_name(name), key if space else None, data[end + 1:])


def _parse_binary(data: bytes) -> BatchDatagram:
    if len(data) < 1 + _SHORT.size:
        raise Malformed("binary datagram shorter than its topic length")
    (length,) = _SHORT.unpack_from(data, 1)
    start = 1 + _SHORT.size
    if not 1 <= length <= 249 or len(data) < start + length + _INT.size:
        raise Malformed(f"binary datagram: topic length {length} does not fit")
    topic = _topic_name(data[start:start + length])
    (partition,) = _INT.unpack_from(data, start + length)
    if partition < NO_PARTITION:
        raise Malformed(f"binary datagram: partition {partition}")
    try:
        batch, header = validate_produced(data[start + length + _INT.size:], DATAGRAM_BYTES_MAX)
    except InvalidBatch as invalid:
        raise Malformed(f"binary datagram: {invalid}") from None
    if header.is_transactional:
        raise Malformed("binary datagram: transactional batches need a transaction, which UDP cannot join")
    return BatchDatagram(topic, partition, batch, header)


def _topic_name(raw: bytes) -> str:
    if not TOPIC_NAME.fullmatch(raw) or raw in (b".", b".."):
        raise Malformed(f"not a topic name: {raw[:60]!r}")
    return raw.decode("ascii")


class RateLimiter:
    """A token bucket per source: `rate` a second, a burst of one second's worth; 0: no limit."""

    def __init__(self, rate: int, now_s: Callable[[], float] = time.monotonic, sources_max: int = SOURCES_MAX) -> None:
        self.rate = rate
        self.now_s = now_s
        self.sources_max = sources_max
        self._buckets: dict[str, tuple[float, float]] = {}  # source -> (tokens, when counted)

    def allow(self, source: str) -> bool:
        if self.rate <= 0:
            return True
        now = self.now_s()
        bucket = self._buckets.get(source)
        if bucket is None:
            self._make_room(now)
            tokens = float(self.rate)
        else:
            tokens = min(float(self.rate), bucket[0] + (now - bucket[1]) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[source] = (tokens - 1.0 if allowed else tokens, now)
        return allowed

    def _make_room(self, now: float) -> None:
        """Forget sources whose bucket has refilled (a new one starts full anyway); if that
        frees nothing, the one seen longest ago."""
        if len(self._buckets) < self.sources_max:
            return
        full = [source for source, (tokens, when) in self._buckets.items() if tokens + (now - when) * self.rate >= self.rate]
        for source in full:
            del self._buckets[source]
        if len(self._buckets) >= self.sources_max:
            del self._buckets[next(iter(self._buckets))]

    @property
    def sources(self) -> int:
        return len(self._buckets)


@dataclass(slots=True)
class UdpCounters:
    """Datagrams by outcome since start (and the records of the accepted ones); /metrics and
    /api/v1/status read them."""

    listen: str = ""  # the bound "host:port"
    received: int = 0
    accepted: int = 0
    records: int = 0  # records appended from accepted datagrams (a binary one holds a batch; a resent one none)
    malformed: int = 0
    rate_limited: int = 0
    unknown_topic: int = 0
    dropped_full: int = 0
    not_served: int = 0
    not_allowed: int = 0

    OUTCOMES = ("accepted", "malformed", "rate_limited", "not_allowed", "unknown_topic", "dropped_full",
                "not_served")

    def as_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(slots=True)
class _Pending:
    """Text records waiting for the flush, for one partition."""

    records: list[NewRecord] = field(default_factory=list)
    bytes: int = 0


class UdpListener:
    """Binds the address, then takes every datagram in (see the module header)."""

    def __init__(self, ctx: Context, host: str, port: int, rate_per_source: int,
                 topics: Iterable[str] | None = None, now_s: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.topics = None if topics is None else frozenset(topics)  # those datagrams may write (None: any)
        self.host, self.port = host, port
        self.counters = UdpCounters()
        self.limiter = RateLimiter(rate_per_source, now_s)
        self.now_s = now_s
        self._stream: asyncio_dgram.DatagramServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: dict[TopicPartition, _Pending] = {}
        self._flush_handle: asyncio.Handle | None = None
        self._next: dict[str, int] = {}  # round robin: the next turn per topic
        self._logged: dict[str, float] = {}  # source -> when its last malformed datagram was logged
        self._bug_logged_s = -LOG_EVERY_S
        self._creating: dict[str, asyncio.Task[None]] = {}  # topic name -> its creation (auto_create_topics)

    async def start(self) -> tuple[str, int]:
        self._stream = await asyncio_dgram.bind((self.host, self.port))
        try:
            self._stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        except OSError:
            logger.info("UDP: the kernel refused a %d byte receive buffer", RECEIVE_BUFFER_BYTES)
        host, port = self._stream.sockname[:2]
        self.counters.listen = f"{host}:{port}"
        self._task = asyncio.create_task(self._receive(self._stream), name="udp-receive")
        return host, port

    async def stop(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        if self._stream is not None:
            self._stream.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.wait_created()
        self.flush()

    async def _receive(self, stream: asyncio_dgram.DatagramServer) -> None:
        """Take datagrams until the socket closes. recv() returns at once while datagrams are
        queued, so those that arrived together are taken before the flush call_soon planned."""
        while True:
            try:
                data, address = await stream.recv()
            except asyncio_dgram.TransportClosed:
                return
            except OSError as error:  # an ICMP error reported on the socket: nothing to do with our datagrams
                logger.debug("UDP socket error: %s", error)
                continue
            source = str(address[0]) if isinstance(address, tuple) else str(address)
            try:
                self.take(data, source)
            except Exception:  # our own bug: logged (once a minute), and the listener goes on
                if self.now_s() - self._bug_logged_s >= LOG_EVERY_S:
                    self._bug_logged_s = self.now_s()
                    logger.exception("UDP: a datagram from %s could not be taken", source)

    def take(self, data: bytes, source: str) -> None:
        """Count and route one datagram from `source` (an IP address)."""
        counters = self.counters
        counters.received += 1
        if not self.limiter.allow(source):
            counters.rate_limited += 1
            return
        try:
            datagram = parse(data)
        except Malformed as why:
            self._malformed(source, str(why))
            return
        if self.topics is not None and datagram.topic not in self.topics:
            counters.not_allowed += 1
            self._log(source, f"topic {datagram.topic!r} is not among [udp] topics")
            return
        topic = self.ctx.topics.find(datagram.topic)
        if topic is None:
            counters.unknown_topic += 1
            self._maybe_create(datagram.topic)
        elif isinstance(datagram, TextDatagram):
            self._take_text(topic, datagram, source)
        else:
            self._take_batch(topic, datagram, source)

    def _take_text(self, topic: Topic, datagram: TextDatagram, source: str) -> None:
        if datagram.key is None and topic.config.compacted:
            self._malformed(source, f"a record without a key for compacted topic {topic.name!r}")
            return
        if datagram.key is None:
            index = self._round_robin(topic)  # a partition served here, if any
        else:
            index = topic.partition_for_key(datagram.key)
            index = index if self._serves(topic.name, index) else None
        if index is None:
            self.counters.not_served += 1
            return
        tp = TopicPartition(topic.name, index)
        pending = self._pending.get(tp)
        if pending is None:
            pending = self._pending[tp] = _Pending()
        pending.records.append(NewRecord(datagram.key, datagram.value, self.ctx.clock.now_ms()))
        pending.bytes += len(datagram.value) + len(datagram.key or b"") + 32  # a record's own fields: about 32 bytes
        if len(pending.records) >= FLUSH_RECORDS_MAX or pending.bytes >= min(FLUSH_BYTES_MAX, topic.config.max_batch_bytes):
            self._flush(tp)
        elif self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self.flush)

    def _take_batch(self, topic: Topic, datagram: BatchDatagram, source: str) -> None:
        index = datagram.partition if datagram.partition != NO_PARTITION else self._round_robin(topic)
        if index is not None and index >= topic.partition_count:
            self._malformed(source, f"topic {topic.name!r} has no partition {index}")
            return
        if index is None or not self._serves(topic.name, index):
            self.counters.not_served += 1
            return
        tp = TopicPartition(topic.name, index)
        if tp in self._pending:
            self._flush(tp)  # the text records that came first go first
        try:  # the checks Produce runs (gateway/writes.py)
            written = within_rules(rules_of(topic), tp, datagram.batch, datagram.header, self.ctx.clock.now_ms())
        except (Refused, InvalidBatch) as why:  # InvalidBatch also: compressed records that do not decode
            self._malformed(source, str(why))
            return
        self._append(tp, written.batch, written.header, 1, written.header.record_count)

    def _round_robin(self, topic: Topic) -> int | None:
        """The next of the topic's partitions this node serves; None if it serves none."""
        turn = self._next.get(topic.name, 0)
        count = topic.partition_count
        for step in range(count):
            index = (turn + step) % count
            if self._serves(topic.name, index):
                self._next[topic.name] = index + 1
                return index
        return None

    def _serves(self, topic: str, index: int) -> bool:
        return self.ctx.partitions.session_if_open(topic, index) is not None

    def flush(self) -> None:
        """Append every partition's gathered text records (one batch each)."""
        self._flush_handle = None
        for tp in list(self._pending):
            self._flush(tp)

    def _flush(self, tp: TopicPartition) -> None:
        """Append the partition's gathered text records as one batch."""
        pending = self._pending.pop(tp)
        topic = self.ctx.topics.find(tp.topic)
        if topic is None:  # deleted since
            self.counters.unknown_topic += len(pending.records)
            return
        wanted = compression_of(topic)
        batch = build_batch(pending.records, compression=UNCOMPRESSED if wanted is None else wanted[0])
        header = parse_header(batch)
        if topic.config.timestamp_type == "append":
            header = stamp_log_append_time(batch, pending.records[-1].timestamp)
        self._append(tp, batch, header, len(pending.records), len(pending.records))

    def _append(self, tp: TopicPartition, batch: bytearray, header: BatchHeader, datagrams: int, records: int) -> None:
        """Append as Produce acks=1 does; count the datagrams by outcome (a resent idempotent
        batch is accepted, its records not counted again: the log holds them once)."""
        counters = self.counters
        if not self.ctx.partitions.has_room():
            counters.dropped_full += datagrams
            return
        try:
            appended = self.ctx.partitions.append(tp, batch, header, Durability.MEMORY)
        except (errors.NotServedHere, errors.PartitionClosed):
            counters.not_served += datagrams
            return
        except (errors.UnknownTopic, errors.UnknownPartition):
            counters.unknown_topic += datagrams
            return
        except (errors.EngineError, InvalidBatch) as refused:  # e.g. an idempotent producer's sequence
            counters.malformed += datagrams
            logger.debug("UDP: %s refused: %s", tp, refused)
            return
        counters.accepted += datagrams
        if not appended.duplicate:
            counters.records += records

    def _malformed(self, source: str, why: str) -> None:
        self.counters.malformed += 1
        self._log(source, f"malformed datagram ({why})")

    def _log(self, source: str, what: str) -> None:
        """A refused datagram's line, at most one per source every LOG_EVERY_S."""
        now = self.now_s()
        if now - self._logged.get(source, -LOG_EVERY_S) < LOG_EVERY_S:
            return
        if len(self._logged) >= SOURCES_MAX:
            self._logged = {s: t for s, t in self._logged.items() if now - t < LOG_EVERY_S}
        if len(self._logged) < SOURCES_MAX:
            self._logged[source] = now
            logger.warning("UDP: refused a datagram from %s: %s; more from it are counted, not logged, for %.0f s",
                           source, what, LOG_EVERY_S)

    def _maybe_create(self, name: str) -> None:
        """auto_create_topics: create the topic a datagram named, in the background."""
        if (not self.ctx.settings.auto_create_topics or is_internal(name) or name in self._creating
                or len(self._creating) >= CREATIONS_MAX):
            return
        task = self._creating[name] = asyncio.get_running_loop().create_task(self._create(name))
        task.add_done_callback(lambda _task: self._creating.pop(name, None))

    async def wait_created(self) -> None:
        """Until the topic creations datagrams started have ended."""
        await asyncio.gather(*self._creating.values(), return_exceptions=True)

    async def _create(self, name: str) -> None:
        try:
            await self.ctx.topics.create(name, self.ctx.settings.default_partitions, {})
        except errors.EngineError as error:
            logger.info("UDP: could not create topic %r: %s", name, error)


__all__ = ["BatchDatagram", "Malformed", "RateLimiter", "TextDatagram", "UdpCounters", "UdpListener", "parse"]
