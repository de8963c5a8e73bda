"""Small helpers shared by handler modules."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

T = TypeVar("T")
logger = logging.getLogger(__name__)


def millis(value: Any) -> int:
    """kio hands durations over as timedelta; Kafka speaks milliseconds."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)  # exact: floats turned 1001 ms into 1000
    return int(value)


def epoch_error(requested: int, session: int) -> ErrorCode:
    """KIP-320: a reader names the leader epoch it believes current (-1: no opinion)."""
    if requested < 0 or requested == session:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if requested < session else ErrorCode.unknown_leader_epoch


# Work a handler stopped waiting for: held here so that it runs to its end (the loop keeps
# only weak references to tasks), and its late failure is logged rather than lost.
_unwaited: set[asyncio.Task[object]] = set()


async def within(work: Awaitable[T], timeout_s: float) -> T:
    """The result of `work` if it finishes within `timeout_s`, else TimeoutError.

    For a change written to the store (an offset commit, a topic created) while the store
    is slow or unreachable (hdfs-native retries a NameNode call for about three minutes):
    the client gets a retriable error within its request's timeout instead of waiting past
    it, and the change still runs to its end, as a timed out change does in Kafka. The
    same holds if the handler itself is cancelled (its connection went away)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout_s)
    except (TimeoutError, asyncio.CancelledError):
        if not task.done():  # not the work's own error (a store call past its deadline is a TimeoutError too)
            _unwaited.add(task)
            task.add_done_callback(_finished_late)
        raise


def _finished_late(task: asyncio.Task[object]) -> None:
    _unwaited.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.warning("a change whose request was answered before it finished failed: %r", error)
