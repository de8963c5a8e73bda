"""Time is injected: the engine asks a Clock, so tests can drive a manual one.

A Clock answers four questions, each the only way engine code reaches time:
- `now_ms`: wall-clock milliseconds since the epoch (record timestamps, retention, group
  deadlines, offset commit times);
- `monotonic`: seconds that never go back (durations, deadlines, least-recently-read order);
- `sleep`: block a worker thread (a poll that waits for the store, e.g. HDFS lease recovery);
- `call_later`: run a callback on the running event loop after a delay (the persister's
  commit, retry, watchdog and checkpoint-publish timers).

SystemClock is the real thing; ManualClock moves only when a test says so and fires its
timers as it passes them, so timer-driven code is tested without real waits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> Timer: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_later(delay_s, callback)


class ManualTimer:
    def __init__(self, due_ms: int, callback: Callable[[], object]) -> None:
        self.due_ms = due_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock for tests. Wall and monotonic time are the same counter; timers fire, in due
    order and each at its due time, when `advance` passes them. Single-threaded: timers are
    armed and fired on the test's event loop (as the engine arms them)."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms
        self._timers: list[tuple[int, int, ManualTimer]] = []  # a heap by (due, arming order)
        self._order = itertools.count()
        self._armed: asyncio.Event | None = None  # set when a timer is armed, for next_timer

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._now_ms / 1000

    def sleep(self, seconds: float) -> None:
        self.advance(math.ceil(seconds * 1000))

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> ManualTimer:
        timer = ManualTimer(self._now_ms + max(0, math.ceil(delay_s * 1000)), callback)
        heapq.heappush(self._timers, (timer.due_ms, next(self._order), timer))
        if self._armed is not None:
            self._armed.set()
        return timer

    def advance(self, delta_ms: int) -> None:
        """Move time forward by delta_ms, firing every timer due by then."""
        assert delta_ms >= 0, "time only moves forward"
        until = self._now_ms + delta_ms
        while self._timers and self._timers[0][0] <= until:
            due, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self._now_ms = max(self._now_ms, due)
                timer.callback()
        self._now_ms = until

    def pending_ms(self) -> list[int]:
        """How far ahead each live timer is due, soonest first."""
        return sorted(due - self._now_ms for due, _, timer in self._timers if not timer.cancelled)

    async def wait_for_timer(self, within_ms: int) -> int:
        """Wait (on the event loop, bounded by the caller) until a timer due within
        `within_ms` is armed; returns how far ahead it is. Timers further ahead (watchdogs)
        are not waited for."""
        while True:
            soon = [delay for delay in self.pending_ms() if delay <= within_ms]
            if soon:
                return soon[0]
            self._armed = asyncio.Event()
            await self._armed.wait()

    async def next_timer(self, within_ms: int) -> int:
        """wait_for_timer, then advance to that timer and fire it; returns how far time moved."""
        delay = await self.wait_for_timer(within_ms)
        self.advance(delay)
        return delay
