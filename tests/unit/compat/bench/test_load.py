"""compat/bench/load.py: the transactional produce loop, on a fake producer and a manual clock."""

from __future__ import annotations

import pytest

from martlet.compat.bench.load import transactions


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeProducer:
    """Logs begin, send and commit; a send takes 1/8 s and a commit 1/16 s of the clock (exact in binary)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.log: list[str] = []

    def begin_transaction(self) -> None:
        self.log.append("begin")

    def send(self) -> None:
        self.log.append("send")
        self.clock.now += 0.125

    def commit_transaction(self, timeout: float) -> None:
        self.log.append("commit")
        self.clock.now += 0.0625


def run(records: int, period_s: float = 1.0) -> tuple[FakeProducer, list[float]]:
    clock = Clock()
    producer = FakeProducer(clock)
    return producer, transactions(producer, producer.send, records, period_s, clock)


def test_each_transaction_sends_for_one_period_then_commits() -> None:
    producer, commit_us = run(20)
    one = ["begin", *["send"] * 8, "commit"]
    assert producer.log == one + one + ["begin", *["send"] * 4, "commit"]  # the last one is short
    assert commit_us == pytest.approx([62_500.0] * 3)


def test_every_record_is_sent_once_even_with_a_period_shorter_than_a_send() -> None:
    producer, commit_us = run(3, period_s=0.01)
    assert producer.log == ["begin", "send", "commit"] * 3
    assert len(commit_us) == 3


def test_no_records_means_no_transaction() -> None:
    producer, commit_us = run(0)
    assert producer.log == [] and commit_us == []
