"""Time is injected: the engine asks a Clock, so tests can drive a manual one."""

from __future__ import annotations

import time
from typing import Protocol


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, delta_ms: int) -> None:
        assert delta_ms >= 0, "time only moves forward"
        self._now_ms += delta_ms


class Clock(Protocol):
    def now_ms(self) -> int: ...
