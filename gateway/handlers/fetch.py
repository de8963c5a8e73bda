"""Fetch (key 1): sessionless fetches with long polling.

Consumers see offsets below the high watermark, which is the checkpoint C: only what is
persisted, so nothing a consumer saw can be taken back by a crash (ARCHITECTURE.md).

The answer is sent as soon as min_bytes are available or an error occurred, else when
max_wait_ms runs out (capped by the gateway's fetch_wait_ms_max). max_bytes bounds the
whole answer and partition_max_bytes each partition, except that the first batch found
is always sent whole, so a batch larger than the limits still gets through (KIP-74).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.errors import EngineError
from ..mapping import error_code
from .common import epoch_error, millis
from .registry import handles


@dataclass(slots=True)
class Wanted:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    max_bytes: int


@handles(1, 4, 12)
async def fetch(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    wanted = [Wanted(t.topic, p.partition, p.fetch_offset, getattr(p, "current_leader_epoch", -1),
                     p.partition_max_bytes) for t in request.topics for p in t.partitions]
    wait_ms = min(max(millis(request.max_wait), 0), ctx.settings.fetch_wait_ms_max)
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        answers, size, failed = await _collect(ctx, wanted, request.max_bytes)
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if size >= request.min_bytes or failed or remaining_ms <= 0 or not wanted:
            break
        watched = [((w.topic, w.partition), w.offset) for w in wanted]
        await ctx.engine.wait_for_data(watched, remaining_ms)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": _group(answers)}


async def _collect(ctx: Any, wanted: list[Wanted], max_bytes: int) -> tuple[list[tuple[str, dict[str, Any]]], int, bool]:
    answers = []
    size = 0
    failed = False
    for item in wanted:
        answer = await _read(ctx, item, max(max_bytes - size, 0), first=size == 0)
        size += len(answer["records"] or b"")
        failed = failed or answer["error_code"] != ErrorCode.none
        answers.append((item.topic, answer))
    return answers, size, failed


async def _read(ctx: Any, item: Wanted, budget_bytes: int, first: bool) -> dict[str, Any]:
    try:
        partition = ctx.engine.partition(item.topic, item.partition)
    except EngineError as error:
        return _answer(item, error_code(error))
    code = epoch_error(item.leader_epoch, partition.session)
    if code != ErrorCode.none:
        return _answer(item, code, partition)
    records = b""
    limit = min(item.max_bytes, budget_bytes)
    if limit > 0 or first:
        try:
            records = await ctx.engine.read(item.topic, item.partition, item.offset, max(limit, 1))
        except EngineError as error:
            return _answer(item, error_code(error), partition)
        if len(records) > limit and not first:
            records = b""  # only the first batch of the answer may exceed the limits
    return _answer(item, ErrorCode.none, partition, records)


def _answer(item: Wanted, code: ErrorCode, partition: Any = None, records: bytes = b"") -> dict[str, Any]:
    high_watermark = partition.high_watermark if partition else -1
    return {"partition_index": item.partition, "error_code": code, "high_watermark": high_watermark,
            "last_stable_offset": high_watermark, "log_start_offset": partition.start_offset if partition else -1,
            "aborted_transactions": [], "preferred_read_replica": -1, "records": records}


def _group(answers: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    grouped: list[dict[str, Any]] = []
    for topic, answer in answers:
        if not grouped or grouped[-1]["topic"] != topic:
            grouped.append({"topic": topic, "partitions": []})
        grouped[-1]["partitions"].append(answer)
    return grouped
