"""The event loop behind the synchronous classes: one daemon thread running an asyncio loop,
on which the asynchronous core does its work; a synchronous call waits for its coroutine."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Protocol, Self, TypeVar

from .errors import MartletError

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `coroutine` on the loop and return what it returns (or raise what it raises)."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a synchronous call from a callback would wait for itself: use the asynchronous class")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self.loop.close()


class Closable(Protocol):
    async def close(self) -> None: ...


class Synchronous:
    """What a synchronous class shares: its asynchronous core's calls run on a LoopThread of
    its own; once closed, a call raises MartletError; close() a second time does nothing."""

    def __init__(self, thread_name: str, core: Closable, noun: str) -> None:
        self._loop = LoopThread(thread_name)
        self._core, self._noun = core, noun
        self._closed = False

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coroutine.close()
            raise MartletError(f"the {self._noun} is closed")
        return self._loop.run(coroutine)

    def close(self) -> None:
        """Close the core (its connections, and what its own close() does); then the thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._core.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
