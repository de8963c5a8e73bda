"""Coordinator state split into shards (runtime.py): stable routing, lazy shards, a fixed
count, shards loaded and dropped with their listeners told, and the upgrade from the single
offsets log of earlier versions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from martlet.engine.coordinator.machine import Kind, Machine
from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.runtime import (
    COUNT_PATH,
    LEGACY_PATH,
    SHARDS_DIR,
    SHARDS_MAX,
    Listener,
    Runtime,
    shard_of,
)
from martlet.engine.coordinator.shard import Shard
from martlet.engine.errors import CorruptBatch, InvalidConfig
from martlet.engine.groups import records as membership
from martlet.engine.groups.membership import ClassicGroupRecord
from martlet.engine.offsets import state as offsets_machine
from martlet.engine.offsets.records import Commit, DeleteGroup
from martlet.engine.offsets.service import Offsets
from martlet.engine.service import MACHINES
from martlet.engine.store import MemoryStore
from martlet.engine.transactions import records as transactions
from martlet.engine.transactions.records import TxnRecord
from martlet.engine.transactions.types import TxnMetadata, TxnState
from martlet.engine.types import CommittedOffset
from martlet.records.header import HEADER_BYTES, LENGTH_FIELD_END, MAGIC, BatchHeader, pack_header, parse_header, set_crc
from tests.support.coordinator import open_runtime


def offset(value: int) -> CommittedOffset:
    return CommittedOffset(value, -1, None, 0, "id-t")


def commit(shard: Shard, group_id: str, value: int, partition: int = 0) -> None:
    """A commit written through a shard in the caller's thread (the layout of earlier
    versions: one log at LEGACY_PATH)."""
    shard.write(Commit(group_id, (("t", partition, offset(value)),)))


def commit_all(runtime: Runtime, *commits: tuple[str, int]) -> None:
    """Commit (group, value) pairs through the runtime, as the event loop does."""
    async def run() -> None:
        for group_id, value in commits:
            await Offsets(runtime).commit(group_id, [("t", "id-t", 0, offset(value))])
    asyncio.run(run())


def close(runtime: Runtime) -> None:
    asyncio.run(runtime.close())


def open_legacy(store: MemoryStore) -> Shard:
    return Shard.open(store, LEGACY_PATH, lambda: 0, Registry(MACHINES))


def append_as_written_before(shard: Shard, payload: bytes) -> None:
    """Append a payload byte for byte as earlier versions framed it (their JSON put "group"
    before "type"), bypassing today's encoder."""
    length = HEADER_BYTES - LENGTH_FIELD_END + len(payload)
    batch = bytearray(pack_header(BatchHeader(0, length, -1, MAGIC, 0, 0, 0, 0, 0, -1, -1, -1, 1))) + payload
    set_crc(batch)
    shard.append(batch, parse_header(batch))


def txn(transactional_id: str) -> TxnMetadata:
    return TxnMetadata(transactional_id, 7, 0, 60_000, TxnState.EMPTY)


@pytest.mark.parametrize(("group_id", "shard"), [
    ("a", 97 % 50),                  # "a".hashCode() == 97
    ("hello", 99162322 % 50),        # a well-known Java hashCode
    ("", 0),
    ("polygenelubricants", 0),       # hashCode() == Integer.MIN_VALUE: Kafka's Utils.abs gives 0
])
def test_groups_land_in_kafkas_consumer_offsets_partition(group_id: str, shard: int) -> None:
    assert shard_of(group_id, 50) == shard


def test_each_group_lives_in_its_own_shard_log_created_on_first_write() -> None:
    store = MemoryStore()
    runtime = open_runtime(store, count=8)
    assert store.list(SHARDS_DIR) == ["count"]
    groups = [f"g{n}" for n in range(20)]
    commit_all(runtime, *((group_id, n) for n, group_id in enumerate(groups)))
    used = sorted({shard_of(g, 8) for g in groups})
    assert len(used) > 1
    assert store.list(SHARDS_DIR) == sorted(["count", *map(str, used)])
    assert all(runtime.holds(number) == (number in used) for number in range(8))
    close(runtime)
    reopened = open_runtime(store, count=8)
    offsets = Offsets(reopened)
    assert offsets.groups() == sorted(groups)
    assert [offsets.fetch(g, "t", 0, "id-t") for g in groups] == [offset(n) for n in range(20)]
    close(reopened)


