"""GET /api/v1/groups and /api/v1/groups/<id>, and the lag history the console charts.

A group's lag is the sum over its committed offsets of (high watermark - committed), counted
on partitions this node serves (null when it has none). `LagHistory` samples every group's
total lag every SAMPLE_S seconds on the event loop and keeps the last SAMPLES_MAX samples
(an hour); a group that disappears loses its history.

Members' assignments: a classic "consumer" group's members carry a ConsumerProtocolAssignment
(int16 version | int32 topic count | count x (int16 length, UTF-8 name, int32 partition
count, int32 partitions)) the coordinator keeps as opaque bytes; a consumer-protocol
(KIP-848) group's members hold theirs by topic id.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct

from ...engine.api import CommittedOffset, GroupError, PartitionInfo, TopicPartition
from .parser import Request
from .response import HttpError, Json, Response, json_response
from .routes import Router
from .state import HttpState

logger = logging.getLogger(__name__)
SAMPLE_S = 5.0
SAMPLES_MAX = 720
_COUNT = struct.Struct(">i")
_LENGTH = struct.Struct(">h")


class LagHistory:
    def __init__(self, state: HttpState, sample_s: float = SAMPLE_S) -> None:
        self.state = state
        self.sample_s = sample_s
        self.samples: dict[str, collections.deque[tuple[float, int]]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def of(self, group_id: str) -> list[Json]:
        return [{"time": at, "lag": lag} for at, lag in self.samples.get(group_id, ())]

    async def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # a bug here must not end the sampling
                logger.exception("sampling group lag failed")
            await asyncio.sleep(self.sample_s)

    def sample(self) -> None:
        ctx = self.state.ctx
        now = ctx.clock.now_ms() / 1000
        infos = ctx.partitions.infos()
        present = set()
        for row in ctx.groups.listing():
            present.add(row.group_id)
            lag = group_lag(ctx.groups.all_committed(row.group_id), infos)
            if lag is not None:
                self.samples.setdefault(row.group_id, collections.deque(maxlen=SAMPLES_MAX)).append((now, lag))
        for gone in set(self.samples) - present:
            del self.samples[gone]


def group_lag(committed: dict[TopicPartition, CommittedOffset], infos: dict[TopicPartition, PartitionInfo]) -> int | None:
    lags = [max(info.high_watermark - offset.offset, 0) for tp, offset in committed.items()
            if (info := infos.get(tp)) is not None]
    return sum(lags) if lags else None


def add_routes(router: Router, state: HttpState, history: LagHistory) -> None:
    async def groups(_request: Request, _args: tuple[str, ...]) -> Response:
        return json_response({"groups": group_rows(state)})

    async def group(_request: Request, args: tuple[str, ...]) -> Response:
        return json_response(group_doc(state, args[0]) | {"lag_history": history.of(args[0])})

    router.add("GET", "/api/v1/groups", groups)
    router.add("GET", r"/api/v1/groups/([^/]+)", group)


def group_rows(state: HttpState) -> list[Json]:
    ctx = state.ctx
    infos = ctx.partitions.infos()
    rows: list[Json] = []
    for row in ctx.groups.listing():
        view = ctx.groups.describe(row.group_id)
        rows.append({"group_id": row.group_id, "state": row.state, "protocol_type": row.protocol_type,
                     "members": 0 if view is None else len(view.members), "type": row.group_type,
                     "lag": group_lag(ctx.groups.all_committed(row.group_id), infos)})
    return rows


def group_doc(state: HttpState, group_id: str) -> Json:
    ctx = state.ctx
    view = ctx.groups.describe(group_id)
    if view is None:
        raise HttpError(404, f"no group {group_id!r}")
    listed = {row.group_id: row for row in ctx.groups.listing()}.get(group_id)
    return {"group_id": group_id, "state": listed.state if listed else view.state.value,
            "protocol_type": view.protocol_type, "protocol": view.protocol_name, "generation": view.generation_id,
            "members": _members(state, group_id), "offsets": _offsets(state, group_id)}


def _members(state: HttpState, group_id: str) -> list[Json]:
    ctx = state.ctx
    if ctx.groups.is_consumer_group(group_id):
        consumer = ctx.groups.describe_consumer(group_id, ctx.topics.lookup())
        names = {topic.resource.uid.hex: topic.name for topic in ctx.topics}
        if not isinstance(consumer, GroupError):
            return [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                     "assignment": _assigned([(names[tid], p) for tid, p in m.assignment if tid in names])}
                    for m in consumer.members]
    view = ctx.groups.describe(group_id)
    assert view is not None
    return [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
             "assignment": _assigned(assignment_partitions(m.assignment) if view.protocol_type == "consumer" else [])}
            for m in view.members]


def _assigned(pairs: list[tuple[str, int]]) -> list[Json]:
    return [{"topic": topic, "partition": partition} for topic, partition in sorted(pairs)]


def _offsets(state: HttpState, group_id: str) -> list[Json]:
    ctx = state.ctx
    infos = ctx.partitions.infos()
    rows: list[Json] = []
    for tp, offset in sorted(ctx.groups.all_committed(group_id).items()):
        info = infos.get(tp)
        high = None if info is None else info.high_watermark
        rows.append({"topic": tp.topic, "partition": tp.partition, "committed": offset.offset,
                     "high_watermark": high, "lag": None if high is None else max(high - offset.offset, 0),
                     "metadata": offset.metadata, "commit_ms": offset.commit_ms})
    return rows


def assignment_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a ConsumerProtocolAssignment; [] for bytes that are not one."""
    try:
        (count,) = _COUNT.unpack_from(assignment, 2)
        pos, pairs = 2 + _COUNT.size, []
        for _ in range(max(count, 0)):
            (size,) = _LENGTH.unpack_from(assignment, pos)
            name = assignment[pos + 2 : pos + 2 + size].decode()
            pos += 2 + size
            (partitions,) = _COUNT.unpack_from(assignment, pos)
            pos += _COUNT.size
            for _ in range(max(partitions, 0)):
                pairs.append((name, _COUNT.unpack_from(assignment, pos)[0]))
                pos += _COUNT.size
        return pairs
    except (struct.error, UnicodeDecodeError):
        return []
