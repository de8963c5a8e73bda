"""Flink's stock Kafka connector (flink-sql-connector-kafka 5.0.0-2.2 on PyFlink 2.2) through
Martlet's gateway (issue 15, point 3). The jobs are in flink_jobs.py, run by PyFlink's own
virtualenv (tests.fixtures.flink):

- a DataStream job KafkaSource -> map -> KafkaSink with DeliveryGuarantee.EXACTLY_ONCE and a
  checkpoint a second, its process group killed with SIGKILL while input flows and at the
  moment a checkpoint's commit is in flight (a proxy holds the EndTxn Flink's committer sends
  on notifyCheckpointComplete, so the kill lands after the pre-commit and before the commit,
  every time), then started again from that checkpoint: the restarted job commits the
  pre-committed transactions (the broker shows them Ongoing after the kill and
  CompleteCommit after the restart); killed again wherever it is and restored from its own
  latest checkpoint (Flink then commits that checkpoint's transactions again, mostly already
  committed: a kill rarely lands in the milliseconds between a checkpoint and its commit
  unaided), and a read_committed consumer finds every input once;
- a Flink SQL job from one 'connector' = 'kafka' table to another;
- KafkaSource partition discovery reading partitions added with CreatePartitions while the
  job runs.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.types import TransactionalId

from tests.fixtures.flink import Flink, FlinkJob, FlinkServer
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.clients import confluent_create_topic, confluent_wait_partitions
from tests.integration.holding_proxy import Held, HoldingProxy, end_txn_commit
from tests.integration.raw_client import RawClient

pytestmark = [pytest.mark.integration, pytest.mark.flink]

TIMEOUT_S = 30.0
JOB_PROGRESS_S = 120.0  # a job process must start its JVM and commit output within this
PARTITIONS = 2
FEED_PER_S = 400  # input records a second while the exactly-once job runs and is killed


def new_topic(bootstrap: str, prefix: str, partitions: int = PARTITIONS) -> str:
    topic = f"flink-{prefix}-{uuid.uuid4().hex[:8]}"
    confluent_create_topic(bootstrap, topic, partitions)
    return topic


class Reader:
    """One consumer assigned every partition of a topic from offset 0, gathering values."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "isolation.level": isolation,
                                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.values: list[str] = []

    def poll(self, timeout_s: float = 0.2) -> int:
        for msg in self.consumer.consume(num_messages=10_000, timeout=timeout_s):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            value = msg.value()
            assert value is not None, f"a null value at {msg.partition()}:{msg.offset()}"
            self.values.append(value.decode())
        return len(self.values)

    def wait(self, condition: Callable[[list[str]], bool], timeout_s: float, what: str, log: Callable[[], str]) -> None:
        ok = wait_until(lambda: self.poll() >= 0 and condition(self.values), timeout_s, interval_s=0)
        assert ok, f"{what}: not within {timeout_s:.0f} s ({len(self.values)} values read)\n{log()}"

    def close(self) -> None:
        self.consumer.close()