def test_the_shard_count_is_fixed_when_the_data_dir_is_first_used() -> None:
    store = MemoryStore()
    runtime = open_runtime(store, count=8)
    commit_all(runtime, ("g", 5))
    close(runtime)
    reopened = open_runtime(store, count=50)  # a changed setting must not move groups
    assert reopened.count == 8 and store.read(COUNT_PATH, 0, 10) == b"8"
    assert reopened.shard_of("g") == shard_of("g", 8)
    assert Offsets(reopened).fetch("g", "t", 0, "id-t") == offset(5)
    close(reopened)


@pytest.mark.parametrize("count", [0, -1, SHARDS_MAX + 1])
def test_a_shard_count_out_of_range_is_refused(count: int) -> None:
    store = MemoryStore()
    with pytest.raises(InvalidConfig):
        open_runtime(store, count=count)
    assert not store.exists(COUNT_PATH)


def test_only_owned_shards_are_opened() -> None:
    store = MemoryStore()
    runtime = open_runtime(store, count=4)
    mine, theirs = "a", next(g for g in (f"g{n}" for n in range(100)) if shard_of(g, 4) != shard_of("a", 4))
    commit_all(runtime, (mine, 1), (theirs, 2))
    close(runtime)
    partial = open_runtime(store, count=4, owns=lambda shard: shard == shard_of("a", 4))
    offsets = Offsets(partial)
    assert offsets.groups() == [mine]
    assert offsets.fetch(theirs, "t", 0, "id-t") is None
    assert partial.holds(shard_of(mine, 4)) and not partial.holds(shard_of(theirs, 4))
    assert partial.state(offsets_machine.MACHINE, theirs) is None
    assert partial.state_in(offsets_machine.MACHINE, shard_of(theirs, 4)) is None
    close(partial)


def test_records_are_routed_by_their_key_to_its_shard_and_machine() -> None:
    """A group's offsets and membership, and a transactional id of the same name, all live in
    the shard of that name, each in its own machine's state."""
    store = MemoryStore()
    runtime = open_runtime(store, count=8)
    group = ClassicGroupRecord("x", 1, "consumer", "range", None, ())
    other = next(g for g in (f"g{n}" for n in range(100)) if shard_of(g, 8) != shard_of("x", 8))

    async def run() -> None:
        await Offsets(runtime).commit("x", [("t", "id-t", 0, offset(1))])
        await runtime.submit(group)
        await runtime.submit(TxnRecord(txn("x")))
        await runtime.submit(TxnRecord(txn(other)))
    asyncio.run(run())

    number = runtime.shard_of("x")
    assert number == shard_of("x", 8) and runtime.holds(number)
    assert runtime.state(membership.MACHINE, "x").get("x") == group
    assert runtime.state_in(membership.MACHINE, number).get("x") == group
    assert runtime.state(transactions.MACHINE, "x").get("x") == txn("x")
    assert runtime.state(transactions.MACHINE, "x").get(other) is None  # in its own shard
    assert runtime.state(transactions.MACHINE, other).get(other) == txn(other)
    assert runtime.state(offsets_machine.MACHINE, "x").groups == {"x": {("t", 0): offset(1)}}
    assert sorted(meta.transactional_id for state in runtime.states(transactions.MACHINE)
                  for meta in state.all()) == sorted(["x", other])
    assert len(runtime.states(offsets_machine.MACHINE)) == 2  # one per shard open here
    close(runtime)
    reopened = open_runtime(store, count=8)
    assert reopened.state(membership.MACHINE, "x").get("x") == group
    assert reopened.state(transactions.MACHINE, other).get(other) == txn(other)
    close(reopened)


def test_a_record_of_a_shard_not_owned_here_is_refused() -> None:
    store = MemoryStore()
    runtime = open_runtime(store, count=4, owns=lambda number: number == shard_of("a", 4))
    theirs = next(g for g in (f"g{n}" for n in range(100)) if shard_of(g, 4) != shard_of("a", 4))

    async def run() -> None:
        with pytest.raises(AssertionError):
            await Offsets(runtime).commit(theirs, [("t", "id-t", 0, offset(1))])
    asyncio.run(run())
    assert not runtime.holds(shard_of(theirs, 4))
    close(runtime)


def test_a_shard_left_mid_compaction_is_opened_and_settled() -> None:
    """A crash between the compaction's renames leaves only <n>.old and <n>.compact: the shard
    still has its state there, and opening finds it."""
    store = MemoryStore()
    runtime = open_runtime(store, count=4)
    commit_all(runtime, ("g", 5))
    close(runtime)
    number = shard_of("g", 4)
    store.rename(f"{SHARDS_DIR}/{number}", f"{SHARDS_DIR}/{number}.old")
    reopened = open_runtime(store, count=4)
    assert Offsets(reopened).fetch("g", "t", 0, "id-t") == offset(5)
    assert store.list(SHARDS_DIR) == sorted(["count", str(number)])
    close(reopened)


