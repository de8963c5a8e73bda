"""`kafka-transactions.sh` (Kafka's TransactionsCommand, KIP-664) against Martlet and the
reference Apache Kafka 4.4, side by side: each command runs on both brokers at once and the
two outputs must be the same once producer ids and times are normalised (the reference is the
spec). The subject is a hanging transaction: a confluent-kafka transactional producer commits
one record, begins a second transaction, writes three records, flushes and is abandoned.

`list`, `describe` and `describe-producers` show it open; `find-hanging` finds nothing, as the
coordinator still knows of it; `abort --start-offset` (the Admin client finds the producer
with DescribeProducers and sends WriteTxnMarkers to the partition's leader) ends it on the
partition, after which a read_committed reader gets past it and never sees its records.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.integration.clients import confluent_create_topic, unique_topic
from tests.support.transactions import read_all

pytestmark = [pytest.mark.integration, pytest.mark.java]

T = TypeVar("T")
TOOL_TIMEOUT_S = 120.0
CLIENT_TIMEOUT_S = 30.0
TXN_TIMEOUT_MS = 600_000  # outlives the test, below Kafka's transaction.max.timeout.ms (15 min)
OPEN_VALUES = [b"open-0", b"open-1", b"open-2"]
START_OFFSET = 2  # the committed record is at 0, its COMMIT marker at 1
NODE_ID = "1"  # the reference's node id, and a single Martlet's


@dataclass
class Hanging:
    bootstrap: str
    topic: str
    transactional_id: str
    producer: Producer  # abandoned mid-transaction; kept referenced so nothing closes it
    began_ms: int  # wall clock just before the transaction began
    flushed_ms: int  # and once its records were written


@pytest.fixture(scope="module")
def bootstraps(martlet: Any, reference_kafka: Any) -> dict[str, str]:
    return {"martlet": martlet.bootstrap, "reference": reference_kafka.bootstrap}


def on_both(bootstraps: dict[str, str], work: Callable[[str], T]) -> dict[str, T]:
    """`work(bootstrap)` for each broker, both at once (each call bounds its own wait)."""
    with ThreadPoolExecutor(len(bootstraps)) as pool:
        futures = {name: pool.submit(work, bootstrap) for name, bootstrap in bootstraps.items()}
        return {name: future.result() for name, future in futures.items()}


def hang(bootstrap: str, topic: str, transactional_id: str) -> Hanging:
    confluent_create_topic(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.commit_transaction(CLIENT_TIMEOUT_S)
    began_ms = now_ms()
    producer.begin_transaction()
    for value in OPEN_VALUES:
        producer.produce(topic, value, partition=0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    return Hanging(bootstrap, topic, transactional_id, producer, began_ms, now_ms())


def hang_on_both(bootstraps: dict[str, str], prefix: str) -> dict[str, Hanging]:
    """The same topic and transactional id on each broker, so the outputs can be compared."""
    topic = unique_topic(prefix)
    return on_both(bootstraps, lambda bootstrap: hang(bootstrap, topic, f"tid-{topic}"))


@pytest.fixture(scope="module")
def hanging(bootstraps: dict[str, str]) -> Iterator[dict[str, Hanging]]:
    made = hang_on_both(bootstraps, "txtools")
    try:
        yield made
    finally:
        abandon(made)


def abandon(made: dict[str, Hanging]) -> None:
    """Clean up once the test is done: the producers end their transactions and close while
    the brokers still run (garbage collection at exit would find them gone)."""
    for each in made.values():
        each.producer.abort_transaction(CLIENT_TIMEOUT_S)
        each.producer.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def run(kafka_tool: Callable[..., Any], bootstrap: str, *args: str) -> tuple[int, str, str]:
    result = kafka_tool("transactions", ["--bootstrap-server", bootstrap, *args], TOOL_TIMEOUT_S)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def transactions(kafka_tool: Callable[..., Any], bootstraps: dict[str, str], *args: str) -> dict[str, list[dict[str, str]]]:
    """The table one command prints on each broker, as rows of column -> value."""
    outputs = on_both(bootstraps, lambda bootstrap: run(kafka_tool, bootstrap, *args))
    for name, (code, out, err) in outputs.items():
        assert code == 0, f"{name}: transactions {' '.join(args)} failed:\n{out}\n{err}"
    return {name: table(out) for name, (_, out, _) in outputs.items()}


def table(out: str) -> list[dict[str, str]]:
    """TransactionsCommand prints a header line and one line per row, cells padded and each
    followed by a tab."""
    header, *rows = [line.split("\t")[:-1] for line in out.splitlines() if line.strip()]
    names = [cell.strip() for cell in header]
    return [dict(zip(names, (cell.strip() for cell in row), strict=True)) for row in rows]


def only(rows: list[dict[str, str]], **match: str) -> dict[str, str]:
    found = [row for row in rows if all(row[column] == value for column, value in match.items())]
    assert len(found) == 1, f"{match}: {rows}"
    return found[0]


def in_window(value: str, low_ms: int, high_ms: int) -> str:
    """Check a time the tool printed lies in [low_ms, high_ms]; the placeholder for it."""
    assert low_ms <= int(value) <= high_ms, f"{value} not in [{low_ms}, {high_ms}]"
    return "<time>"


def producer_id(row: dict[str, str], column: str = "ProducerId") -> dict[str, str]:
    """Producer ids depend on what else each broker served: checked to be one, then hidden."""
    assert int(row[column]) >= 0
    return row | {column: "<pid>"}


def last_stable_offset(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()},
                                 isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=CLIENT_TIMEOUT_S)
    return futures[TopicPartition(topic, 0)].result(CLIENT_TIMEOUT_S).offset


def same(outputs: dict[str, T]) -> T:
    assert outputs["martlet"] == outputs["reference"]
    return outputs["martlet"]


# -- while it hangs


def test_list_shows_the_hanging_transaction_ongoing(kafka_tool: Any, bootstraps: dict[str, str],
                                                    hanging: dict[str, Hanging]) -> None:
    tid = hanging["martlet"].transactional_id
    pattern = ["--transactional-id-pattern", re.escape(tid)]
    listed = transactions(kafka_tool, bootstraps, "list", *pattern)
    assert same({name: [producer_id(row) for row in rows] for name, rows in listed.items()}) == [
        {"TransactionalId": tid, "Coordinator": NODE_ID, "ProducerId": "<pid>", "TransactionState": "Ongoing"}]
    # every id, unfiltered: others' too on a shared broker
    for rows in transactions(kafka_tool, bootstraps, "list").values():
        assert only(rows, TransactionalId=tid)["TransactionState"] == "Ongoing"
    # only transactions running longer than the filter: not this one for an hour yet
    assert same(transactions(kafka_tool, bootstraps, "list", "--duration-filter", "3600000", *pattern)) == []
    assert [len(rows) for rows in transactions(kafka_tool, bootstraps, "list", "--duration-filter", "0",
                                               *pattern).values()] == [1, 1]


def test_describe_shows_state_partitions_start_time_and_timeout(kafka_tool: Any, bootstraps: dict[str, str],
                                                                hanging: dict[str, Hanging]) -> None:
    tid = hanging["martlet"].transactional_id
    asked_ms = now_ms()
    described = transactions(kafka_tool, bootstraps, "describe", "--transactional-id", tid)
    told_ms = now_ms()
    normalised = {}
    for name, rows in described.items():
        (row,) = rows
        began_ms, flushed_ms = hanging[name].began_ms, hanging[name].flushed_ms
        # the coordinator starts the clock at the transaction's first AddPartitionsToTxn
        started = in_window(row["CurrentTransactionStartTimeMs"], began_ms, flushed_ms)
        duration = in_window(row["TransactionDurationMs"], asked_ms - flushed_ms, told_ms - began_ms)
        normalised[name] = producer_id(row) | {"CurrentTransactionStartTimeMs": started,
                                               "TransactionDurationMs": duration}
    assert same(normalised) == {
        "CoordinatorId": NODE_ID, "TransactionalId": tid, "ProducerId": "<pid>", "ProducerEpoch": "0",
        "TransactionState": "Ongoing", "TransactionTimeoutMs": str(TXN_TIMEOUT_MS),
        "CurrentTransactionStartTimeMs": "<time>", "TransactionDurationMs": "<time>",
        "TopicPartitions": f"{hanging['martlet'].topic}-0"}


def test_describe_producers_shows_the_open_transactions_start_offset(kafka_tool: Any, bootstraps: dict[str, str],
                                                                     hanging: dict[str, Hanging]) -> None:
    topic = hanging["martlet"].topic
    described = transactions(kafka_tool, bootstraps, "describe", "--transactional-id", hanging["martlet"].transactional_id)
    for extra in ([], ["--broker-id", NODE_ID]):
        shown = transactions(kafka_tool, bootstraps, "describe-producers", "--topic", topic, "--partition", "0", *extra)
        normalised = {}
        for name, rows in shown.items():
            (row,) = rows
            assert row["ProducerId"] == only(described[name])["ProducerId"]
            last = in_window(row["LastTimestamp"], hanging[name].began_ms, hanging[name].flushed_ms)
            normalised[name] = producer_id(row) | {"LastTimestamp": last}
        # sequence 0 was the committed record, 1-3 the open ones; coordinator epoch: that of
        # the COMMIT marker
        assert same(normalised) == {
            "ProducerId": "<pid>", "ProducerEpoch": "0", "LatestCoordinatorEpoch": "0", "LastSequence": "3",
            "LastTimestamp": "<time>", "CurrentTransactionStartOffset": str(START_OFFSET)}
    assert on_both(bootstraps, lambda bootstrap: last_stable_offset(bootstrap, topic)) == {
        "martlet": START_OFFSET, "reference": START_OFFSET}


def test_find_hanging_finds_nothing_the_coordinator_knows(kafka_tool: Any, bootstraps: dict[str, str],
                                                          hanging: dict[str, Hanging]) -> None:
    """Hanging, for the tool, is open on a partition but unknown to the coordinator (or older
    than the largest timeout): this one is neither. By broker, it asks DescribeProducers about
    every partition the broker leads, `__consumer_offsets` included."""
    topic = hanging["martlet"].topic
    assert same(transactions(kafka_tool, bootstraps, "find-hanging", "--topic", topic, "--partition", "0")) == []
    assert same(transactions(kafka_tool, bootstraps, "find-hanging", "--broker-id", NODE_ID)) == []


def test_describing_an_unknown_transactional_id_fails_as_on_the_reference(kafka_tool: Any,
                                                                          bootstraps: dict[str, str]) -> None:
    # (describe-producers of a partition that does not exist is not compared: the Admin
    # client looks for its leader until its timeout, a minute, on both brokers)
    missing = unique_topic("tid-missing")
    failed = on_both(bootstraps, lambda bootstrap: run(kafka_tool, bootstrap, "describe", "--transactional-id", missing))
    assert same({name: (code, out) for name, (code, out, _) in failed.items()})[0] != 0
    assert same({name: last_line(err) for name, (_, _, err) in failed.items()}) == (
        f"Failed to describe transaction state of transactional-id `{missing}`: DescribeTransactions request "
        f"for transactionalId `{missing}` failed because the ID could not be found. Enable debug logging for "
        "additional detail.")


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# -- abort


@pytest.fixture
def hanging_for_abort(bootstraps: dict[str, str]) -> Iterator[dict[str, Hanging]]:
    made = hang_on_both(bootstraps, "txabort")
    try:
        yield made
    finally:
        abandon(made)


def test_abort_ends_the_hanging_transaction_for_read_committed_readers(kafka_tool: Any, bootstraps: dict[str, str],
                                                                       hanging_for_abort: dict[str, Hanging]) -> None:
    hanging = hanging_for_abort
    topic = hanging["martlet"].topic
    where = ["--topic", topic, "--partition", "0"]
    # an offset no open transaction starts at: the tool refuses, sending nothing
    refused = on_both(bootstraps, lambda bootstrap: run(kafka_tool, bootstrap, "abort", *where, "--start-offset", "1"))
    assert same({name: (code, out, last_line(err)) for name, (code, out, err) in refused.items()}) == (
        1, "", f"Could not find any open transactions starting at offset 1 on partition {topic}-0")

    aborted = on_both(bootstraps, lambda bootstrap: run(kafka_tool, bootstrap, "abort", *where, "--start-offset",
                                                        str(START_OFFSET)))
    assert same({name: (code, out) for name, (code, out, _) in aborted.items()}) == (0, "")  # it prints nothing
    shown = transactions(kafka_tool, bootstraps, "describe-producers", *where)
    aborted_ms = now_ms()
    normalised = {}
    for name, rows in shown.items():
        (row,) = rows
        normalised[name] = producer_id(row) | {
            "LastTimestamp": in_window(row["LastTimestamp"], hanging[name].flushed_ms, aborted_ms)}  # the marker's
    assert same(normalised) == {
        "ProducerId": "<pid>", "ProducerEpoch": "0", "LatestCoordinatorEpoch": "0", "LastSequence": "3",
        "LastTimestamp": "<time>", "CurrentTransactionStartOffset": "None"}
    # three records and the ABORT marker at 5: the last stable offset moved past them
    assert on_both(bootstraps, lambda bootstrap: last_stable_offset(bootstrap, topic)) == {
        "martlet": START_OFFSET + 4, "reference": START_OFFSET + 4}
    # the markers went to the partition only: the coordinator still has the transaction open
    listed = transactions(kafka_tool, bootstraps, "list", "--transactional-id-pattern", re.escape(f"tid-{topic}"))
    assert {name: only(rows)["TransactionState"] for name, rows in listed.items()} == {
        "martlet": "Ongoing", "reference": "Ongoing"}

    on_both(bootstraps, lambda bootstrap: write_plain(bootstrap, topic, b"after"))
    committed = on_both(bootstraps, lambda bootstrap: read_all(bootstrap, topic, "read_committed", partitions=1))
    assert same(committed) == ["committed", "after"]
    uncommitted = on_both(bootstraps, lambda bootstrap: read_all(bootstrap, topic, "read_uncommitted", partitions=1))
    assert same(uncommitted) == ["committed", "open-0", "open-1", "open-2", "after"]


def write_plain(bootstrap: str, topic: str, value: bytes) -> None:
    """A record from a non-transactional producer, after the aborted ones."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, partition=0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0


