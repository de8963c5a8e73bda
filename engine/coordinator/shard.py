"""One coordinator shard: the states of every machine, persisted through an engine log.

Every record is first appended to an internal PartitionLog at the shard's path as one batch
(records.py) and only then applied in memory, so memory never holds what the log lacks. The
log's append hands the bytes to the OS before it returns, so a record that was written
survives kill -9 (not power loss: that needs a flush). Opening replays the whole log from
empty states; a torn tail was already cut by the log's recovery, so at most the last record is
lost, never one before it.

Two sides, two threads. A record is written in three steps, and the shard's methods belong to
one side each, never sharing data with the other:

    state side (memory only; the event loop)   `state`, `encode`, `apply`, `should_compact`,
                                               `snapshot`, `compacted`
    log side (store calls; the coordinator's   `append`, `rewrite`, `flush`, `close`
    worker thread, one call at a time)

make the record from a machine's state and encode it (state side) -> append it (log side) ->
apply it (state side). writer.py runs the log side on the worker thread and keeps the order;
`write` runs all three steps in the caller's thread, for the start-up migration and for tests.

Compaction keeps the log near the size of the live state: once the log exceeds
max(COMPACT_GROWTH x live estimate, segment_bytes, 2 x its size after the last compaction), the
live states are written as records into a fresh log at <path>.compact, then swapped in:

    1. write and close <path>.compact          crash: <path> is whole, .compact is discarded
    2. rename <path> -> <path>.old             crash: <path> missing, .compact is complete
    3. rename <path>.compact -> <path>         crash: both exist, <path> is the new log
    4. delete <path>.old

`open` (and the log side's first use after a failed compaction) settles each of those states
(`_settle_compaction`) before it reads the log. `rewrite` takes the states to write as an
argument: writer.py hands it a snapshot, so the loop goes on changing the live ones meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

from ...records.header import BatchHeader, iter_batches
from ..log import LogConfig, PartitionLog
from ..store import Store, join
from .machine import Machine, S, State
from .records import Registry

COMPACT_SUFFIX = ".compact"
OLD_SUFFIX = ".old"
COMPACT_GROWTH = 4  # compact once the log is this many times the live state
SEGMENT_BYTES = 64 * 1024 * 1024  # the log's segment size, and the floor compaction waits for
READ_CHUNK_BYTES = 1 << 20  # how much of the log replay reads at a time


class States:
    """Each machine's state in one shard. Memory only; whoever holds it owns it."""

    def __init__(self, registry: Registry, by_machine: dict[str, State] | None = None) -> None:
        self._registry = registry
        self.by_machine = by_machine if by_machine is not None else {m.name: m.empty() for m in registry.machines}

    def apply(self, record: object) -> None:
        self.by_machine[self._registry.machine_of(record)].apply(record)

    def records(self) -> Iterator[object]:
        for state in self.by_machine.values():
            yield from state.records()

    def copy(self) -> States:
        """An independent copy (records themselves are immutable)."""
        return States(self._registry, {name: state.copy() for name, state in self.by_machine.items()})

    @property
    def live_bytes(self) -> int:
        return sum(state.live_bytes for state in self.by_machine.values())


