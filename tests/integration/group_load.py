"""Helpers for the consumer-group churn tests (test_group_churn.py): an endpoint that is either
a Martlet with short session timeouts allowed or the reference Kafka, a paced producer, a
ledger that checks every delivery and commit of a group, confluent-kafka members that record
their rebalance callbacks, the Java console consumer and kafka-consumer-groups parsing, and a
member in its own Python process (so it can be killed with SIGKILL). Every wait is bounded.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from martlet.compat.reference.kafka import tool_command
from tests.integration.clients import PARTITIONS, ContinuousProducer, Deadline

# Short session timeouts are allowed on Martlet; the reference Kafka keeps its default
# group.min.session.timeout.ms (6000), so tests that run on both use at least that there.
GROUP_CONFIG = b"[groups]\ninitial_rebalance_delay_ms = 0\nsession_timeout_ms_min = 1000\n"
MARTLET_SESSION_TIMEOUT_MS = 3000
KAFKA_SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 300
MAX_POLL_INTERVAL_MS = 30_000  # also the rebalance timeout librdkafka sends in JoinGroup
SETTLE_S = 60.0
TOOL_TIMEOUT_S = 120.0
ALL_PARTITIONS = frozenset(range(PARTITIONS))


@dataclass
class Endpoint:
    """One broker under test: `name` is "martlet" or "kafka"; `log_tail` explains failures."""

    name: str
    bootstrap: str
    session_timeout_ms: int
    log_tail: Callable[[], str]

    def report(self) -> str:
        return f"{self.name} broker log tail:\n{self.log_tail()}"


def write_group_config(tmp_path: Path) -> Path:
    path = tmp_path / "martlet-groups.toml"
    path.write_bytes(GROUP_CONFIG)
    return path


# -- produce -------------------------------------------------------------------------------

@dataclass
class PacedProducer(ContinuousProducer):
    """ContinuousProducer at about `rate_per_s` records per second (bounded load on a shared
    machine); same values, acknowledgements and stop() as its parent."""

    rate_per_s: float = 200.0

    def _run(self) -> None:
        try:
            producer = Producer({**self.conf, "bootstrap.servers": self.bootstrap, "error_cb": self._on_error})
            try:
                began = time.monotonic()
                while not self._stop.is_set() and self.sent < self.max_records:
                    due = int((time.monotonic() - began) * self.rate_per_s) + 1
                    while self.sent < due:
                        seq = self.sent
                        producer.produce(self.topic, key=b"k%02d" % (seq % 64), value=self.value(seq),
                                         on_delivery=partial(self._on_delivery, seq))
                        self.sent += 1
                    producer.poll(0.02)
                self.unflushed = producer.flush(60)
            finally:
                producer.close()
        except BaseException as exc:  # surfaced by stop()
            self.crashed = exc

    def acked_offsets(self) -> dict[tuple[int, int], bytes]:
        """(partition, offset) -> value of every acknowledged record."""
        with self._lock:
            return {(p, o): self.value(seq) for p, o, seq in self.acked}


def paced_producer(bootstrap: str, topic: str, rate_per_s: float = 200.0) -> PacedProducer:
    return PacedProducer(bootstrap, topic, {
        "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "message.timeout.ms": 60_000, "retry.backoff.ms": 100,
    }, rate_per_s=rate_per_s)


# -- the group ledger ----------------------------------------------------------------------

@dataclass
class Ledger:
    """What every member of one group received and committed, in the order it happened (all
    members are polled from one thread). A record delivered again must not lie below its
    partition's last successful commit: a rebalance may only re-deliver uncommitted records."""

    values: dict[tuple[int, int], bytes] = field(default_factory=dict)
    deliveries: dict[tuple[int, int], int] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)
    bad_duplicates: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    observations: int = 0

    def delivered(self, member: str, partition: int, offset: int, value: bytes) -> None:
        key = (partition, offset)
        count = self.deliveries.get(key, 0)
        if count and offset < self.committed.get(partition, 0):
            self.bad_duplicates.append(
                f"{member} got {partition}:{offset} again, below the committed offset "
                f"{self.committed[partition]}")
        if count and self.values[key] != value:
            self.bad_duplicates.append(f"{partition}:{offset} changed: {self.values[key]!r} then {value!r}")
        self.deliveries[key] = count + 1
        self.values[key] = value

    def commits(self, offsets: Iterable[TopicPartition]) -> None:
        for tp in offsets:
            if tp.error is None and tp.offset >= 0:
                self.committed[tp.partition] = tp.offset

    def check_disjoint(self, owners: dict[str, frozenset[int]]) -> None:
        """No partition owned by two members at this moment (sampled after every poll round)."""
        self.observations += 1
        names = sorted(owners)
        for i, first in enumerate(names):
            for second in names[i + 1:]:
                shared = owners[first] & owners[second]
                if shared:
                    self.overlaps.append(f"{first} and {second} both own {sorted(shared)}: {owners}")

    def duplicates(self) -> int:
        return sum(count - 1 for count in self.deliveries.values())

    def missing(self, acked: dict[tuple[int, int], bytes]) -> list[tuple[int, int]]:
        return sorted(key for key in acked if key not in self.values)

    def wrong_values(self, acked: dict[tuple[int, int], bytes]) -> list[str]:
        return [f"{key}: acked {value!r}, consumed {self.values[key]!r}"
                for key, value in acked.items() if key in self.values and self.values[key] != value]