def test_abort_by_producer_keeps_the_coordinator_epoch_and_fences_an_older_one(
        kafka_tool: Any, bootstraps: dict[str, str], hanging_for_abort: dict[str, Hanging]) -> None:
    """The form for brokers before 3.0: the producer and the coordinator epoch are given, so
    the Admin client sends WriteTxnMarkers with that epoch without asking DescribeProducers."""
    topic = hanging_for_abort["martlet"].topic
    where = ["--topic", topic, "--partition", "0"]
    shown = transactions(kafka_tool, bootstraps, "describe-producers", *where)
    pid_at = {bootstraps[name]: only(rows)["ProducerId"] for name, rows in shown.items()}

    def abort(coordinator_epoch: int) -> Callable[[str], tuple[int, str, str]]:
        return lambda bootstrap: run(kafka_tool, bootstrap, "abort", *where, "--producer-id", pid_at[bootstrap],
                                     "--producer-epoch", "0", "--coordinator-epoch", str(coordinator_epoch))

    assert {name: code for name, (code, _, _) in on_both(bootstraps, abort(5)).items()} == {"martlet": 0, "reference": 0}
    shown = transactions(kafka_tool, bootstraps, "describe-producers", *where)
    assert {name: only(rows)["LatestCoordinatorEpoch"] for name, rows in shown.items()} == {
        "martlet": "5", "reference": "5"}
    fenced = on_both(bootstraps, abort(3))
    assert same({name: (code, "coordinator epoch 3 has been fenced" in err) for name, (code, _, err) in fenced.items()}) \
        == (1, True)
