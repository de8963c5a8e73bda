"""OpenWriters' bound on started blocks (engine/store/hdfs.py), with stand-in files whose
close takes a while, as an HDFS close does: a burst of writes that each start a block never
has more than `fresh_most` reservations held at once, counting writers still closing."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from martlet.engine.clock import ManualClock, SystemClock
from martlet.engine.store.hdfs import OpenWriters

FRESH_MOST = 4
FILES = 40
CLOSE_S = 0.05  # each close holds its reservation this long (HDFS: about half a second)
WAIT_S = 30.0


class Reservations:
    """What the DataNode reserves: a block from the start of a write that starts one until
    its writer's close returns; the most held at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held = 0
        self.most = 0

    def take(self) -> None:
        with self._lock:
            self.held += 1
            self.most = max(self.most, self.held)

    def give_back(self) -> None:
        with self._lock:
            self.held -= 1


class SlowFile:
    """Stands in for HdfsAppendFile: `start_block` is its first write (admitted, then the
    block reserved); `release` is its close, which hands the block back after CLOSE_S."""

    def __init__(self, writers: OpenWriters, reservations: Reservations, name: str) -> None:
        self._writers = writers
        self._reservations = reservations
        self._path = name
        self.fresh = False
        self.last_used: float | None = None
        self.mean_gap: float | None = None
        self.closed_once = threading.Event()

    def start_block(self) -> None:
        self._writers.admit(self)  # type: ignore[arg-type]
        self._reservations.take()
        self.fresh = True
        self._writers.used(self)  # type: ignore[arg-type]

    def release(self) -> None:
        self.closed_once.wait(CLOSE_S)  # a close that takes a while; nothing sets it
        self.fresh = False
        self._reservations.give_back()
        self._writers.gone(self)  # type: ignore[arg-type]


def test_a_burst_of_started_blocks_never_holds_more_than_the_bound() -> None:
    writers = OpenWriters(most=1000, idle_s=3600, clock=SystemClock(), fresh_most=FRESH_MOST)
    reservations = Reservations()
    files = [SlowFile(writers, reservations, f"f{i}") for i in range(FILES)]
    with ThreadPoolExecutor(16) as pool:  # flush threads
        for future in [pool.submit(file.start_block) for file in files]:
            future.result(timeout=WAIT_S)
    assert sum(file.fresh for file in files) <= FRESH_MOST  # the rest were closed to make room
    assert reservations.most <= FRESH_MOST  # before: closes lagged and up to 16 more were held


def test_a_write_waits_for_a_close_to_return_not_only_to_start() -> None:
    writers = OpenWriters(most=1000, idle_s=3600, clock=SystemClock(), fresh_most=1)
    reservations = Reservations()
    first, second = (SlowFile(writers, reservations, name) for name in ("first", "second"))
    first.start_block()
    second.start_block()  # waits for `first` to close: its reservation is gone by then
    assert not first.fresh and second.fresh
    assert reservations.held == 1 and reservations.most == 1


class TakingTurns:
    """Stands in for HdfsAppendFile in the choice of which writers close beyond `most`:
    `write` notes whether the writer was open (a reopen on HDFS costs a NameNode call and a
    new pipeline); `release` closes it at once."""

    def __init__(self, writers: OpenWriters, name: str) -> None:
        self._writers = writers
        self._path = name
        self.fresh = False
        self.last_used: float | None = None
        self.mean_gap: float | None = None
        self.open = False

    def write(self) -> bool:
        """True if the writer was open."""
        was_open, self.open = self.open, True
        self._writers.used(self)  # type: ignore[arg-type]
        return was_open

    def release(self) -> None:
        self.open = False
        self._writers.gone(self)  # type: ignore[arg-type]


def _settled(writers: OpenWriters) -> None:
    deadline = time.monotonic() + WAIT_S
    while writers.count() > writers.most:
        assert time.monotonic() < deadline, "writers beyond the bound were not closed"
        time.sleep(0.001)


def test_files_taking_turns_keep_most_writers_open() -> None:
    # Flushes of more partitions than open writers come round in the same order: least
    # recently used closed the next one due every time (no write found its writer open).
    most, files_count, rounds = 20, 50, 8
    clock = ManualClock()
    writers = OpenWriters(most=most, idle_s=3600, clock=clock)
    files = [TakingTurns(writers, f"p{i}") for i in range(files_count)]
    open_writes = 0
    for round_number in range(rounds):
        for file in files:
            clock.advance(10)
            open_writes += file.write() and round_number > 0
            _settled(writers)
    assert open_writes >= (rounds - 1) * (most - 2)  # a steady set keeps its writers
    assert writers.count() <= most


def test_a_busy_file_keeps_its_writer_and_one_written_once_ages_out() -> None:
    clock = ManualClock()
    writers = OpenWriters(most=3, idle_s=3600, clock=clock)
    busy, steady, once = (TakingTurns(writers, name) for name in ("busy", "steady", "once"))
    once.write()
    for step in range(100):  # busy every 10 ms, steady every 500 ms
        clock.advance(10)
        busy.write()
        if step % 50 == 0:
            steady.write()
    newcomer = TakingTurns(writers, "newcomer")
    newcomer.write()
    _settled(writers)
    assert busy.open and steady.open and newcomer.open and not once.open
