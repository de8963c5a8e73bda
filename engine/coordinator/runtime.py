"""The coordinator runtime: partitioned, replayed coordinator state, split into shards.

Kafka keeps group, offset and transaction state in the partitions of `__consumer_offsets` and
`__transaction_state`, each owned by one coordinator; Martlet keeps it in shards, each a log
of its own (shard.py), replayed on its own, so different processes can own different shards.
The shard is what a coordinator owns (engine/cluster.py); this process opens only the shards
its ClusterView says it owns.

What lives in the shards is registered as machines (machine.py): committed offsets
(engine/offsets), group membership (engine/groups) and transactional ids
(engine/transactions) today. Each record names its owner by a key (a group id, a transactional
id); the key's shard is `shard_of(key, count)`: Kafka's partitionFor, the absolute value of
Java's String.hashCode of the key modulo the shard count, so with Kafka's default of 50 a group
sits in the same shard number as in `__consumer_offsets`. Python's hash() is salted per
process, so it could not be used: every process must agree.

Threads: `open` (start-up, before anything is served) opens and replays the existing shards
and migrates a legacy log in the caller's thread. Once serving, machines read their states
from memory on the event loop, and every record goes through the ShardWriter (writer.py):
made on the loop, appended by the coordinator's worker thread, applied on the loop; `submit`
returns an awaitable that resolves once the record is applied. A shard first written after
start-up is made empty on the loop, without a store call, and its log is created by the worker
thread at the first append.

Moving shards: `load` replays a shard the cluster gave this node and then tells the services
(`listen`, `loaded`); `drop` first lets them finish with it (`dropping`, awaited), then writes
what is queued, closes the log, and tells them it is gone (`dropped`).

Layout under the store root:
    internal/group-shards/count      the shard count, written once when the layout is created;
                                     the setting only applies to a new data dir, since
                                     changing it would move keys away from their records
    internal/group-shards/<n>/       shard n's log, created on the shard's first write
    internal/group-shards/<n>.compact, <n>.old
                                     a compaction under way (shard.py); open settles it

Upgrade: a data dir written before shards has one log for every group at
`internal/group-offsets/`. Opening migrates it: its live records are appended to their shards,
the shards are flushed, then the old log is deleted. A crash before the delete repeats the
migration, which is harmless (every record is an upsert of the same value).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from ..errors import InvalidConfig
from ..store import Store
from ..store.atomic import read_whole, write_atomically
from .machine import Machine, S, State
from .records import Registry
from .shard import COMPACT_SUFFIX, OLD_SUFFIX, SEGMENT_BYTES, Shard
from .writer import ShardWriter

SHARDS_DIR = "internal/group-shards"
COUNT_PATH = f"{SHARDS_DIR}/count"
LEGACY_PATH = "internal/group-offsets"
SHARDS_DEFAULT = 50  # Kafka's offsets.topic.num.partitions
SHARDS_MAX = 10_000


def shard_of(key: str, count: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode()) % count: stable across processes and runs."""
    value = 0
    encoded = key.encode("utf-16-be", "surrogatepass")
    for index in range(0, len(encoded), 2):  # Java hashes UTF-16 code units
        value = (31 * value + (encoded[index] << 8 | encoded[index + 1])) & 0xFFFFFFFF
    signed = value - (1 << 32) if value >= 1 << 31 else value
    return (0 if signed == -(1 << 31) else abs(signed)) % count


async def _nothing(number: int) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Listener:
    """A service told about shards coming and going (see the module docstring)."""

    loaded: Callable[[int], None] = lambda number: None
    dropping: Callable[[int], Awaitable[None]] = _nothing
    dropped: Callable[[int], None] = lambda number: None


