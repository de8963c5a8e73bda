"""Plain numbers the engine and the gateway keep for metrics: a latency histogram and the
store's call statistics. No metrics library here: the gateway's collector (gateway/http/
metrics.py) reads these when /metrics is scraped, so the hot path only adds to a list.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass, field

# Upper bounds in seconds, from a memory-only produce to a store call the HDFS client retries.
LATENCY_BOUNDS_S: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                                       5.0, 10.0, 30.0)


class LatencyHistogram:
    """Observations counted by bucket: `counts[i]` holds those <= bounds[i] and > bounds[i-1],
    the last slot those above every bound. Not cumulative; not thread-safe on its own."""

    __slots__ = ("bounds", "counts", "total_s")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BOUNDS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total_s += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations <= it) for each bound, then (inf, all)."""
        running, out = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            out.append((bound, running))
        return out


@dataclass
class StoreStats:
    """Every store call's latency and failures by operation ("read", "write", "sync", ...).
    Calls come from worker threads: one lock around each update. A missing file is an
    answer, not a failure (the storage interface reports it that way)."""

    latency: dict[str, LatencyHistogram] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None  # the latest failure, "operation: message"
    failing: set[str] = field(default_factory=set)  # operations whose latest call failed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def healthy(self) -> bool:
        """False while some operation's latest call failed: a partition that keeps failing to
        write stays unhealthy although its reopens (and other partitions' reads) succeed."""
        return not self.failing

    def succeeded(self, operation: str, seconds: float) -> None:
        with self._lock:
            (self.latency.get(operation) or self._histogram(operation)).observe(seconds)
            if self.failing:  # the usual case: nothing failing, nothing to clear
                self.failing.discard(operation)

    def failed(self, operation: str, seconds: float, error: BaseException) -> None:
        with self._lock:
            self._histogram(operation).observe(seconds)
            self.failures[operation] = self.failures.get(operation, 0) + 1
            self.last_error = f"{operation}: {error}"[:500]
            self.failing.add(operation)

    def snapshot(self) -> tuple[dict[str, LatencyHistogram], dict[str, int]]:
        """Copies to read while calls go on."""
        with self._lock:
            latency = {}
            for operation, histogram in self.latency.items():
                copy = LatencyHistogram(histogram.bounds)
                copy.counts, copy.total_s = list(histogram.counts), histogram.total_s
                latency[operation] = copy
            return latency, dict(self.failures)

    def _histogram(self, operation: str) -> LatencyHistogram:
        histogram = self.latency.get(operation)
        if histogram is None:
            histogram = self.latency[operation] = LatencyHistogram()
        return histogram
