"""The timed store: every call counted by operation with its latency, failures counted and
remembered, missing files not failures, a backend's own attributes passed through."""

from __future__ import annotations

import pytest

from martlet.engine.api import StoreStats, timed_store
from martlet.engine.stats import LatencyHistogram
from martlet.engine.store.memory import MemoryStore
from martlet.engine.store.timed import TimedStore


class Clock:
    """Each reading 3 ms after the last: every call lasts 3 ms."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.003
        return self.now


class Broken(MemoryStore):
    """Renames fail while `away`."""

    away = True

    def rename(self, src: str, dst: str) -> None:
        if self.away:
            raise OSError("the NameNode is away")
        super().rename(src, dst)


def test_calls_are_timed_by_operation() -> None:
    stats = StoreStats()
    store = TimedStore(MemoryStore(), stats, Clock())
    store.mkdir("d")
    file = store.open_append("d/f")
    file.write(b"abc")
    file.sync()
    file.close()
    assert store.read("d/f", 0, 3) == b"abc" and store.size("d/f") == 3 and file.size == 3
    latency, failures = stats.snapshot()
    assert {op: h.count for op, h in latency.items()} == {"mkdir": 1, "open_append": 1, "write": 1, "sync": 1,
                                                        "close": 1, "read": 1, "size": 1}
    assert latency["write"].total_s == pytest.approx(0.003)
    assert failures == {} and stats.healthy and stats.last_error is None


def test_failures_are_counted_and_healthy_again_once_the_failed_operation_succeeds() -> None:
    stats = StoreStats()
    broken = Broken()
    store = timed_store(broken, stats)
    store.mkdir("d")
    with pytest.raises(OSError, match="away"):
        store.rename("d/a", "d/b")
    assert stats.snapshot()[1] == {"rename": 1}
    assert not stats.healthy and stats.last_error == "rename: the NameNode is away"
    assert store.list("d") == []
    assert not stats.healthy  # other operations succeeding do not hide a failing one
    broken.away = False
    store.open_append("d/a").close()
    store.rename("d/a", "d/b")
    assert stats.healthy and stats.last_error == "rename: the NameNode is away"  # the latest failure is kept


def test_a_missing_file_is_an_answer_not_a_failure() -> None:
    stats = StoreStats()
    store = timed_store(MemoryStore(), stats)
    with pytest.raises(FileNotFoundError):
        store.size("nothing")
    assert stats.snapshot()[1] == {} and stats.healthy


def test_backend_attributes_pass_through() -> None:
    inner = MemoryStore()
    store = timed_store(inner, StoreStats())
    assert store.slow_writes is inner.slow_writes and store.slow_reads is inner.slow_reads
    with pytest.raises(AttributeError):
        store.read_blocks  # noqa: B018  # the memory store has none: callers fall back to read


def test_histogram_buckets() -> None:
    histogram = LatencyHistogram((0.001, 0.01))
    for seconds in (0.0005, 0.001, 0.002, 5.0):
        histogram.observe(seconds)
    assert histogram.counts == [2, 1, 1] and histogram.count == 4
    assert histogram.cumulative() == [(0.001, 2), (0.01, 3), (float("inf"), 4)]
