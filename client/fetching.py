"""Reading partitions, for both consumers: Kafka's Fetch and ListOffsets sent to each
partition's leader (named by LAYOUT), and the record batches of an answer decoded to Messages.

Fetch v12 names topics by name (v13+ by id). An answer's records are whole v2 batches
(records/header.py) except perhaps the last, cut by the byte limits: it is left for the next
fetch, which starts at the offset after the last whole batch. A batch may begin before the
offset asked for (the broker sends whole batches); its records below it are dropped.

read_committed (isolation level 1, KIP-98): the broker stops at the last stable offset and
lists the aborted transactions overlapping the answer as (producer id, first offset). As a
Kafka consumer does, a producer id becomes "aborted" once a batch reaching its first offset
is seen; its transactional batches are dropped until its ABORT marker (a control batch) is
read. Control batches are never returned, but the position moves past them.
"""

from __future__ import annotations

import asyncio
import datetime
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from ..protocol.native import TopicLayout
from ..records.control import ControlType
from ..records.decode import control_marker, decode_records
from ..records.header import HEADER_BYTES, BatchHeader, crc_ok, parse_header, peek_size
from .brokers import Brokers
from .errors import BrokerError, Disconnected, MartletError, check
from .message import Message

FETCH, LIST_OFFSETS = 1, 2
FETCH_VERSION = 12  # the last that names topics by name
LIST_OFFSETS_VERSION = 7
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
FETCH_BYTES_MAX = 16 * 1024 * 1024
PARTITION_BYTES_MAX = 1024 * 1024
# Answers that mean "ask the layout again and retry" rather than a failure.
STALE_LAYOUT = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                          ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                          ErrorCode.network_exception, ErrorCode.request_timed_out})


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(slots=True)
class Fetched:
    """One partition's part of a Fetch answer: its messages from `offset` on, and where the
    next fetch starts (`next_offset`, = `offset` when nothing whole came)."""

    tp: TopicPartition
    offset: int
    error_code: int = ErrorCode.none
    messages: list[Message] = field(default_factory=list)
    next_offset: int = -1
    high_watermark: int = -1


# -- decoding -----------------------------------------------------------------------------------


class _Aborted:
    """The aborted transactions of one answer, in offset order, and the producers whose
    records are being dropped (see the module docstring)."""

    def __init__(self, listed: Iterable[Any] | None) -> None:
        self._waiting = sorted(((t.first_offset, t.producer_id) for t in listed or ()), reverse=True)
        self._producers: set[int] = set()

    def drops(self, header: BatchHeader, batch: memoryview) -> bool:
        """Whether `batch` is left out: a control batch always (an ABORT ends its producer's
        dropping), a transactional one of an aborted producer."""
        while self._waiting and self._waiting[-1][0] <= header.last_offset:
            self._producers.add(self._waiting.pop()[1])
        if header.is_control:
            if header.producer_id in self._producers and control_marker(batch).control_type is ControlType.ABORT:
                self._producers.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._producers


def decode_fetched(tp: TopicPartition, offset: int, records: bytes | None,
                   aborted: Iterable[Any] | None) -> tuple[list[Message], int]:
    """The messages at or after `offset` in an answer's records, and the offset after the
    last whole batch (`offset` if there is none). A batch whose CRC is wrong is an error."""
    data = memoryview(records or b"")
    skip = _Aborted(aborted)
    messages: list[Message] = []
    pos, next_offset = 0, offset
    while len(data) - pos >= HEADER_BYTES:
        size = peek_size(data, pos)
        if pos + size > len(data):
            break  # cut by the byte limit: the next fetch starts with it
        header = parse_header(data, pos)
        if not crc_ok(data, pos, header):
            raise MartletError(f"{tp.topic}[{tp.partition}]: the batch at offset {header.base_offset} fails its CRC")
        batch = data[pos:pos + size]
        pos += size
        next_offset = max(next_offset, header.next_offset)
        if not skip.drops(header, batch):
            messages += [Message(r.value, r.key, r.headers, r.timestamp, tp.topic, tp.partition, r.offset)
                         for r in decode_records(batch) if r.offset >= offset]
    return messages, next_offset


# -- leaders ------------------------------------------------------------------------------------


class Leaders:
    """The last LAYOUT read of some topics: each partition's leader, topic ids to names, and
    the names of topics asked for by resource name (owner#name#uuid)."""

    def __init__(self, brokers: Brokers) -> None:
        self.brokers = brokers
        self.topics: dict[str, TopicLayout] = {}  # by name
        self._names: dict[str, str] = {}  # asked (name or resource name) -> name

    async def refresh(self, asked: Sequence[str]) -> None:
        """Read the layout of these topics (names or resource names) again; BrokerError for
        one the broker does not know (a resource name: also once the topic was re-created)."""
        for name, topic in zip(asked, await self.brokers.layout(list(asked))):
            check(topic.error_code, f"topic {name!r}")
            self.topics[topic.name] = topic
            self._names[name] = topic.name

    def name(self, asked: str) -> str | None:
        """The name of a topic asked for by name or resource name, once its layout was read."""
        return self._names.get(asked)

    def leader(self, tp: TopicPartition) -> tuple[str, int] | None:
        topic = self.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            return None
        partition = topic.partitions[tp.partition]
        return None if partition.leader_id < 0 or not partition.leader_host else (partition.leader_host, partition.leader_port)

    def partitions(self, name: str) -> list[TopicPartition]:
        topic = self.topics.get(name)
        return [] if topic is None else [TopicPartition(name, p.index) for p in topic.partitions]

    def name_of(self, topic_id: object) -> str | None:
        return next((t.name for t in self.topics.values() if t.topic_id == topic_id), None)