# -- moving shards


class Told:
    """A listener that writes down what it is told, and what the runtime held meanwhile."""

    def __init__(self, runtime: Runtime, name: str = "") -> None:
        self.runtime = runtime
        self.name = name
        self.events: list[tuple[str, int, bool]] = []  # (event, shard, held at that moment)
        self.log: list[str] | None = None  # shared with other listeners, to see their order

    def listener(self) -> Listener:
        async def dropping(number: int) -> None:
            await asyncio.sleep(0)  # awaited: the drop waits for it
            self._note("dropping", number)

        return Listener(lambda number: self._note("loaded", number), dropping,
                        lambda number: self._note("dropped", number))

    def _note(self, event: str, number: int) -> None:
        self.events.append((event, number, self.runtime.holds(number)))
        if self.log is not None:
            self.log.append(f"{self.name} {event} {number}")


def test_a_loaded_shard_is_replayed_before_its_listeners_are_told() -> None:
    store = MemoryStore()
    writer = open_runtime(store, count=4)
    commit_all(writer, ("g", 5))
    close(writer)
    number = shard_of("g", 4)
    runtime = open_runtime(store, count=4, owns=lambda n: False)  # the cluster gives it later
    assert not runtime.holds(number)
    told = Told(runtime)
    seen: list[CommittedOffset | None] = []
    runtime.listen(told.listener())
    runtime.listen(Listener(loaded=lambda n: seen.append(Offsets(runtime).fetch("g", "t", 0, "id-t"))))

    async def run() -> None:
        await runtime.load(number)
        await runtime.load(number)  # already held: not opened again, the listeners told again
        await runtime.close()
    asyncio.run(run())
    assert told.events == [("loaded", number, True), ("loaded", number, True)]
    assert seen == [offset(5), offset(5)]


def test_a_dropped_shard_is_written_and_closed_and_its_listeners_told_in_turn() -> None:
    store = MemoryStore()
    runtime = open_runtime(store, count=4)
    number = shard_of("g", 4)
    log: list[str] = []
    first, second = Told(runtime, "first"), Told(runtime, "second")
    first.log = second.log = log
    runtime.listen(first.listener())
    runtime.listen(second.listener())
    written: list[asyncio.Future[None]] = []

    async def last_record(n: int) -> None:
        """A service finishing with the shard: its last record is queued, not yet written."""
        written.append(asyncio.ensure_future(runtime.submit(Commit("g", (("t", 0, offset(9)),)))))

    runtime.listen(Listener(dropping=last_record))

    async def run() -> None:
        await Offsets(runtime).commit("g", [("t", "id-t", 0, offset(5))])
        assert runtime.holds(number)
        await runtime.drop(number)
        assert not runtime.holds(number)
        assert len(written) == 1 and written[0].done() and written[0].exception() is None
        assert runtime.state(offsets_machine.MACHINE, "g") is None
        await runtime.drop(number)  # not held: nobody is told
        await runtime.drop((number + 1) % 4)
        await runtime.load(number)  # handed back: replayed from the log the drop closed
        assert Offsets(runtime).fetch("g", "t", 0, "id-t") == offset(9)
        await runtime.close()
    asyncio.run(run())
    assert log == [f"first dropping {number}", f"second dropping {number}",
                   f"first dropped {number}", f"second dropped {number}",
                   f"first loaded {number}", f"second loaded {number}"]
    # told `dropping` while the shard was still served, `dropped` once it was gone
    assert first.events == [("dropping", number, True), ("dropped", number, False), ("loaded", number, True)]
    # the record queued while dropping was written before the log was closed
    reopened = open_runtime(store, count=4)
    assert Offsets(reopened).fetch("g", "t", 0, "id-t") == offset(9)
    close(reopened)


# -- the upgrade from a single log


def test_a_single_offsets_log_from_before_shards_is_migrated_and_removed() -> None:
    store = MemoryStore()
    legacy = open_legacy(store)  # the layout earlier versions wrote
    for n in range(10):
        commit(legacy, f"g{n}", n, partition=n)
    legacy.write(DeleteGroup("g3"))
    append_as_written_before(legacy, b'{"v":1,"group":"old","type":"commit","offsets":[["t","id-t",0,42,-1,null,0]]}')
    legacy.close()

    runtime = open_runtime(store, count=4)
    assert not store.exists(LEGACY_PATH)
    expected = sorted([f"g{n}" for n in range(10) if n != 3] + ["old"])
    offsets = Offsets(runtime)
    assert offsets.groups() == expected
    for n in (0, 1, 2, 4, 9):
        assert offsets.fetch(f"g{n}", "t", n, "id-t") == offset(n)
    assert offsets.fetch("old", "t", 0, "id-t") == offset(42)
    close(runtime)
    reopened = open_runtime(store, count=4)
    assert Offsets(reopened).groups() == expected
    close(reopened)


