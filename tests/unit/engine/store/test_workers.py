"""Worker threads with deadlines (engine/store/workers.py): a job past its deadline is
abandoned (its future fails, its hook runs, its thread is counted stuck and replaced), a
stuck thread that returns ends, a job that waited out its deadline in the queue never runs,
and the number of stuck threads is bounded. Deadlines are checked on a clock the test moves."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from martlet.engine.store import workers
from martlet.engine.store.workers import STUCK, StoreTimeout, Workers

WAIT_S = 10.0  # bounds every wait: a broken pool fails the test instead of hanging it


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def blocking(started: threading.Event, release: threading.Event, result: str = "late") -> str:
    started.set()
    assert release.wait(WAIT_S)
    return result


def test_a_job_past_its_deadline_is_abandoned_and_its_thread_replaced() -> None:
    clock, started, release = Clock(), threading.Event(), threading.Event()
    pool = Workers(1, "test-pool", monotonic=clock)
    hooked: list[str] = []
    returned_before, abandoned_before = STUCK.returned_total, STUCK.abandoned_total  # other tests' threads count too
    try:
        stuck = pool.call(lambda: blocking(started, release), "a hanging call", 5.0,
                          abandoned=lambda: hooked.append("hook"))
        assert started.wait(WAIT_S)
        clock.now = 4.9
        pool.check_deadlines()
        assert not stuck.done()
        clock.now = 5.0
        pool.check_deadlines()
        with pytest.raises(StoreTimeout, match="a hanging call"):
            stuck.result(WAIT_S)
        assert hooked == ["hook"]
        assert STUCK.abandoned_total == abandoned_before + 1
        # the replacement serves while the stuck thread still hangs
        assert pool.call(lambda: "fresh", "a quick call", 5.0).result(WAIT_S) == "fresh"
    finally:
        release.set()
    _wait_until(lambda: STUCK.returned_total > returned_before)  # the stuck call returned: counted, its thread ends
    assert stuck.exception() is not None  # its late result was dropped
    assert pool.call(lambda: "still", "another call", None).result(WAIT_S) == "still"
    pool.shutdown()


def test_a_job_that_waits_out_its_deadline_in_the_queue_never_runs() -> None:
    clock, started, release = Clock(), threading.Event(), threading.Event()
    pool = Workers(1, "test-queue", monotonic=clock)
    ran: list[str] = []
    try:
        busy = pool.call(lambda: blocking(started, release, "done"), "a long call", None)
        assert started.wait(WAIT_S)
        queued = pool.call(lambda: ran.append("ran"), "a queued call", 1.0)
        clock.now = 1.0
        pool.check_deadlines()
        with pytest.raises(StoreTimeout, match="waited 1 s for a thread"):
            queued.result(WAIT_S)
    finally:
        release.set()
    assert busy.result(WAIT_S) == "done"
    assert pool.call(lambda: "next", "a call", None).result(WAIT_S) == "next"
    assert ran == []
    pool.shutdown()


def test_abandon_gives_up_on_a_running_job_now() -> None:
    started, release = threading.Event(), threading.Event()
    pool = Workers(1, "test-abandon")
    try:
        job: Future[str] = pool.call(lambda: blocking(started, release), "a call given up", None)
        assert started.wait(WAIT_S)
        pool.abandon(job)
        with pytest.raises(StoreTimeout):
            job.result(WAIT_S)
        assert pool.call(lambda: "served", "the next call", None).result(WAIT_S) == "served"
    finally:
        release.set()
    pool.shutdown()


def test_beyond_the_bound_stuck_threads_are_not_replaced_and_calls_fail_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "STUCK_MAX", -1)  # beyond the bound, whatever other tests left stuck
    clock, started, release = Clock(), threading.Event(), threading.Event()
    pool = Workers(1, "test-bound", monotonic=clock)
    try:
        stuck = pool.call(lambda: blocking(started, release), "a hanging call", 1.0)
        assert started.wait(WAIT_S)
        clock.now = 1.0
        pool.check_deadlines()
        with pytest.raises(StoreTimeout):
            stuck.result(WAIT_S)
        refused = pool.call(lambda: "never", "a call while every thread is stuck", None)
        with pytest.raises(StoreTimeout, match="every thread of test-bound is stuck"):
            refused.result(0)  # failed at once, not queued
    finally:
        release.set()
    # the stuck thread was never replaced, so it serves again once its call returns
    _wait_until(lambda: pool.call(lambda: "back", "a call", None).exception(WAIT_S) is None)
    pool.shutdown()


def _wait_until(condition: object) -> None:
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if condition():  # type: ignore[operator]
            return
        done.wait(0.01)
    raise AssertionError("condition not met in time")
