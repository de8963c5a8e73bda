"""How the front ends wait for a change written to the store (a topic created, deleted or
grown, an offset commit): within the request's timeout, after which the client gets a
retriable answer while the change still runs to its end, as in Kafka. Kafka's handlers and
the HTTP API share it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)

DDL_TIMEOUT_S = 30.0  # a change's wait when the request sets no timeout (Kafka's request.timeout.ms)
TIMED_OUT = "the store did not complete the change within the request's timeout; it may still complete"

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