class Feeder:
    """Produces "in-NNNNNN" round-robin over the partitions, FEED_PER_S a second, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.topic = topic
        self.sent: list[str] = []
        self.errors: list[str] = []
        self.unsent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * FEED_PER_S)
            for seq in range(len(self.sent), due):
                value = f"in-{seq:06d}"
                self.producer.produce(self.topic, value=value.encode(), partition=seq % PARTITIONS,
                                      on_delivery=self._delivered)
                self.sent.append(value)
            self.producer.poll(0)
            self._stop.wait(0.01)  # pacing of the feed, not a synchronisation

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))

    def stop(self, check: bool = True) -> list[str]:
        """Stop, flush, and return every value produced (all delivered, if `check`)."""
        if not self._stop.is_set():
            self._stop.set()
            if self._thread.is_alive():
                self._thread.join(TIMEOUT_S)
            self.unsent = self.producer.flush(TIMEOUT_S)
            self.producer.close()
        assert not check or (self.unsent == 0 and not self.errors), (self.unsent, self.errors[:5])
        return self.sent


# -- exactly once through a kill, a commit in flight --------------------------------------------

def latest_checkpoint(root: Path) -> Path | None:
    """The newest completed checkpoint (chk-N with its _metadata) of any job under root."""
    done = [p for p in root.glob("*/chk-*") if (p / "_metadata").is_file()]
    return max(done, key=lambda p: (p.stat().st_mtime, int(p.name.removeprefix("chk-"))), default=None)


def own_checkpoint(root: Path, restored: Path) -> Path | None:
    """The newest completed checkpoint of a job restored from `restored` (not one of the job
    that wrote `restored`)."""
    latest = latest_checkpoint(root)
    return latest if latest is not None and latest.parent != restored.parent else None


def transaction_states(bootstrap: str, transactional_ids: list[str]) -> dict[str, str]:
    with RawClient(bootstrap) as client:
        answer = client.request(DescribeTransactionsRequest(transactional_ids=tuple(map(TransactionalId, transactional_ids))))
    return {state.transactional_id: state.transaction_state for state in answer.transaction_states}


def test_exactly_once_through_a_kill_between_pre_commit_and_commit(flink: Flink, martlet_process: Callable[
        ..., MartletProcess], tmp_path: Path) -> None:
    proxy = HoldingProxy()
    broker = martlet_process(extra_args=["--advertised", proxy.address])
    proxy.start(broker.bootstrap)
    try:
        ExactlyOnceRuns(flink, broker, proxy, tmp_path).run()
    finally:
        proxy.close()


class ExactlyOnceRuns:
    """Three runs of one job while input flows: the first killed with a commit in flight, the
    second (from the first's checkpoint) killed wherever it is, the third (from the second's
    latest checkpoint) left to catch up; then each input once in the output."""

    def __init__(self, flink: Flink, broker: MartletProcess, proxy: HoldingProxy, tmp_path: Path) -> None:
        self.flink, self.broker, self.proxy, self.tmp_path = flink, broker, proxy, tmp_path
        bootstrap = proxy.address  # every client goes through the proxy: the broker advertises it
        source, sink = new_topic(bootstrap, "in"), new_topic(bootstrap, "out")
        self.checkpoints = tmp_path / "checkpoints"
        self.spec = flink.spec("exactly_once", bootstrap=bootstrap, source=source, sink=sink, group=f"g-{source}",
                               transactional_id_prefix=f"tx-{source}", checkpoints=str(self.checkpoints))
        self.feeder, self.reader = Feeder(bootstrap, source), Reader(bootstrap, sink, PARTITIONS)
        self.second_kill: dict[str, str] = {}

    def run(self) -> None:
        self.feeder.start()
        try:
            first, held_ids = self.first_run()
            second = self.second_run(first, held_ids)
            sent = self.last_run(second)
        finally:
            self.feeder.stop(check=False)
            self.reader.close()
        wanted = Counter(f"{value}|flink" for value in sent)
        extra = Counter(self.reader.values) - wanted
        assert not extra, f"duplicated or unexpected: {sorted(extra.items())[:10]} ({sum(extra.values())} in all)"
        assert Counter(self.reader.values) == wanted
        print(f"{len(sent)} inputs once each; killed with {held_ids} pre-committed (their commit held back), "
              f"restored from {first.name}, which committed them; killed again, restored from {second.name} "
              f"(its transactions at the kill: {self.second_kill})")

    def job(self, name: str, restore: Path | None = None) -> FlinkJob:
        spec = {**self.spec, "restore": str(restore)} if restore else self.spec
        return FlinkJob(self.flink, spec, self.tmp_path / f"{name}.out")

    def first_run(self) -> tuple[Path, list[str]]:
        """Killed once a checkpoint is complete and its commits are held back: the checkpoint
        and the transactions it pre-committed (still Ongoing on the broker)."""
        job = self.job("job-1")
        try:
            wait_output(self.reader, 2 * FEED_PER_S, "output committed",
                        lambda: job.text()[-3000:] + self.flink.log_tail())
            held, checkpoint = kill_with_commit_in_flight(job, self.proxy, self.checkpoints)
        finally:
            job.kill()
        self.proxy.drop_held()
        held_ids = sorted({h.body.transactional_id for h in held})  # type: ignore[attr-defined]
        # KafkaSink names the transaction checkpoint N pre-commits PREFIX-SUBTASK-N.
        assert {i.rsplit("-", 1)[1] for i in held_ids} == {checkpoint.name.removeprefix("chk-")}, (held_ids, checkpoint)
        assert set(transaction_states(self.broker.bootstrap, held_ids).values()) == {"Ongoing"}, "not pre-committed"
        return checkpoint, held_ids

    def second_run(self, checkpoint: Path, held_ids: list[str]) -> Path:
        """Restored: commits the held transactions, goes on, and is killed wherever it is
        (mid-transaction, mid-checkpoint or between commits); its latest checkpoint."""
        job = self.job("job-2", checkpoint)
        try:
            wait_committed(self.broker, held_ids, self.flink)
            wait_output(self.reader, len(self.reader.values) + 2 * FEED_PER_S, "output after the restart",
                        self.flink.log_tail)
            # A restored job checkpoints under a new job id: wait for one of its own.
            assert wait_until(lambda: own_checkpoint(self.checkpoints, checkpoint) is not None, JOB_PROGRESS_S,
                              interval_s=0.1), f"the restored job made no checkpoint\n{self.flink.log_tail()}"
        finally:
            job.kill()
        latest = own_checkpoint(self.checkpoints, checkpoint)
        assert latest is not None
        # Not asserted (a race of this kill with Flink's notifyCheckpointComplete), only shown:
        # whether the restart has a pre-committed transaction to commit again this time.
        prefix, number = self.spec["transactional_id_prefix"], latest.name.removeprefix("chk-")
        self.second_kill = transaction_states(self.broker.bootstrap, [f"{prefix}-{n}-{number}" for n in range(PARTITIONS)])
        return latest

    def last_run(self, checkpoint: Path) -> list[str]:
        """Restored again; the input stops and the output catches up. Every input sent."""
        job = self.job("job-3", checkpoint)
        try:
            wait_output(self.reader, len(self.reader.values) + FEED_PER_S, "output after the second restart",
                        self.flink.log_tail)
            sent = self.feeder.stop()
            wanted = {f"{value}|flink" for value in sent}
            self.reader.wait(lambda values: set(values) >= wanted, JOB_PROGRESS_S, "every input in the output",
                             self.flink.log_tail)
            self.reader.poll(1.0)  # anything committed right behind the last input
        finally:
            job.kill()
        return sent


def wait_output(reader: Reader, count: int, what: str, log: Callable[[], str]) -> None:
    reader.wait(lambda values: len(values) >= count, JOB_PROGRESS_S, what, log)


def wait_committed(broker: MartletProcess, transactional_ids: list[str], flink: Flink) -> None:
    """The restarted job commits the transactions its predecessor pre-committed."""
    assert wait_until(lambda: set(transaction_states(broker.bootstrap, transactional_ids).values()) == {
        "CompleteCommit"}, JOB_PROGRESS_S, interval_s=0.2), (
        f"the restarted job did not commit {transactional_ids}: {transaction_states(broker.bootstrap, transactional_ids)}"
        f"\n{flink.log_tail()}")


def kill_with_commit_in_flight(job: FlinkJob, proxy: HoldingProxy, checkpoints: Path) -> tuple[list[Held], Path]:
    """Hold the EndTxn(commit) of the next checkpoint, then SIGKILL the job: its transactions
    are pre-committed (flushed, the checkpoint complete) and never committed by this run."""
    proxy.holding(end_txn_commit)
    assert wait_until(lambda: bool(proxy.held()) or not job.alive(), TIMEOUT_S, interval_s=0.01), "no commit sent"
    # Each of the PARTITIONS writers commits its own transaction; take all of them if they come.
    wait_until(lambda: len(proxy.held()) >= PARTITIONS, 5.0, interval_s=0.01)
    checkpoint = latest_checkpoint(checkpoints)
    assert job.alive(), f"the job died before the kill:\n{job.text()[-3000:]}"
    job.kill()
    proxy.holding(None)
    assert checkpoint is not None
    return proxy.held(), checkpoint


# -- Flink SQL ----------------------------------------------------------------------------------

def test_sql_job_between_two_kafka_tables(flink_server: FlinkServer, martlet: MartletProcess) -> None:
    source, sink = new_topic(martlet.bootstrap, "words"), new_topic(martlet.bootstrap, "shouted")
    producer = Producer({"bootstrap.servers": martlet.bootstrap})
    rows = [{"word": f"word{n}", "n": n if n != 13 else -1} for n in range(200)]
    for i, row in enumerate(rows):
        producer.produce(source, value=json.dumps(row).encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    wanted = sorted((f"WORD{i}", 10 * i, f"{i % PARTITIONS}:{i // PARTITIONS}") for i in range(200) if i != 13)
    reader = Reader(martlet.bootstrap, sink, PARTITIONS, isolation="read_uncommitted")
    job_id = flink_server.submit("sql", bootstrap=martlet.bootstrap, source=source, sink=sink, group=f"g-{source}")
    try:
        reader.wait(lambda values: len(values) >= len(wanted), JOB_PROGRESS_S, "the SQL job's output",
                    flink_server.flink.log_tail)
    finally:
        flink_server.cancel(job_id)
        reader.close()
    got = sorted((row["word"], row["n"], row["src"]) for row in map(json.loads, reader.values))
    assert got == wanted


# -- partition discovery ------------------------------------------------------------------------

def produce_to(bootstrap: str, topic: str, partition: int, count: int) -> list[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": 1000})
    values = [f"p{partition}-{n}" for n in range(count)]
    for value in values:
        producer.produce(topic, value=value.encode(), partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return values


def test_partition_discovery_reads_partitions_added_while_running(flink_server: FlinkServer,
                                                                  martlet: MartletProcess) -> None:
    source, sink = new_topic(martlet.bootstrap, "grow", partitions=1), new_topic(martlet.bootstrap, "seen")
    sent = produce_to(martlet.bootstrap, source, 0, 20)
    reader = Reader(martlet.bootstrap, sink, PARTITIONS, isolation="read_uncommitted")
    job_id = flink_server.submit("discovery", bootstrap=martlet.bootstrap, source=source, sink=sink,
                                 group=f"g-{source}", discovery_ms=1000, parallelism=2)
    try:
        reader.wait(lambda values: len(values) >= len(sent), JOB_PROGRESS_S, "the first partition read",
                    flink_server.flink.log_tail)
        admin = AdminClient({"bootstrap.servers": martlet.bootstrap})
        admin.create_partitions([NewPartitions(source, 3)])[source].result(TIMEOUT_S)
        assert confluent_wait_partitions(admin, source, 3) == 3
        added = time.monotonic()
        sent += produce_to(martlet.bootstrap, source, 1, 20) + produce_to(martlet.bootstrap, source, 2, 20)
        reader.wait(lambda values: len(values) >= len(sent), JOB_PROGRESS_S, "the added partitions read",
                    flink_server.flink.log_tail)
        print(f"added partitions read {time.monotonic() - added:.1f} s after CreatePartitions")
    finally:
        flink_server.cancel(job_id)
        reader.close()
    assert sorted(reader.values) == sorted(f"{value}|seen" for value in sent)


# -- security -----------------------------------------------------------------------------------

def test_sql_job_over_sasl_ssl_with_scram(flink_server: FlinkServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The SQL job of test_sql_job_between_two_kafka_tables with its tables on a SASL_SSL
    listener (SCRAM-SHA-512, a PEM truststore), Kafka's client properties in the DDL (issue 39)."""
    from tests.support.sasl import PASSWORD, add_user, start_secured

    secured = start_secured(tmp_path_factory.mktemp("flink-sasl"))
    try:
        add_user(secured.local, "alice", PASSWORD)
        source, sink = new_topic(secured.local, "words"), new_topic(secured.local, "shouted")
        producer = Producer({"bootstrap.servers": secured.local})
        for n in range(20):
            producer.produce(source, value=json.dumps({"word": f"w{n}", "n": n}).encode(), partition=n % PARTITIONS)
        assert producer.flush(TIMEOUT_S) == 0
        properties = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                      # the SQL connector jar relocates Kafka's classes, its login module's among them
                      "sasl.jaas.config": "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram."
                                          f'ScramLoginModule required username="alice" password="{PASSWORD}";',
                      "ssl.truststore.type": "PEM", "ssl.truststore.location": str(secured.certs / "ca.pem")}
        reader = Reader(secured.local, sink, PARTITIONS, isolation="read_uncommitted")
        job_id = flink_server.submit("sql", bootstrap=secured.addresses["SASL_SSL"], source=source, sink=sink,
                                     group=f"g-{source}", kafka_properties=properties)
        try:
            reader.wait(lambda values: len(values) >= 20, JOB_PROGRESS_S, "the SQL job's output over SASL_SSL",
                        flink_server.flink.log_tail)
        finally:
            flink_server.cancel(job_id)
            reader.close()
        assert sorted(json.loads(value)["word"] for value in reader.values) == sorted(f"W{n}" for n in range(20))
    finally:
        secured.broker.kill()
