"""Stores in unit tests: a memory store that fails while it is down and the persister retrying
until the memory budget has room; what this process maps and holds open of a local file; an
executor that runs the background (read-ahead) only when told."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING

from martlet.engine.store.memory import MemoryAppendFile, MemoryStore

if TYPE_CHECKING:  # the engine's store tests need not import the gateway
    from tests.unit.gateway.handlers.harness import Broker

BUDGET_BYTES = 64 << 10


class StoreDown(MemoryStore):
    """A MemoryStore whose log writes fail while `down`, so appended data stays unpersisted."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def open_append(self, path: str) -> MemoryAppendFile:
        if self.down:
            raise OSError("store is down")
        file = super().open_append(path)
        store = self

        class Failing(MemoryAppendFile):
            def write(self, data: bytes | memoryview) -> None:
                if store.down:
                    raise OSError("store is down")
                file.write(data)

            def sync(self) -> None:
                if store.down:
                    raise OSError("store is down")

        return Failing(bytearray())


async def persister_retries(broker: Broker) -> None:
    """Fire the persister's retry timers until the budget has room, then drain."""
    while not broker.engine.partitions.has_room():
        await broker.engine.clock.next_timer(60_000)
    await broker.engine.flush()


def mapped(path: str) -> list[str]:
    """Lines of /proc/self/maps that map `path` (a deleted file shows as '<path> (deleted)')."""
    with open("/proc/self/maps") as maps:
        return [line for line in maps if path in line]


def open_descriptors(path: str) -> list[str]:
    """This process's descriptors open on `path`."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if target.startswith(path):
            found.append(target)
    return found


class Deferred(Executor):
    """Runs what was submitted only when told to: the background, made deterministic."""

    def __init__(self) -> None:
        self.calls: list[Callable[[], object]] = []

    def submit(self, fn: Callable[..., object], /, *args: object, **kwargs: object) -> Future[object]:
        self.calls.append(lambda: fn(*args, **kwargs))
        return Future()

    def run_all(self) -> None:
        while self.calls:
            self.calls.pop(0)()
