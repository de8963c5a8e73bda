"""Transactions through kill -9, with confluent-kafka against `martlet serve` (issue 14, point 6):
- the consume-transform-produce application of examples/exactly_once.py, killed with kill -9
  several times mid-run and started again: read_committed finds each input's output once;
- Martlet itself killed with kill -9, twice, under a transactional producer: every
  transaction the producer saw committed is whole after the restart, and every other one is
  whole or absent, never partly visible."""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from tests.fixtures.martlet import MartletProcess, wait_until
from tests.support.transactions import TIMEOUT_S, create_topic, producer, read_all

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "exactly_once.py"
INPUTS = 3_000
APP_KILLS = 3
APP_STEP = 400  # records the application commits between two kills
PROGRESS_S = 60.0  # the application (or the producer) must make progress within this
PARTITIONS = 3
BROKER_KILLS = 2
TXNS_BETWEEN_KILLS = 15


def produce_inputs(bootstrap: str, topic: str) -> list[str]:
    values = [f"word-{n}" for n in range(INPUTS)]
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n, value in enumerate(values):
        plain.produce(topic, value=value.encode(), partition=n % PARTITIONS)
    assert plain.flush(TIMEOUT_S) == 0
    return values


class App:
    """examples/exactly_once.py as a process; `committed` follows its `committed N` lines."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, log: Path) -> None:
        self.log = log
        with open(log, "a") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(EXAMPLE), "--bootstrap", bootstrap, "--input", source, "--output", sink,
                 "--group", group, "--transactional-id", f"tid-{group}", "--batch", "50",
                 "--transaction-timeout-ms", "30000", "--session-timeout-ms", "6000"],
                stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.committed = 0
        self.reader = threading.Thread(target=self._follow, daemon=True)
        self.reader.start()

    def _follow(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("committed "):
                self.committed = int(line.split()[1])

    def wait_committed(self, count: int) -> None:
        """Until the application committed `count` records in this run (it must not die)."""
        assert wait_until(lambda: self.committed >= count or self.proc.poll() is not None, PROGRESS_S), (
            f"{self.committed} committed in {PROGRESS_S} s")
        assert self.proc.poll() is None, self.log.read_text()[-3000:]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(TIMEOUT_S)
        self.reader.join(TIMEOUT_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def committed_count(bootstrap: str, topic: str) -> int:
    """Records a read_committed reader can get from the topic: the last stable offsets, less
    the markers and aborted records below them, counted by reading."""
    return len(read_all(bootstrap, topic, "read_committed", partitions=PARTITIONS))


def test_a_consume_transform_produce_app_killed_mid_run_outputs_each_input_once(martlet: MartletProcess,
                                                                             tmp_path: Path) -> None:
    source = create_topic(martlet.bootstrap, partitions=PARTITIONS)
    sink = create_topic(martlet.bootstrap, partitions=PARTITIONS)
    inputs = produce_inputs(martlet.bootstrap, source)
    group = f"eos-{source}"
    log = tmp_path / "app.log"
    for _ in range(APP_KILLS):
        app = App(martlet.bootstrap, source, sink, group, log)
        try:
            app.wait_committed(APP_STEP)
        finally:
            app.kill()  # mid-run: most likely with a transaction open
    app = App(martlet.bootstrap, source, sink, group, log)
    try:
        assert wait_until(lambda: committed_count(martlet.bootstrap, sink) >= INPUTS, PROGRESS_S * 2,
                          interval_s=1.0), log.read_text()[-3000:]
    finally:
        app.kill()
    outputs = collections.Counter(read_all(martlet.bootstrap, sink, "read_committed", partitions=PARTITIONS))
    assert {value for value, count in outputs.items() if count > 1} == set()
    assert set(outputs) == {value.upper() for value in inputs}


class TransactionalLoad:
    """A producer thread writing transaction n as one record on every partition ("n-p"), and
    what each commit_transaction answered. After a failure it starts over with a new producer
    (init_transactions aborts whatever the old one left open), as an application would."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.committed: list[int] = []  # commit_transaction returned: must be whole
        self.failed: list[int] = []  # the outcome is unknown: whole or absent
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        made: Producer | None = None
        for n in range(1_000_000):
            if self.stop.is_set():
                return
            try:
                made = made or producer(self.bootstrap, f"tid-{self.topic}", timeout_ms=10_000)
                made.begin_transaction()
                for p in range(PARTITIONS):
                    made.produce(self.topic, value=f"{n}-{p}".encode(), partition=p)
                made.commit_transaction(TIMEOUT_S)
                self.committed.append(n)
            except KafkaException as error:
                self.failed.append(n)
                self.errors.append(str(error))
                made = None

    def wait_commits(self, count: int) -> None:
        target = len(self.committed) + count
        assert wait_until(lambda: len(self.committed) >= target, PROGRESS_S), (
            f"{len(self.committed)} committed, {target} expected; errors: {self.errors[-3:]}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(PROGRESS_S)
        assert not self.thread.is_alive()


def nothing_open(bootstrap: str, topic: str) -> Callable[[], bool]:
    """True once every partition's last stable offset (ListOffsets read_committed) is its high
    watermark (read_uncommitted): no transaction is open any more."""
    def ends(isolation: str) -> list[int]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation})
        try:
            return [consumer.get_watermark_offsets(KafkaPartition(topic, p), TIMEOUT_S)[1] for p in range(PARTITIONS)]
        finally:
            consumer.close()

    return lambda: ends("read_committed") == ends("read_uncommitted")


def test_martlet_killed_under_transactional_load_keeps_every_transaction_whole(
        martlet_process: Callable[..., MartletProcess]) -> None:
    process = martlet_process()
    topic = create_topic(process.bootstrap, partitions=PARTITIONS)
    load = TransactionalLoad(process.bootstrap, topic)
    try:
        for _ in range(BROKER_KILLS):
            load.wait_commits(TXNS_BETWEEN_KILLS)
            process.restart(hard=True)  # kill -9 with transactions in flight, same port
        load.wait_commits(TXNS_BETWEEN_KILLS)
    finally:
        load.close()
    assert wait_until(nothing_open(process.bootstrap, topic), PROGRESS_S, interval_s=0.5), process.log_tail()
    seen = collections.Counter(int(value.split("-")[0])
                               for value in read_all(process.bootstrap, topic, "read_committed", partitions=PARTITIONS))
    partial = {n: count for n, count in seen.items() if count != PARTITIONS}
    assert partial == {}, f"transactions partly visible: {partial}"
    assert set(load.committed) <= set(seen), f"committed but not visible: {sorted(set(load.committed) - set(seen))}"
    assert set(seen) <= set(load.committed) | set(load.failed)
