"""read_committed (KIP-98): what a consumer of committed data sees, where the last stable
offset (LSO) stands, and where such a consumer's position ends.

- `read_committed_interleaved`: two transactional producers interleaved with plain records
  on one partition, one committing and one aborting, then a third transaction committed;
  read_committed returns exactly the committed and plain records in offset order,
  read_uncommitted all of them.
- `read_committed_lso`: while a transaction is open (sent and flushed, not ended),
  ListOffsets latest answers its first offset to read_committed and the high watermark to
  read_uncommitted, and a read_committed consumer gets only what is before it and stops
  there; after the commit, and after a later abort, the LSO moves to the end.
- `read_committed_position`: a read_committed consumer reading a partition whose tail is an
  aborted transaction and its marker ends with its position, and the offset it commits,
  at the log end, not inside the aborted records.

Ending a transaction returns once the coordinator has decided; the markers may land a moment
later (in Kafka as in Martlet), so the LSO after an end is awaited, bounded.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..clients.base import Driver, Record
from .common import NONE, Context, expect_equal, produced_ok

READ_TIMEOUT_S = 20.0
QUIET_S = 3.0  # how long a consumer that should get nothing more is given to get it anyway
LSO_WAIT_S = 15.0
POSITION_WAIT_S = 15.0
ABORTED_RECORDS = 1200
ABORTED_VALUE_BYTES = 1000
SEGMENT_BYTES = 1 << 20


def _values(tag: str, count: int) -> list[Record]:
    return [{"key": tag, "value": f"{tag}{i}", "headers": [], "timestamp": None, "partition": 0}
            for i in range(count)]


class OpenTransactions:
    """The scenario's transactions kept open by handle (Driver.transaction_begin/send/end);
    any still open when the scenario ends (an expectation failed) is aborted."""

    def __init__(self, driver: Driver, ctx: Context) -> None:
        self.driver = driver
        self.ctx = ctx
        self.open: set[str] = set()

    def __enter__(self) -> OpenTransactions:
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in sorted(self.open):
            with contextlib.suppress(Exception):  # clean-up only: the scenario has its result
                self.driver.transaction_end(handle, commit=False)
        self.open.clear()

    def begin(self, handle: str) -> None:
        self.open.add(handle)
        expect_equal(self.driver.transaction_begin(handle, self.ctx.name(handle)), NONE,
                     f"begin transaction {handle}")

    def send(self, handle: str, topic: str, records: list[Record]) -> list[int]:
        return produced_ok(self.driver.transaction_send(handle, topic, records), f"send in transaction {handle}")

    def end(self, handle: str, commit: bool) -> None:
        self.open.discard(handle)
        expect_equal(self.driver.transaction_end(handle, commit), NONE,
                     f"{'commit' if commit else 'abort'} transaction {handle}")


def _latest(driver: Driver, topic: str, isolation: str) -> int:
    answer = driver.list_offsets(topic, 0, "latest", isolation=isolation)
    expect_equal(answer["error"], NONE, f"ListOffsets latest ({isolation})")
    return int(answer["offset"])


def wait_latest(driver: Driver, topic: str, isolation: str, expected: int, what: str) -> int:
    """Poll ListOffsets latest until it answers `expected` (bounded): the high watermark
    (read_uncommitted) or the last stable offset (read_committed)."""
    deadline = time.monotonic() + LSO_WAIT_S
    latest = _latest(driver, topic, isolation)
    while latest != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        latest = _latest(driver, topic, isolation)
    name = "last stable offset" if isolation == "read_committed" else "high watermark"
    expect_equal(latest, expected, f"{name} {what}")
    return latest


def _read(driver: Driver, topic: str, isolation: str, until: int, timeout_s: float = READ_TIMEOUT_S) -> list[Any]:
    """(offset, value) of every record a consumer from the earliest offset gets before its
    position reaches `until` (or `timeout_s` passes)."""
    got = driver.consume_position(topic, 0, "earliest", until, timeout_s, isolation=isolation)
    return [(r["offset"], r["value"]) for r in got["records"]]


def _write_interleaved(driver: Driver, ctx: Context, topic: str) -> dict[str, list[int]]:
    """p0 a0 a1 b0 p1 a2 b1 |b commits| p2 |a aborts| c0 |c commits| p3: the offsets of each
    writer's records. Ending a transaction may return before its marker is written: each end
    is awaited (the high watermark counts the marker) before anything else is sent."""
    sent: dict[str, list[int]] = {}
    with OpenTransactions(driver, ctx) as txns:
        txns.begin("txa")
        txns.begin("txb")
        sent["p0"] = produced_ok(driver.produce(topic, _values("p0-", 1)), "plain p0")
        sent["a"] = txns.send("txa", topic, _values("a", 2))
        sent["b"] = txns.send("txb", topic, _values("b", 1))
        sent["p1"] = produced_ok(driver.produce(topic, _values("p1-", 1)), "plain p1")
        sent["a"] += txns.send("txa", topic, _values("a", 3)[2:])
        sent["b"] += txns.send("txb", topic, _values("b", 2)[1:])
        txns.end("txb", commit=True)
        wait_latest(driver, topic, "read_uncommitted", 8, "after the commit of b")
        expect_equal(_latest(driver, topic, "read_committed"), 1, "last stable offset while a is open")
        sent["p2"] = produced_ok(driver.produce(topic, _values("p2-", 1)), "plain p2")
        txns.end("txa", commit=False)
        wait_latest(driver, topic, "read_committed", 10, "after the abort of a")
        txns.begin("txc")
        sent["c"] = txns.send("txc", topic, _values("c", 1))
        txns.end("txc", commit=True)
        wait_latest(driver, topic, "read_committed", 12, "after the commit of c")
        sent["p3"] = produced_ok(driver.produce(topic, _values("p3-", 1)), "plain p3")
    return sent


def read_committed_interleaved(driver: Driver, ctx: Context) -> dict[str, Any]:
    """two transactional producers and plain records interleaved; read_committed skips the aborted."""
    topic = ctx.topic(driver, "t")
    sent = _write_interleaved(driver, ctx, topic)
    expect_equal(sent, {"p0": [0], "a": [1, 2, 5], "b": [3, 6], "p1": [4], "p2": [8], "c": [10], "p3": [12]},
                 "offsets the sends were given")
    end = wait_latest(driver, topic, "read_committed", 13, "at the end")
    expect_equal(_latest(driver, topic, "read_uncommitted"), end, "high watermark at the end")
    committed = _read(driver, topic, "read_committed", end)
    expect_equal(committed, [(0, "p0-0"), (3, "b0"), (4, "p1-0"), (6, "b1"), (8, "p2-0"), (10, "c0"), (12, "p3-0")],
                 "read_committed: the committed and plain records in offset order")
    uncommitted = _read(driver, topic, "read_uncommitted", end)
    expect_equal(uncommitted, [(0, "p0-0"), (1, "a0"), (2, "a1"), (3, "b0"), (4, "p1-0"), (5, "a2"), (6, "b1"),
                               (8, "p2-0"), (10, "c0"), (12, "p3-0")], "read_uncommitted: every data record")
    # From inside a's records: the fetch must still name a, begun below its offset, as aborted.
    inside = driver.consume_position(topic, 0, 2, end, READ_TIMEOUT_S, isolation="read_committed")
    expect_equal([(r["offset"], r["value"]) for r in inside["records"]], committed[1:],
                 "read_committed from offset 2, inside the aborted transaction")
    return {"sent": sent, "high_watermark": end, "read_committed": committed, "read_uncommitted": uncommitted}


def _while_open(driver: Driver, topic: str) -> dict[str, Any]:
    """p0 p1 |o0 o1 open| q0: ListOffsets and readers while the transaction at 2 is open."""
    observed: dict[str, Any] = {}
    observed["open"] = {"read_committed": _latest(driver, topic, "read_committed"),
                        "read_uncommitted": _latest(driver, topic, "read_uncommitted")}
    expect_equal(observed["open"], {"read_committed": 2, "read_uncommitted": 5},
                 "ListOffsets latest with a transaction open at offset 2")
    # The consumer is given QUIET_S to pass the LSO, which it must not do.
    held = driver.consume_position(topic, 0, "earliest", 5, QUIET_S, isolation="read_committed")
    observed["open_read"] = [(r["offset"], r["value"]) for r in held["records"]]
    expect_equal(observed["open_read"], [(0, "p0"), (1, "p1")], "read_committed while the transaction is open")
    observed["open_position"] = held["position"]
    expect_equal(held["position"], 2, "read_committed position while the transaction is open")
    observed["open_uncommitted_read"] = _read(driver, topic, "read_uncommitted", 5)
    expect_equal(observed["open_uncommitted_read"], [(0, "p0"), (1, "p1"), (2, "o0"), (3, "o1"), (4, "q0")],
                 "read_uncommitted while the transaction is open")
    return observed


def read_committed_lso(driver: Driver, ctx: Context) -> dict[str, Any]:
    """an open transaction holds the LSO and read_committed readers; its end moves both on."""
    topic = ctx.topic(driver, "t")
    with OpenTransactions(driver, ctx) as txns:
        produced_ok(driver.produce(topic, _values("p", 2)), "plain p0 p1")
        txns.begin("open")
        expect_equal(txns.send("open", topic, _values("o", 2)), [2, 3], "offsets of the open transaction")
        produced_ok(driver.produce(topic, _values("q", 1)), "plain q0 after the open transaction")
        observed = _while_open(driver, topic)
        txns.end("open", commit=True)  # its marker at 5
        observed["committed_lso"] = wait_latest(driver, topic, "read_committed", 6, "after the commit")
        observed["committed_read"] = _read(driver, topic, "read_committed", 6)
        expect_equal(observed["committed_read"], [(0, "p0"), (1, "p1"), (2, "o0"), (3, "o1"), (4, "q0")],
                     "read_committed after the commit")
        txns.begin("aborted")
        expect_equal(txns.send("aborted", topic, _values("x", 1)), [6], "offset of the second transaction")
        expect_equal(_latest(driver, topic, "read_committed"), 6, "last stable offset with the second one open")
        expect_equal(_latest(driver, topic, "read_uncommitted"), 7, "high watermark with the second one open")
        txns.end("aborted", commit=False)  # its marker at 7
    observed["aborted_lso"] = wait_latest(driver, topic, "read_committed", 8, "after the abort")
    expect_equal(_latest(driver, topic, "read_uncommitted"), 8, "high watermark after the abort")
    observed["aborted_read"] = _read(driver, topic, "read_committed", 8)
    expect_equal(observed["aborted_read"], observed["committed_read"], "read_committed after the abort")
    return observed


def read_committed_position(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a read_committed consumer ends past an aborted tail and its marker, and commits that."""
    # Segments of the smallest size Kafka takes, so the aborted transaction spans a roll.
    topic = ctx.topic(driver, "t", configs={"segment.bytes": str(SEGMENT_BYTES)})
    produced_ok(driver.produce(topic, _values("p", 2)), "plain p0 p1")
    # Larger than one fetch answer of a partition (1 MiB by default in every client), so
    # the aborted transaction spans several fetches.
    aborted = [{**record, "value": f"{record['value']}|" + "x" * ABORTED_VALUE_BYTES}
               for record in _values("a", ABORTED_RECORDS)]
    expect_equal(driver.transaction(topic, aborted, ctx.name("txn"), commit=False), NONE, "aborted transaction")
    # two records, the aborted ones and the abort marker
    end = wait_latest(driver, topic, "read_committed", 2 + ABORTED_RECORDS + 1, "after the abort")
    expect_equal(_latest(driver, topic, "read_uncommitted"), end, "high watermark after the abort")
    group = ctx.name("group")
    read = driver.consume_position(topic, 0, "earliest", end, POSITION_WAIT_S, isolation="read_committed",
                                   group=group)
    values = [r["value"] for r in read["records"]]
    expect_equal(values, ["p0", "p1"], "read_committed records")
    expect_equal(read["position"], end, "read_committed position after the aborted tail")
    expect_equal(read["commit"], NONE, "commit")
    committed = driver.committed(group, topic, [0])
    expect_equal(committed, {"0": end}, "committed offset after the aborted tail")
    inside = driver.consume_position(topic, 0, 3 + ABORTED_RECORDS // 2, end, POSITION_WAIT_S,
                                     isolation="read_committed")
    expect_equal((len(inside["records"]), inside["position"]), (0, end),
                 "read_committed from the middle of the aborted transaction: records and position")
    uncommitted = driver.consume_position(topic, 0, "earliest", end, POSITION_WAIT_S)
    expect_equal(len(uncommitted["records"]), 2 + ABORTED_RECORDS, "read_uncommitted records")
    expect_equal(uncommitted["position"], end, "read_uncommitted position after the abort marker")
    return {"end": end, "read_committed": values, "position": read["position"], "committed": committed,
            "from_inside_position": inside["position"], "read_uncommitted_position": uncommitted["position"]}


SCENARIOS = [read_committed_interleaved, read_committed_lso, read_committed_position]
