"""Transactions: one committed and one aborted, then read_committed and read_uncommitted
reads of the same partition."""

from __future__ import annotations

from typing import Any

from ..clients.base import Driver, Record
from .common import NONE, Context, expect, expect_equal, produced_ok

READ_TIMEOUT_S = 20.0


def _plain(values: list[str]) -> list[Record]:
    return [{"key": "k", "value": v, "headers": [], "timestamp": None, "partition": 0} for v in values]


def transactions(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a committed and an aborted transaction; read_committed and read_uncommitted reads."""
    topic = ctx.topic(driver, "t")
    transactional_id = ctx.name("txn")
    committed = driver.transaction(topic, _plain(["c0", "c1", "c2"]), transactional_id, commit=True)
    expect_equal(committed, NONE, "committed transaction")
    aborted = driver.transaction(topic, _plain(["a0", "a1"]), transactional_id, commit=False)
    expect_equal(aborted, NONE, "aborted transaction")
    produced_ok(driver.produce(topic, _plain(["tail"])), "produce after the transactions")
    read_committed = driver.consume(topic, [0], "earliest", 4, READ_TIMEOUT_S, isolation="read_committed")
    expect_equal([r["value"] for r in read_committed], ["c0", "c1", "c2", "tail"], "read_committed values")
    read_uncommitted = driver.consume(topic, [0], "earliest", 6, READ_TIMEOUT_S)
    expect_equal([r["value"] for r in read_uncommitted], ["c0", "c1", "c2", "a0", "a1", "tail"],
                 "read_uncommitted values")
    offsets = [r["offset"] for r in read_uncommitted]
    # Each transaction ends with a control record (the commit or abort marker).
    expect_equal(offsets, [0, 1, 2, 4, 5, 7], "offsets around the transaction markers")
    latest = driver.list_offsets(topic, 0, "latest")
    expect(latest["error"] == NONE and latest["offset"] == 8, f"latest offset {latest}, expected 8")
    return {"committed": committed, "aborted": aborted, "read_committed_offsets": [r["offset"] for r in read_committed],
            "read_uncommitted_offsets": offsets}


SCENARIOS = [transactions]
