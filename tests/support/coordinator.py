"""The coordinator runtime in unit tests: a runtime of the engine's machines over a store, and
the services over it (the group coordinator with its offsets), as engine/service.py wires them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from martlet.engine.coordinator.machine import Machine
from martlet.engine.coordinator.runtime import SHARDS_DEFAULT, Runtime
from martlet.engine.groups.classic import GroupLimits
from martlet.engine.groups.service import Groups
from martlet.engine.offsets.service import Offsets
from martlet.engine.service import MACHINES
from martlet.engine.store import LocalStore, MemoryStore
from martlet.engine.store.base import Store


def open_runtime(store: Store, now_ms: Callable[[], int] = lambda: 0, count: int = SHARDS_DEFAULT,
                 owns: Callable[[int], bool] = lambda number: True, machines: Iterable[Machine] = MACHINES,
                 **options: Any) -> Runtime:
    """Open the shards the store holds (start-up work: call it outside the event loop)."""
    return Runtime.open(store, now_ms, count, machines, owns, **options)


def open_groups(store: Store, limits: GroupLimits, now_ms: Callable[[], int], retention_ms: int,
                count: int = SHARDS_DEFAULT, owns: Callable[[int], bool] = lambda number: True,
                **options: Any) -> Groups:
    """The group coordinator over a fresh runtime of the store; `close_groups` closes both."""
    runtime = open_runtime(store, now_ms, count, owns)
    return Groups(runtime, Offsets(runtime), limits, now_ms, retention_ms, **options)


async def close_groups(groups: Groups) -> None:
    await groups.close()
    await groups.runtime.close()


NOW_MS = 1_000_000  # the time shards made by `shard_store`'s tests write with
STORES = ("memory", "local")  # the stores shard tests run on


def now_ms() -> int:
    return NOW_MS


def shard_store(kind: str, tmp_path: Path) -> Store:
    """A store of `kind` (one of STORES) for a shard test."""
    return MemoryStore() if kind == "memory" else LocalStore(str(tmp_path))