class Runtime:
    """Routes each key to its shard: machines read their states from memory, and records go
    through the writer (their awaitables resolve once the record is applied)."""

    def __init__(self, store: Store, now_ms: Callable[[], int], count: int, machines: Iterable[Machine[State]],
                 owns_shard: Callable[[int], bool], segment_bytes: int) -> None:
        self._store = store
        self._now_ms = now_ms
        self.count = count
        self.registry = Registry(machines)
        self.owns = owns_shard
        self._segment_bytes = segment_bytes
        self._shards: dict[int, Shard] = {}
        self._writer = ShardWriter()
        self._listeners: list[Listener] = []

    @classmethod
    def open(cls, store: Store, now_ms: Callable[[], int], count: int, machines: Iterable[Machine[State]],
             owns_shard: Callable[[int], bool] = lambda shard: True,
             segment_bytes: int = SEGMENT_BYTES) -> Runtime:
        """Open the owned shards that exist, after migrating a legacy single log."""
        runtime = cls(store, now_ms, _settle_count(store, count), machines, owns_shard, segment_bytes)
        for number in _shard_numbers(store.list(SHARDS_DIR)):
            if number < runtime.count and owns_shard(number):
                runtime._shards[number] = runtime._open(_shard_path(number))
        if any(store.exists(LEGACY_PATH + suffix) for suffix in ("", COMPACT_SUFFIX, OLD_SUFFIX)):
            runtime._migrate_legacy()  # (a compaction it crashed in is settled by its open)
        return runtime

    def listen(self, listener: Listener) -> None:
        """Tell `listener` about shards loaded and dropped from now on, after those before it."""
        self._listeners.append(listener)

    def shard_of(self, key: str) -> int:
        return shard_of(key, self.count)

    def holds(self, number: int) -> bool:
        return number in self._shards

    # -- reading (event loop)

    def state(self, machine: Machine[S], key: str) -> S | None:
        """The machine's state in the key's shard, if this node has that shard open."""
        return self.state_in(machine, self.shard_of(key))

    def state_in(self, machine: Machine[S], number: int) -> S | None:
        shard = self._shards.get(number)
        return None if shard is None else shard.state(machine)

    def states(self, machine: Machine[S]) -> list[S]:
        """The machine's state in every shard open here."""
        return [shard.state(machine) for shard in self._shards.values()]

    def pending(self, machine: Machine[S], key: str) -> list[object]:
        """The key's records of that machine queued and not yet applied, oldest first."""
        return self._writer.pending(machine.name, key)

    # -- writing (event loop)

    def prepared(self, key: str) -> Shard:
        """The key's shard, made empty if this node owns it and it has no log yet, without a
        store call (`open` opened every shard that has a log); its log is created by its first
        append. What a machine reads before it makes a record for a key never written."""
        number = self.shard_of(key)
        shard = self._shards.get(number)
        if shard is None:
            assert self.owns(number), f"{key!r} is in shard {number}, not served here"
            shard = self._shards[number] = Shard(self._store, _shard_path(number), self._now_ms, self.registry,
                                                 self._segment_bytes)
        return shard

    def submit(self, record: object) -> Awaitable[None]:
        """Queue `record` for its owner's shard; await the result to know it is written and
        applied. ValueError (raised here) if the record breaks its kind's invariants."""
        _, key = self.registry.owner(record)
        return self._writer.submit(self.prepared(key), record)

    async def wait_written(self, timeout_s: float | None = None) -> bool:
        """Until every record queued so far is written and applied (or failed), or
        `timeout_s` passed; True if all had."""
        return await self._writer.wait_written(timeout_s)

    @property
    def stalled(self) -> bool:
        """The store has not taken a queued record for a while (writer.STALLED_S)."""
        return self._writer.stalled

    # -- moving shards

    async def load(self, number: int) -> None:
        """Start serving shard `number` (the cluster gave it to this node): open and replay
        its log on the coordinator's thread, then tell the listeners."""
        if number not in self._shards:
            shard = await self._writer.run(self._open, _shard_path(number))
            self._shards[number] = shard
        for listener in self._listeners:
            listener.loaded(number)

    async def drop(self, number: int) -> None:
        """Stop serving shard `number`: let the listeners finish with it, write its queued
        records, close its log (so the next owner replays everything), tell the listeners."""
        shard = self._shards.get(number)
        if shard is None:
            return
        for listener in self._listeners:
            await listener.dropping(number)
        del self._shards[number]  # no record can name it from now on
        await self._writer.wait_idle(shard)  # those that did are written
        # Closed beside the writer's thread, not on it: a shard's close on HDFS takes about
        # 0.4 s (the NameNode completing its files), and a node handing over its 25 shards one
        # after another on that thread took 10 s to stop.
        await self._writer.close_log(shard)
        for listener in self._listeners:
            listener.dropped(number)

    async def close(self) -> None:
        """Finish the queued records, then close every log (on the worker thread)."""
        await self._writer.close(list(self._shards.values()))
        self._shards.clear()

    def _open(self, path: str) -> Shard:
        return Shard.open(self._store, path, self._now_ms, self.registry, self._segment_bytes)

    def _migrate_legacy(self) -> None:
        legacy = self._open(LEGACY_PATH)
        try:
            for record in legacy.snapshot().records():
                _, key = self.registry.owner(record)
                self.prepared(key).write(record)
        finally:
            legacy.close()
        for shard in self._shards.values():
            shard.flush()  # durable before the only other copy goes
        self._store.delete(LEGACY_PATH)


def _shard_path(number: int) -> str:
    return f"{SHARDS_DIR}/{number}"


def _shard_numbers(names: Iterable[str]) -> set[int]:
    """Shards with a log, or with a compaction to settle (`<n>.compact`, `<n>.old`): a shard
    whose crash left only those still has its state there."""
    stems = (name.split(".", 1)[0] for name in names)
    return {int(stem) for stem in stems if stem.isdigit()}


def _settle_count(store: Store, wanted: int) -> int:
    """The data dir's shard count: the stored one, else `wanted` (stored now)."""
    if not 1 <= wanted <= SHARDS_MAX:
        raise InvalidConfig(f"offsets_shards must be between 1 and {SHARDS_MAX}, not {wanted}")
    if store.exists(COUNT_PATH):
        return int(read_whole(store, COUNT_PATH))
    store.mkdir(SHARDS_DIR)
    write_atomically(store, COUNT_PATH, str(wanted).encode())
    return wanted
