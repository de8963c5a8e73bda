"""Daemon worker threads for store calls, usable as an asyncio executor.

Unlike ThreadPoolExecutor's threads, these never keep the process from exiting, and the
pool can be topped up: a call that never returns (an HDFS write pipeline whose DataNode
died can wait forever in hdfs-native 0.14.7) is abandoned by the persister, which then adds
a worker so the pool keeps its strength.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class Workers(Executor):
    def __init__(self, count: int, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._numbers = itertools.count()
        self._count = 0
        for _ in range(count):
            self.add_worker()

    def add_worker(self) -> None:
        thread = threading.Thread(target=self._run, name=f"{self._name}-{next(self._numbers)}", daemon=True)
        thread.start()
        self._count += 1

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((future, lambda: fn(*args, **kwargs), ()))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for _ in range(self._count):
            self._queue.put(None)  # idle workers end; a stuck one ends when its call does

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            future, call, _ = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as error:  # noqa: BLE001 - handed to whoever waits
                future.set_exception(error)
