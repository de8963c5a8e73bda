"""GET /api/v1/messages: records of one partition, for the console's message browser.

    ?topic=T&partition=P[&offset=O | &timestamp=MS | &key=K][&limit=N]

From an offset: the first N records at or after it. From a time: the first N records at or
after the first one with a timestamp at or after MS (Kafka's ListOffsets rule, then forward).
By key: the newest N records with that key among the last KEY_SCAN_MAX records. Otherwise:
the last N records. Only offsets below the high watermark are shown (what consumers see).

Batches are read through the engine's async read path (memory, else the store on its reader
threads) and decoded on a worker thread, so the event loop never decompresses. Keys, values
and header values are shown as UTF-8 with replacement characters, a value cut at
VALUE_CHARS_MAX characters ("truncated": true); `value_bytes` is its real size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from ...engine.api import PartitionInfo, TopicPartition, errors
from ...records.decode import Record, decode_records
from ...records.errors import InvalidBatch
from ...records.header import Buffer, iter_batches
from .parser import Request
from .response import HttpError, Json, Response, json_response
from .routes import Router
from .state import HttpState

LIMIT_DEFAULT = 50
LIMIT_MAX = 500
KEY_SCAN_MAX = 10_000  # records a search by key looks through, back from the end
READ_BYTES = 1 << 20  # one read of the partition
SCAN_BYTES_MAX = 64 << 20  # the most one answer reads
VALUE_CHARS_MAX = 64 << 10


@dataclass(frozen=True, slots=True)
class Wanted:
    tp: TopicPartition
    limit: int
    offset: int | None = None
    timestamp: int | None = None
    key: str | None = None


def add_routes(router: Router, state: HttpState) -> None:
    async def messages(request: Request, _args: tuple[str, ...]) -> Response:
        return json_response({"messages": await find(state, wanted_of(request.query))})

    router.add("GET", "/api/v1/messages", messages)


def wanted_of(query: Mapping[str, str]) -> Wanted:
    if not query.get("topic"):
        raise HttpError(400, "topic is required")
    partition = _integer(query, "partition", None)
    assert partition is not None
    limit = _integer(query, "limit", LIMIT_DEFAULT)
    assert limit is not None
    if not 1 <= limit <= LIMIT_MAX:
        raise HttpError(400, f"limit must be from 1 to {LIMIT_MAX}")
    chosen = [name for name in ("offset", "timestamp", "key") if name in query]
    if len(chosen) > 1:
        raise HttpError(400, "give at most one of offset, timestamp and key")
    return Wanted(TopicPartition(query["topic"], partition), limit, _integer(query, "offset", -1) if "offset" in query
                  else None, _integer(query, "timestamp", -1) if "timestamp" in query else None, query.get("key"))


def _integer(query: Mapping[str, str], name: str, default: int | None) -> int | None:
    text = query.get(name)
    if text is None:
        if default is None:
            raise HttpError(400, f"{name} is required")
        return default
    try:
        return int(text)
    except ValueError:
        raise HttpError(400, f"{name} must be an integer") from None


async def find(state: HttpState, wanted: Wanted) -> list[Json]:
    ctx = state.ctx
    if ctx.topics.find(wanted.tp.topic) is None:
        raise HttpError(404, f"no topic named {wanted.tp.topic!r}")
    try:
        info = ctx.partitions.info(wanted.tp)
        records = await _records(state, wanted, info)
    except errors.UnknownPartition as error:
        raise HttpError(404, str(error)) from None
    except errors.NotServedHere as error:
        raise HttpError(421, f"{error}: ask the broker that leads it") from None
    return [_shown(wanted.tp.partition, record) for record in records]


async def _records(state: HttpState, wanted: Wanted, info: PartitionInfo) -> list[Record]:
    end = info.high_watermark
    if wanted.offset is not None:
        return await read(state, wanted.tp, max(wanted.offset, info.start_offset), end, wanted.limit)
    if wanted.timestamp is not None:
        start = await _offset_at(state, wanted.tp, info, wanted.timestamp)
        return [] if start is None else await read(state, wanted.tp, start, end, wanted.limit)
    if wanted.key is not None:
        key = wanted.key.encode()
        scanned = await read(state, wanted.tp, max(end - KEY_SCAN_MAX, info.start_offset), end, KEY_SCAN_MAX)
        return [record for record in scanned if record.key == key][-wanted.limit:]
    return await read(state, wanted.tp, max(end - wanted.limit, info.start_offset), end, wanted.limit)


async def _offset_at(state: HttpState, tp: TopicPartition, info: PartitionInfo, timestamp: int) -> int | None:
    """The first offset whose record's timestamp is >= `timestamp`, as ListOffsets finds it."""
    _, offset = await state.ctx.partitions.offset_at_time(tp, max(timestamp, 0))
    return None if offset < 0 else offset


async def read(state: HttpState, tp: TopicPartition, start: int, end: int, limit: int) -> list[Record]:
    """Up to `limit` records from offset `start` (below `end`), control batches skipped."""
    found: list[Record] = []
    offset, scanned = start, 0
    while offset < end and len(found) < limit and scanned < SCAN_BYTES_MAX:
        data = await state.ctx.partitions.read(tp, offset, READ_BYTES)
        if not data:
            break
        scanned += len(data)
        records, offset = await asyncio.to_thread(decoded, data, offset)
        found += [record for record in records if start <= record.offset < end][:limit - len(found)]
    return found


def decoded(data: Buffer, offset: int) -> tuple[list[Record], int]:
    """Worker thread: the records of the data batches in `data`, and the offset after them."""
    records: list[Record] = []
    view = memoryview(data)
    for pos, header in iter_batches(view):
        offset = max(offset, header.next_offset)
        if header.is_control:
            continue
        try:
            records += decode_records(view[pos:pos + header.size])
        except (InvalidBatch, ValueError, OSError) as error:
            raise HttpError(500, f"cannot decode the batch at offset {header.base_offset}: {error}") from None
    return records, offset


def _shown(partition: int, record: Record) -> Json:
    value = _text(record.value)
    truncated = value is not None and len(value) > VALUE_CHARS_MAX
    return {"partition": partition, "offset": record.offset, "timestamp": record.timestamp, "key": _text(record.key),
            "value": value[:VALUE_CHARS_MAX] if value is not None and truncated else value,
            "headers": [[name, _text(raw)] for name, raw in record.headers],
            "value_bytes": 0 if record.value is None else len(record.value), "truncated": truncated}


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")
