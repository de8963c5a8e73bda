"""Daemon worker threads for store calls, each job with a deadline; usable as an asyncio
executor.

A store call can hang inside a client library: hdfs-native 0.14.7 waits forever for the
acknowledgement of a DataNode that was frozen (SIGSTOP, a long GC pause, a hung disk, a cut
network), and a thread blocked there cannot be interrupted from Python. So nothing in Martlet
waits on such a call past its deadline. A job past its deadline is *abandoned*:

- its future fails with StoreTimeout (a TimeoutError, so an OSError: every store-failure
  path of the engine handles it, and whoever awaited the job goes on at once);
- its `abandoned` hook runs first (e.g. the offsets writer drops the log the stuck call
  holds, so the next job reopens it, with lease recovery on HDFS, instead of queueing on it);
- its thread is counted stuck (a warning, `martlet_store_calls_stuck`,
  `martlet_store_calls_abandoned_total`) and replaced by a fresh worker, so the pool keeps
  its strength;
- when the stuck call returns at last, its outcome is dropped, that is logged, and the thread
  ends (its replacement serves) or, if it was never replaced, serves again.

Replacements are bounded process-wide (STUCK_MAX threads stuck at once): beyond it a pool is
not topped up, and a job submitted to a pool whose every thread is stuck fails at once, so
stuck calls can neither grow threads without end nor hold a pool's callers.

A job's deadline counts from its submission: time queued behind other jobs counts, and a job
whose deadline passed while queued fails without running. One daemon thread watches every
pool's deadlines (WATCH_S); `check_deadlines` runs the same check on demand (tests).
Threads are daemons: a stuck one never keeps the process from exiting.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

STUCK_MAX = 256  # threads stuck in store calls at once, over every pool, before pools stop being topped up
WATCH_S = 0.25  # how often the watchdog looks at the deadlines


class StoreTimeout(TimeoutError):
    """A store call did not return within its deadline and was abandoned."""


@dataclass
class StuckCalls:
    """Threads stuck in store calls, over the whole process (for /metrics and the status page)."""

    now: int = 0  # abandoned and not returned yet
    abandoned_total: int = 0
    returned_total: int = 0  # abandoned calls that returned later
    last: str | None = None  # the latest abandoned call, "what (pool)"
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, what: str) -> int:
        with self._lock:
            self.now += 1
            self.abandoned_total += 1
            self.last = what
            return self.now

    def returned(self) -> int:
        with self._lock:
            self.now -= 1
            self.returned_total += 1
            return self.now


STUCK = StuckCalls()


@dataclass(eq=False)
class _Job:
    future: Future[Any]
    call: Callable[[], Any]
    what: str
    submitted: float
    deadline: float | None
    abandoned: Callable[[], None] | None


@dataclass(eq=False)
class _Worker:
    job: _Job | None = None
    stuck: bool = False  # its job was abandoned and has not returned
    replaced: bool = False  # a fresh worker took its place


class Workers(Executor):
    def __init__(self, count: int, name: str, deadline_s: float | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """`count` threads named `name-N`; `deadline_s` is the deadline of jobs submitted
        through the Executor API (`submit`, run_in_executor), None for none."""
        self.name = name
        self.deadline_s = deadline_s
        self._monotonic = monotonic
        self._numbers = itertools.count()
        self._lock = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._workers: list[_Worker] = []
        self._live = 0  # workers not stuck
        self._stopping = False
        for _ in range(count):
            self._start_worker()
        _watch(self)

    # -- submitting

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self.call(lambda: fn(*args, **kwargs), getattr(fn, "__name__", "a store call"), self.deadline_s)

    def call(self, call: Callable[[], T], what: str, deadline_s: float | None,
             abandoned: Callable[[], None] | None = None) -> Future[T]:
        """Run `call` on a worker; the future fails with StoreTimeout past `deadline_s` (None:
        never), after `abandoned` ran (on the watchdog's thread)."""
        future: Future[T] = Future()
        now = self._monotonic()
        job = _Job(future, call, what, now, None if deadline_s is None else now + deadline_s, abandoned)
        with self._lock:
            if self._live == 0 and not self._stopping:
                future.set_exception(StoreTimeout(
                    f"{what}: every thread of {self.name} is stuck in a store call ({STUCK.now} stuck in all)"))
                return future
            self._queue.append(job)
            self._lock.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Workers end once the queue is empty; a stuck one ends when its call does."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()

    # -- deadlines

    def check_deadlines(self) -> None:
        """Abandon every job past its deadline, queued or running."""
        now = self._monotonic()
        with self._lock:
            late = [job for job in self._queue if job.deadline is not None and now >= job.deadline]
            for job in late:
                self._queue.remove(job)
            running = [worker for worker in self._workers if worker.job is not None and not worker.stuck
                       and worker.job.deadline is not None and now >= worker.job.deadline]
        for job in late:
            _fail(job.future, StoreTimeout(f"{job.what} waited {now - job.submitted:.0f} s for a thread of "
                                           f"{self.name} and was given up"))
        for worker in running:
            self._abandon(worker, now)

    def abandon(self, future: object) -> None:
        """Give up on the job behind `future` now, as if its deadline had passed."""
        now = self._monotonic()
        with self._lock:
            queued = [job for job in self._queue if job.future is future]
            for job in queued:
                self._queue.remove(job)
            running = [w for w in self._workers if w.job is not None and w.job.future is future and not w.stuck]
        for job in queued:
            _fail(job.future, StoreTimeout(f"{job.what} was given up before it ran"))
        for worker in running:
            self._abandon(worker, now)

    def _abandon(self, worker: _Worker, now: float) -> None:
        with self._lock:
            job = worker.job
            if job is None or worker.stuck:
                return  # it returned meanwhile
            worker.stuck = True
            self._live -= 1
        took_s = now - job.submitted
        if job.abandoned is not None:
            try:
                job.abandoned()
            except Exception:  # noqa: BLE001 - the pool must go on
                logger.exception("giving up on %s failed", job.what)
        stuck = STUCK.add(f"{job.what} ({self.name})")
        replaced = stuck <= STUCK_MAX
        if replaced:  # before the waiter hears: the call it makes next must find a live thread
            with self._lock:
                worker.replaced = True
                self._start_worker()
        _fail(job.future, StoreTimeout(f"the store did not finish {job.what} in {took_s:.0f} s"))
        logger.warning("%s: %s stuck in the store for %.0f s, abandoned (%d store calls stuck now)%s",
                       self.name, job.what, took_s, stuck,
                       "" if replaced else f"; not replaced, {STUCK_MAX} stuck threads is the bound")

    # -- worker threads

    def _start_worker(self) -> None:
        """Under the lock (or in the constructor)."""
        worker = _Worker()
        self._workers.append(worker)
        self._live += 1
        thread = threading.Thread(target=self._run, args=(worker,), name=f"{self.name}-{next(self._numbers)}",
                                  daemon=True)
        thread.start()

    def _next(self, worker: _Worker) -> _Job | None:
        with self._lock:
            while True:
                while not self._queue and not self._stopping:
                    self._lock.wait()
                if not self._queue:
                    return None
                job = self._queue.popleft()
                if job.future.set_running_or_notify_cancel():
                    worker.job = job
                    return job

    def _run(self, worker: _Worker) -> None:
        try:
            while (job := self._next(worker)) is not None:
                try:
                    result = job.call()
                except BaseException as error:  # noqa: BLE001 - handed to whoever waits
                    _fail(job.future, error)
                else:
                    _succeed(job.future, result)
                if not self._finished(worker, job):
                    return
        finally:
            with self._lock:
                self._workers.remove(worker)
                if not worker.stuck:
                    self._live -= 1

    def _finished(self, worker: _Worker, job: _Job) -> bool:
        """After a job: False if this thread should end (it was stuck and replaced)."""
        with self._lock:
            worker.job = None
            if not worker.stuck:
                return True
            if not worker.replaced:  # serves again (a replaced one ends, still out of _live)
                worker.stuck = False
                self._live += 1
        stuck = STUCK.returned()
        logger.warning("%s: %s returned %.0f s after it was submitted, past its deadline; its outcome was "
                       "dropped (%d store calls stuck now)", self.name, job.what, self._monotonic() - job.submitted,
                       stuck)
        return not worker.replaced


def _succeed(future: Future[T], result: T) -> None:
    try:
        future.set_result(result)
    except InvalidStateError:  # abandoned: nobody waits for this outcome any more
        pass


def _fail(future: Future[T], error: BaseException) -> None:
    try:
        future.set_exception(error)
    except InvalidStateError:
        pass


_pools: weakref.WeakSet[Workers] = weakref.WeakSet()
_watch_lock = threading.Lock()
_watcher: threading.Thread | None = None


def _watch(pool: Workers) -> None:
    """Have the watchdog thread check `pool`'s deadlines from now on (started once)."""
    global _watcher
    with _watch_lock:
        _pools.add(pool)
        if _watcher is None:
            _watcher = threading.Thread(target=_watch_forever, name="martlet-store-watchdog", daemon=True)
            _watcher.start()


def _watch_forever() -> None:
    while True:
        time.sleep(WATCH_S)
        for pool in list(_pools):
            try:
                pool.check_deadlines()
            except Exception:  # noqa: BLE001 - the watchdog must go on
                logger.exception("checking the deadlines of %s failed", pool.name)