def _by_leader(leaders: Leaders, tps: Iterable[TopicPartition]) -> tuple[dict[tuple[str, int], list[TopicPartition]],
                                                                          list[TopicPartition]]:
    """The partitions grouped by leader address, and those with no leader known."""
    grouped: dict[tuple[str, int], list[TopicPartition]] = defaultdict(list)
    leaderless = []
    for tp in tps:
        address = leaders.leader(tp)
        if address is None:
            leaderless.append(tp)
        else:
            grouped[address].append(tp)
    return grouped, leaderless


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    grouped: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in tps:
        grouped[tp.topic].append(tp)
    return grouped


# -- Fetch --------------------------------------------------------------------------------------


async def fetch(leaders: Leaders, positions: dict[TopicPartition, int], wait_s: float,
                isolation_level: int = READ_COMMITTED) -> list[Fetched]:
    """One Fetch to each leader of these partitions (at these offsets), at once; each waits up
    to `wait_s` for data. A broken connection or an unknown leader is answered per partition
    with NETWORK_EXCEPTION or LEADER_NOT_AVAILABLE (both in STALE_LAYOUT)."""
    grouped, leaderless = _by_leader(leaders, positions)
    found = [Fetched(tp, positions[tp], ErrorCode.leader_not_available, next_offset=positions[tp]) for tp in leaderless]
    answers = await asyncio.gather(*(_fetch_from(leaders.brokers, address, {tp: positions[tp] for tp in tps}, wait_s,
                                                 isolation_level) for address, tps in grouped.items()))
    for answer in answers:
        found += answer
    return found


async def _fetch_from(brokers: Brokers, address: tuple[str, int], positions: dict[TopicPartition, int], wait_s: float,
                      isolation_level: int) -> list[Fetched]:
    topics = [{"topic": topic, "partitions": [{"partition": tp.partition, "fetch_offset": positions[tp],
                                               "partition_max_bytes": PARTITION_BYTES_MAX} for tp in tps]}
              for topic, tps in _by_topic(positions).items()]
    body = {"max_wait": datetime.timedelta(seconds=max(wait_s, 0.0)), "min_bytes": 1, "max_bytes": FETCH_BYTES_MAX,
            "isolation_level": isolation_level, "topics": topics, "forgotten_topics_data": []}
    try:
        answer = await (await brokers.at(*address)).kafka(FETCH, FETCH_VERSION, body)
    except Disconnected:
        return [Fetched(tp, offset, ErrorCode.network_exception, next_offset=offset) for tp, offset in positions.items()]
    check(answer.error_code, "fetch")
    found = []
    for topic in answer.responses:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition_index)
            offset = positions[tp]
            if p.error_code != ErrorCode.none:
                found.append(Fetched(tp, offset, p.error_code, next_offset=offset))
                continue
            messages, next_offset = decode_fetched(tp, offset, p.records, p.aborted_transactions)
            found.append(Fetched(tp, offset, ErrorCode.none, messages, next_offset, p.high_watermark))
    return found


# -- ListOffsets --------------------------------------------------------------------------------


async def list_offsets(leaders: Leaders, tps: Iterable[TopicPartition], timestamp: int,
                       isolation_level: int = READ_COMMITTED) -> dict[TopicPartition, int | ErrorCode]:
    """Each partition's offset for `timestamp` (EARLIEST, LATEST: the last stable offset when
    read_committed), or the error its leader answered (STALE_LAYOUT ones included)."""
    grouped, leaderless = _by_leader(leaders, tps)
    found: dict[TopicPartition, int | ErrorCode] = {tp: ErrorCode.leader_not_available for tp in leaderless}
    for answer in await asyncio.gather(*(_list_from(leaders.brokers, address, members, timestamp, isolation_level)
                                         for address, members in grouped.items())):
        found.update(answer)
    return found


async def _list_from(brokers: Brokers, address: tuple[str, int], tps: list[TopicPartition], timestamp: int,
                     isolation_level: int) -> dict[TopicPartition, int | ErrorCode]:
    topics = [{"name": topic, "partitions": [{"partition_index": tp.partition, "timestamp": timestamp} for tp in members]}
              for topic, members in _by_topic(tps).items()]
    try:
        answer = await (await brokers.at(*address)).kafka(LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": isolation_level, "topics": topics})
    except Disconnected:
        return {tp: ErrorCode.network_exception for tp in tps}
    found: dict[TopicPartition, int | ErrorCode] = {}
    for topic in answer.topics:
        for p in topic.partitions:
            found[TopicPartition(topic.name, p.partition_index)] = int(p.offset) if p.error_code == ErrorCode.none \
                else ErrorCode(p.error_code)
    return found


def offsets_or_raise(found: dict[TopicPartition, int | ErrorCode]) -> dict[TopicPartition, int]:
    """The offsets, or BrokerError for the first partition answered with an error."""
    offsets = {}
    for tp, value in found.items():
        if isinstance(value, ErrorCode):
            raise BrokerError(value, f"{tp.topic}[{tp.partition}]")
        offsets[tp] = value
    return offsets