class Shard:
    def __init__(self, store: Store, path: str, now_ms: Callable[[], int], registry: Registry,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        """An empty shard for a path that holds no log yet, made without a store call: the log
        side creates the log at its first append."""
        path = join(path)
        assert path, "a shard's log needs a path below the store's root"
        self._store = store
        self._path = path
        self._now_ms = now_ms
        self.registry = registry
        # No retention: the log is the state, shrunk only by compaction.
        self._config = LogConfig(segment_bytes=segment_bytes, retention_ms=-1, retention_bytes=-1)
        self._states = States(registry)  # state side
        self._compacted_bytes = 0  # state side: log size after this process last compacted it
        self._log: PartitionLog | None = None  # log side; opened at its first use
        self._closed = False

    @classmethod
    def open(cls, store: Store, path: str, now_ms: Callable[[], int], registry: Registry,
             segment_bytes: int = SEGMENT_BYTES) -> Shard:
        """Open the log at `path` (created if missing) and rebuild the states from it."""
        shard = cls(store, path, now_ms, registry, segment_bytes)
        for record in _replay(shard._open_log(), registry):
            shard.apply(record)
        return shard

    # -- the states (state side) ---------------------------------------------------------------

    def state(self, machine: Machine[S]) -> S:
        """The machine's state in this shard."""
        return cast(S, self._states.by_machine[machine.name])

    def encode(self, record: object) -> tuple[bytearray, BatchHeader]:
        """The batch holding `record`; ValueError if it breaks its kind's invariants."""
        return self.registry.to_batch(record, self._now_ms())

    def apply(self, record: object) -> None:
        """Take in a record whose batch is in the log."""
        self._states.apply(record)

    def should_compact(self, log_bytes: int) -> bool:
        """Cheap: a few integer comparisons. The last term keeps an estimate that runs low
        (metadata full of characters JSON escapes) from compacting on every write."""
        floor = max(COMPACT_GROWTH * self._states.live_bytes, self._config.segment_bytes, 2 * self._compacted_bytes)
        return log_bytes > floor

    def snapshot(self) -> States:
        """A copy of the applied states, for `rewrite` to write while these move on."""
        return self._states.copy()

    def compacted(self, log_bytes: int) -> None:
        """The log was rewritten and is now `log_bytes` long."""
        self._compacted_bytes = log_bytes

    # -- the log (log side) ----------------------------------------------------------------------

    def append(self, batch: bytearray, header: BatchHeader) -> int:
        """Append one encoded record; the log's size after it."""
        log = self._open_log()
        try:
            log.append(batch, header)
        except BaseException:
            # The store failed the write (an HDFS writer whose pipeline failed is abandoned and
            # takes no more writes): drop this log, so the next append reopens it, which cuts
            # anything half written, as a partition's log is reopened after a failed flush.
            self._drop_log(log)
            raise
        return log.size_bytes()

    @property
    def log_open(self) -> bool:
        """The log side holds an open log (its next append needs no open, and so no lease
        recovery)."""
        return self._log is not None

    def abandon_log(self) -> None:
        """Give up on the log a stuck store call holds (any thread; takes no lock): nothing
        is written or closed, and the next use of the log side opens it again, which
        recovers it as the store kept it (on HDFS, lease recovery fences the stuck writer)."""
        log = self._log
        if log is not None:
            self._drop_log(log)

    def _drop_log(self, log: PartitionLog) -> None:
        if self._log is log:  # a stuck call failing late must not drop the log opened after it
            self._log = None
        log.abandon()

    def rewrite(self, states: States) -> int:
        """Replace the log by one holding `states` (steps in the module docstring), which must
        be what the log holds now; the new log's size."""
        log = self._open_log()
        compact_path, old_path = self._path + COMPACT_SUFFIX, self._path + OLD_SUFFIX
        for leftover in (compact_path, old_path):  # settled on open: only garbage can be there
            self._store.delete(leftover)
        fresh = PartitionLog.open(self._store, compact_path, self._config, self._now_ms)
        for record in states.records():
            fresh.append(*self.registry.to_batch(record, self._now_ms()))
        fresh.close()  # durable and marked clean before it may replace the current log
        self._log = None  # a failure from here on is settled by the next _open_log
        log.close()
        self._store.rename(self._path, old_path)
        self._store.rename(compact_path, self._path)
        self._store.delete(old_path)
        return self._open_log().size_bytes()

    def _open_log(self) -> PartitionLog:
        assert not self._closed, "coordinator shard is closed"
        if self._log is None:
            _settle_compaction(self._store, self._path)
            self._log = PartitionLog.open(self._store, self._path, self._config, self._now_ms)
        return self._log

    def flush(self) -> None:
        """Make every record so far durable (also against power loss)."""
        self._open_log().flush()

    def close(self) -> None:
        self._closed = True
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- writing in the caller's thread (encode, append, apply) ----------------------------------

    def write(self, record: object | None) -> None:
        """Log first, then memory; then compact if the log has outgrown the states."""
        if record is None:
            return
        log_bytes = self.append(*self.encode(record))
        self.apply(record)
        if self.should_compact(log_bytes):
            self.compact()

    def compact(self) -> None:
        """Rewrite the live states into a fresh log and swap it in."""
        self.compacted(self.rewrite(self._states))


def _replay(log: PartitionLog, registry: Registry) -> Iterator[object]:
    """Every record in the log, oldest first."""
    offset = log.start_offset
    while offset < log.end_offset:
        data = memoryview(log.read(offset, READ_CHUNK_BYTES))
        before = offset
        for position, header in iter_batches(data):
            yield registry.from_batch(data[position : position + header.size], header)
            offset = header.next_offset
        assert offset > before, f"coordinator log returned no whole batch at {before}"


def _settle_compaction(store: Store, path: str) -> None:
    """Finish a compaction that got past its first rename, or discard one that did not."""
    compact_path, old_path = path + COMPACT_SUFFIX, path + OLD_SUFFIX
    if store.exists(old_path) and not store.exists(path):
        # Crashed between the renames: the compacted log is complete (closed before step 2).
        store.rename(compact_path if store.exists(compact_path) else old_path, path)
    store.delete(old_path)
    store.delete(compact_path)