# -- confluent-kafka members ---------------------------------------------------------------

class Member:
    """A confluent-kafka group member that records on_assign/on_revoke/on_lost calls, reports
    each delivery to the ledger and commits synchronously when asked."""

    def __init__(self, name: str, endpoint: Endpoint, group: str, topic: str, ledger: Ledger,
                 **extra: object) -> None:
        self.name = name
        self.ledger = ledger
        self.assigns: list[frozenset[int]] = []
        self.revokes: list[frozenset[int]] = []
        self.lost: list[frozenset[int]] = []
        self.errors: list[str] = []
        self.commit_failures: list[str] = []
        self.closed = False
        conf: dict[str, object] = {
            "bootstrap.servers": endpoint.bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": False,
            "session.timeout.ms": endpoint.session_timeout_ms, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS, "error_cb": self._on_error,
        }
        conf.update(extra)
        self.consumer = Consumer(conf)
        self.topic = topic

    def subscribe(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigns.append(frozenset(tp.partition for tp in partitions))

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.revokes.append(frozenset(tp.partition for tp in partitions))

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.lost.append(frozenset(tp.partition for tp in partitions))

    def _on_error(self, err: KafkaError) -> None:
        self.errors.append(str(err))

    def owned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def poll(self, timeout_s: float = 0.1) -> int:
        messages = self.consumer.consume(500, timeout_s)
        for message in messages:
            if message.error() is not None:
                self.errors.append(f"message error: {message.error()}")
                continue
            self.ledger.delivered(self.name, message.partition(), message.offset(), message.value())
        return len(messages)

    def commit(self) -> bool:
        """Commit the positions of everything delivered so far, synchronously."""
        try:
            self.ledger.commits(self.consumer.commit(asynchronous=False) or [])
            return True
        except KafkaException as exc:  # e.g. no offsets yet, or a rebalance in progress
            self.commit_failures.append(str(exc.args[0]))
            return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def generation_of(member: Member) -> int:
    """The generation id the member's librdkafka holds, read from its serialized ConsumerGroupMetadata
    ("CGMDv2:", then the generation as a native int32, then the group and member ids)."""
    raw = member.consumer.consumer_group_metadata()
    assert isinstance(raw, bytes) and raw.startswith(b"CGMDv2:"), raw
    return struct.unpack_from("=i", raw, 7)[0]


class Group:
    """Members polled round-robin from this thread; after every round the ledger checks that
    no partition has two owners. Members commit every `commit_every_s`."""

    def __init__(self, endpoint: Endpoint, group: str, topic: str, commit_every_s: float = 1.0,
                 **member_conf: object) -> None:
        self.endpoint = endpoint
        self.group_id = group
        self.topic = topic
        self.ledger = Ledger()
        self.member_conf = member_conf
        self.members: list[Member] = []
        self.commit_every_s = commit_every_s
        self._next_commit = time.monotonic() + commit_every_s
        self.admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
        self._counter = 0
        self.describe_errors: list[str] = []
        self.fresh_admin = False  # True: a new admin client per describe (across broker restarts)

    def join(self, count: int = 1, subscribe: bool = True, **extra: object) -> list[Member]:
        added = []
        for _ in range(count):
            self._counter += 1
            member = Member(f"m{self._counter}", self.endpoint, self.group_id, self.topic, self.ledger,
                            **{**self.member_conf, **extra})
            if subscribe:
                member.subscribe()
            self.members.append(member)
            added.append(member)
        return added

    def live(self) -> list[Member]:
        return [m for m in self.members if not m.closed]

    def owners(self) -> dict[str, frozenset[int]]:
        return {m.name: m.owned() for m in self.live()}

    def poll_round(self, timeout_s: float = 0.1) -> int:
        got = sum(m.poll(timeout_s) for m in self.live())
        self.ledger.check_disjoint(self.owners())
        if time.monotonic() >= self._next_commit:
            for m in self.live():
                if m.owned():
                    m.commit()
            self._next_commit = time.monotonic() + self.commit_every_s
        return got

    def poll_for(self, seconds: float) -> None:
        """Keep consuming for `seconds` (the load phase of a test, not a synchronisation)."""
        deadline = Deadline(seconds)
        while not deadline.passed:
            self.poll_round()

    def poll_until(self, done: Callable[[], bool], timeout_s: float = SETTLE_S) -> bool:
        deadline = Deadline(timeout_s)
        while not deadline.passed:
            self.poll_round()
            if done():
                return True
        return done()

    def balanced(self, sizes: list[int]) -> bool:
        owned = [m.owned() for m in self.live()]
        return (sorted((len(o) for o in owned), reverse=True) == sizes
                and frozenset().union(*owned) == ALL_PARTITIONS)

    def described(self) -> tuple[str, int]:
        """(state, member count) from DescribeGroups through the admin client."""
        admin = AdminClient({"bootstrap.servers": self.endpoint.bootstrap}) if self.fresh_admin else self.admin
        [future] = admin.describe_consumer_groups([self.group_id], request_timeout=10).values()
        try:
            description = future.result(timeout=15)
        except KafkaException as exc:  # e.g. timed out while the broker restarts; the caller retries
            self.describe_errors.append(str(exc))
            return f"describe failed: {exc}", -1
        return description.state.name, len(description.members)

    def wait_balanced(self, sizes: list[int], timeout_s: float = SETTLE_S) -> None:
        """Poll until the members own `sizes` partitions (largest first, every partition
        owned) and the broker describes the group as Stable with that many members."""
        last_describe = [0.0]

        def settled() -> bool:
            if not self.balanced(sizes) or time.monotonic() - last_describe[0] < 0.5:
                return False
            last_describe[0] = time.monotonic()
            return self.described() == ("STABLE", len(sizes))

        if not self.poll_until(settled, timeout_s):
            state = self.described()
            raise AssertionError(
                f"group not balanced as {sizes} within {timeout_s}s: owners {self.owners()}, "
                f"described {state}; errors {[m.errors[-3:] for m in self.members]}\n{self.endpoint.report()}")

    def leave(self, members: list[Member]) -> None:
        """Commit synchronously, then close (LeaveGroup); no poll in between, so everything
        delivered to a leaving member is committed."""
        for m in members:
            m.commit()
        for m in members:
            m.close()

    def drain(self, acked: dict[tuple[int, int], bytes], timeout_s: float = SETTLE_S) -> None:
        """Poll until every acknowledged record was delivered to some member, then commit."""
        self.poll_until(lambda: not self.ledger.missing(acked), timeout_s)
        for m in self.live():
            m.commit()

    def close(self) -> None:
        for m in self.members:
            m.close()

    def check(self, acked: dict[tuple[int, int], bytes]) -> None:
        """Nothing lost, no record changed, duplicates only above the last commit, never two
        owners of a partition."""
        ledger = self.ledger
        missing = ledger.missing(acked)
        assert not missing, (f"{len(missing)} of {len(acked)} acknowledged records never consumed, "
                             f"first {missing[:10]}; committed {ledger.committed}\n{self.endpoint.report()}")
        assert not ledger.wrong_values(acked), ledger.wrong_values(acked)[:5]
        assert not ledger.bad_duplicates, (f"{len(ledger.bad_duplicates)} re-deliveries of committed "
                                           f"records, first {ledger.bad_duplicates[:5]}\n{self.endpoint.report()}")
        assert not ledger.overlaps, f"partitions with two owners: {ledger.overlaps[:5]}"
        assert ledger.observations > 10, ledger.observations


# -- a member in its own process (kill -9) ---------------------------------------------------

MEMBER_SCRIPT = r"""
import json, sys
from confluent_kafka import Consumer
bootstrap, group, topic, session_ms = sys.argv[1:5]
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": int(session_ms),
                     "heartbeat.interval.ms": 300, "max.poll.interval.ms": 30000})
consumer.subscribe([topic])
last = None
while True:  # until killed
    consumer.poll(0.1)
    owned = sorted(tp.partition for tp in consumer.assignment())
    if owned != last:
        print(json.dumps(owned), flush=True)
        last = owned
"""


class MemberProcess:
    """A confluent-kafka member in a child Python process that prints its assignment (a JSON
    list) on every change; a reader thread collects the lines."""

    def __init__(self, endpoint: Endpoint, group: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MEMBER_SCRIPT, endpoint.bootstrap, group, topic,
             str(endpoint.session_timeout_ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assignments: list[list[int]] = []
        self.err_text = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.assignments.append(json.loads(line))

    def owned(self) -> frozenset[int]:
        return frozenset(self.assignments[-1]) if self.assignments else frozenset()

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit; the broker must notice by the session timeout."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                if stream is self.proc.stderr:
                    self.err_text = stream.read().decode(errors="replace")[-2000:]
                stream.close()

    def stderr(self) -> str:
        return self.err_text


# -- the Java console consumer and kafka-consumer-groups -------------------------------------

class ConsoleConsumer:
    """kafka-console-consumer in a group, printing values to a file; SIGTERM makes it commit
    and leave the group."""

    def __init__(self, endpoint: Endpoint, group: str, topic: str, client_id: str, out_dir: Path) -> None:
        self.client_id = client_id
        self.out_path = out_dir / f"{client_id}.out"
        self.err_path = out_dir / f"{client_id}.err"
        command = tool_command("console-consumer", [
            "--bootstrap-server", endpoint.bootstrap, "--topic", topic, "--group", group,
            "--consumer-property", "auto.offset.reset=earliest",
            "--consumer-property", f"client.id={client_id}",
            "--consumer-property", f"session.timeout.ms={endpoint.session_timeout_ms}",
            "--consumer-property", "heartbeat.interval.ms=500",
            "--consumer-property", "auto.commit.interval.ms=500",
        ], heap="256m")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def lines(self) -> list[bytes]:
        return self.out_path.read_bytes().splitlines()

    def terminate(self, timeout_s: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise AssertionError(f"console consumer {self.client_id} ignored SIGTERM for {timeout_s}s") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stderr_tail(self) -> str:
        return "\n".join(self.err_path.read_text(errors="replace").splitlines()[-15:])


def consumer_groups(kafka_tool: Callable[..., subprocess.CompletedProcess[bytes]], bootstrap: str,
                    group: str, *extra: str) -> list[list[str]]:
    """Rows of `kafka-consumer-groups --describe --group G [extra]` that start with G."""
    result = kafka_tool("consumer-groups", ["--bootstrap-server", bootstrap, "--describe", "--group", group,
                                            *extra], TOOL_TIMEOUT_S)
    out = result.stdout.decode(errors="replace")
    assert result.returncode == 0, f"consumer-groups failed:\n{out}\n{result.stderr.decode(errors='replace')}"
    return [line.split() for line in out.splitlines() if line.split()[:1] == [group]]


@dataclass(frozen=True)
class MemberRow:
    """A row of `--describe --members --verbose`."""

    consumer_id: str
    host: str
    client_id: str
    partitions: int
    assignment: str


def describe_members(kafka_tool: Callable[..., subprocess.CompletedProcess[bytes]], bootstrap: str,
                     group: str) -> list[MemberRow]:
    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT (ASSIGNMENT may hold no spaces)
    rows = consumer_groups(kafka_tool, bootstrap, group, "--members", "--verbose")
    return [MemberRow(row[1], row[2], row[3], int(row[4]), " ".join(row[5:])) for row in rows]
