"""Fetch (key 1): sessionless fetches with long polling.

Consumers see offsets below the high watermark, which is the checkpoint C: only what is
persisted, so nothing a consumer saw can be taken back by a crash (ARCHITECTURE.md). A topic
with `martlet.visibility = memory` moves the high watermark to the end of what is in memory:
delivery no longer waits for the store, and a crash may take back what was read (the new
leader epoch tells KIP-320 consumers, through OffsetForLeaderEpoch).

The answer is sent as soon as min_bytes are available or an error occurred, else when
max_wait_ms runs out (capped by the gateway's fetch_wait_ms_max). max_bytes bounds the
whole answer and partition_max_bytes each partition, except that the first batch found
is always sent whole, so a batch larger than the limits still gets through (KIP-74).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest

from ...engine.api import PartitionInfo, TopicPartition, errors
from ..context import Context
from ..mapping import error_code
from ..protocol.answers import FetchableTopicAnswer, FetchAnswer, FetchPartitionDataAnswer, Records
from ..protocol.apis import ApiKey
from ..protocol.codec import RequestHeader
from ..protocol.fetch_wire import encode_fetch_response
from .api import Codec, handles
from .common import epoch_error, millis


@dataclass(slots=True)
class Wanted:
    tp: TopicPartition
    offset: int
    leader_epoch: int
    max_bytes: int


@handles(ApiKey.FETCH, 4, 12, Codec(encode=encode_fetch_response))
async def fetch(ctx: Context, header: RequestHeader, request: FetchRequest) -> FetchAnswer:
    wanted = [Wanted(TopicPartition(t.topic, p.partition), p.fetch_offset, getattr(p, "current_leader_epoch", -1),
                     p.partition_max_bytes) for t in request.topics for p in t.partitions]
    wait_ms = min(max(millis(request.max_wait), 0), ctx.settings.fetch_wait_ms_max)
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        answers, size, failed = await _collect(ctx, wanted, request.max_bytes)
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if size >= request.min_bytes or failed or remaining_ms <= 0 or not wanted:
            break
        await ctx.partitions.wait_for_data([(w.tp, w.offset) for w in wanted], remaining_ms)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": _group(answers)}


async def _collect(ctx: Context, wanted: list[Wanted],
                   max_bytes: int) -> tuple[list[tuple[str, FetchPartitionDataAnswer]], int, bool]:
    answers = []
    size = 0
    failed = False
    for item in wanted:
        answer = await _read(ctx, item, max(max_bytes - size, 0), first=size == 0)
        size += len(answer["records"] or b"")
        failed = failed or answer["error_code"] != ErrorCode.none
        answers.append((item.tp.topic, answer))
    return answers, size, failed


async def _read(ctx: Context, item: Wanted, budget_bytes: int, first: bool) -> FetchPartitionDataAnswer:
    try:
        info = ctx.partitions.info(item.tp)
    except errors.EngineError as error:
        return _answer(item, error_code(error))
    code = epoch_error(item.leader_epoch, info.session)
    if code != ErrorCode.none:
        return _answer(item, code, info)
    records: Records = b""
    limit = min(item.max_bytes, budget_bytes)
    if limit > 0 or first:
        try:
            records = await ctx.partitions.read(item.tp, item.offset, max(limit, 1))
            info = ctx.partitions.info(item.tp)  # after the read: the high watermark covers what it returned
        except errors.EngineError as error:
            return _answer(item, error_code(error), info)
        if len(records) > limit and not first:
            records = b""  # only the first batch of the answer may exceed the limits
    return _answer(item, ErrorCode.none, info, records)


def _answer(item: Wanted, code: ErrorCode, info: PartitionInfo | None = None,
            records: Records = b"") -> FetchPartitionDataAnswer:
    high_watermark = info.high_watermark if info else -1  # also the LSO, until transactions exist
    return {"partition_index": item.tp.partition, "error_code": code, "high_watermark": high_watermark,
            "last_stable_offset": high_watermark, "log_start_offset": info.start_offset if info else -1,
            "aborted_transactions": [], "preferred_read_replica": -1, "records": records}


def _group(answers: list[tuple[str, FetchPartitionDataAnswer]]) -> list[FetchableTopicAnswer]:
    grouped: list[FetchableTopicAnswer] = []
    for topic, answer in answers:
        if not grouped or grouped[-1]["topic"] != topic:
            grouped.append({"topic": topic, "partitions": []})
        grouped[-1]["partitions"].append(answer)  # type: ignore[attr-defined]  # a list while grouping
    return grouped