def test_memberships_and_transactional_ids_of_the_single_log_are_migrated_too() -> None:
    store = MemoryStore()
    legacy = open_legacy(store)
    groups = [ClassicGroupRecord(f"g{n}", n + 1, "consumer", "range", None, ()) for n in range(6)]
    for record in groups:
        legacy.write(record)
    for n in range(6):
        legacy.write(TxnRecord(txn(f"tx{n}")))
    legacy.close()

    runtime = open_runtime(store, count=4)
    assert not store.exists(LEGACY_PATH)
    for record in groups:
        assert runtime.state(membership.MACHINE, record.group_id).get(record.group_id) == record
    for n in range(6):
        assert runtime.state(transactions.MACHINE, f"tx{n}").get(f"tx{n}") == txn(f"tx{n}")
    close(runtime)
    reopened = open_runtime(store, count=4)
    assert sorted(record.group_id for state in reopened.states(membership.MACHINE)
                  for record in state.records()) == [f"g{n}" for n in range(6)]
    close(reopened)


def test_a_migration_cut_short_is_done_again_on_the_next_open() -> None:
    store = MemoryStore()
    legacy = open_legacy(store)
    commit(legacy, "g", 7)
    legacy.close()
    early = open_runtime(store, count=4)
    commit_all(early, ("g", 7))  # as if the migration had written this shard, then crashed
    close(early)
    legacy = open_legacy(store)
    commit(legacy, "h", 8)
    legacy.close()
    runtime = open_runtime(store, count=4)
    assert Offsets(runtime).groups() == ["g", "h"] and not store.exists(LEGACY_PATH)
    close(runtime)


# -- a new kind of state is one more machine


@dataclass(frozen=True, slots=True)
class Tally:
    """A record of a kind no engine machine knows: add `count` to `name`'s tally."""

    name: str
    count: int


class TallyState:
    def __init__(self) -> None:
        self.totals: dict[str, int] = {}
        self.live_bytes = 0

    def apply(self, record: Tally) -> None:
        self.totals[record.name] = self.totals.get(record.name, 0) + record.count
        self.live_bytes = 64 * len(self.totals)

    def records(self) -> Iterator[Tally]:
        return (Tally(name, total) for name, total in sorted(self.totals.items()))

    def copy(self) -> TallyState:
        twin = TallyState()
        twin.totals, twin.live_bytes = dict(self.totals), self.live_bytes
        return twin


def _check_tally(record: Tally) -> None:
    if not isinstance(record.count, int):
        raise ValueError("count must be an int")


TALLY = Machine("tally", (Kind("tally", Tally, lambda r: r.name, lambda r: {"name": r.name, "count": r.count},
                               lambda body: Tally(body["name"], body["count"]), _check_tally),), TallyState)


def test_a_machine_registered_beside_the_engines_shares_their_shards_without_touching_them() -> None:
    store = MemoryStore()
    runtime = open_runtime(store, count=3, machines=(*MACHINES, TALLY))

    async def write() -> None:
        await runtime.submit(Tally("g", 2))
        await runtime.submit(Tally("g", 3))
        await Offsets(runtime).commit("g", [("t", "id-t", 0, offset(9))])
    asyncio.run(write())
    assert runtime.state(TALLY, "g").totals == {"g": 5}
    number = runtime.shard_of("g")
    close(runtime)

    again = open_runtime(store, count=3, machines=(*MACHINES, TALLY))  # replayed, offsets beside it
    assert again.state(TALLY, "g").totals == {"g": 5}
    assert Offsets(again).fetch("g", "t", 0, "id-t") == offset(9)
    shard = again.prepared("g")
    shard.compact()  # the tally is written back out by its own machine
    close(again)
    compacted = Shard.open(store, f"{SHARDS_DIR}/{number}", lambda: 0, Registry((*MACHINES, TALLY)))
    assert compacted.state(TALLY).totals == {"g": 5} and compacted.state(offsets_machine.MACHINE).groups["g"]
    compacted.close()
    with pytest.raises(CorruptBatch):  # the engine's own runtime does not know the kind
        open_runtime(store, count=3)
