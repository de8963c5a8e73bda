"""Martlet on a real HDFS (`martlet serve --store hdfs://...`): the round trip, kill -9 under
acks=all load, HDFS stopped for 60 s under acks=1 and acks=all load, and HDFS stopped for 30 s
while requests that need no store keep their latency and those that do answer retriably."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.clients import (
    FLUSH_TIMEOUT_S,
    ContinuousProducer,
    check_round_trip,
    confluent_consume,
    confluent_consumer,
    confluent_create_topic,
    confluent_produce,
    confluent_wait_partitions,
    make_records,
    unique_topic,
)
from tests.integration.delivery_load import p99
from tests.integration.raw_client import RawClient, record_batch
from tests.support.durability import check_acknowledged, consume_all, store_args, wait_acked
from tests.support.group_requests import (
    E,
    assignment,
    commit,
    heartbeat,
    join,
    request,
    subscription,
    sync,
)
from tests.support.group_requests import fetch as offset_fetch

pytestmark = pytest.mark.integration

OUTAGE_S = 60.0  # how long HDFS stays down: the scenario under test, not a wait for anything
MEMORY_BYTES = 8 << 20  # a small budget, so that the outage fills it
RECOVERY_S = 120.0


def test_serve_on_hdfs_keeps_data_across_a_graceful_restart(martlet_process, reference_hdfs) -> None:
    broker = martlet_process(extra_args=store_args(reference_hdfs))
    topic = unique_topic("hdfs")
    confluent_create_topic(broker.bootstrap, topic)
    records = make_records(6_000)
    acks = confluent_produce(broker.bootstrap, topic, records, **{"enable.idempotence": True})
    port = broker.port
    assert broker.stop() == 0, broker.log_tail()
    broker.start(port)
    consumer = confluent_consumer(broker.bootstrap)
    try:
        assert confluent_wait_partitions(consumer, topic, 6) == 6
        got = confluent_consume(consumer, topic, len(records))
    finally:
        consumer.close()
    check_round_trip(records, acks, got)


def _epochs(bootstrap: str, topic: str, partition: int, offsets: tuple[int, ...]) -> list[int]:
    """The leader epoch (the partition session S) stamped on the records at `offsets`."""
    consumer: Consumer = confluent_consumer(bootstrap)
    epochs = []
    try:
        for offset in offsets:
            consumer.assign([TopicPartition(topic, partition, offset)])
            msg = None
            deadline = time.monotonic() + 30
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
            assert msg is not None and msg.error() is None, f"no record at {partition}:{offset}"
            epochs.append(msg.leader_epoch())
    finally:
        consumer.close()
    return epochs


def test_kill_9_under_acks_all_load_on_hdfs_loses_nothing_and_starts_a_new_session(
        martlet_process, reference_hdfs) -> None:
    broker = martlet_process(extra_args=store_args(reference_hdfs))
    topic = unique_topic("hdfs-kill9")
    confluent_create_topic(broker.bootstrap, topic)
    producer = ContinuousProducer(broker.bootstrap, topic, {
        "acks": "all", "enable.idempotence": False, "max.in.flight.requests.per.connection": 1,
        "linger.ms": 5, "batch.size": 64 * 1024, "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000)})
    producer.start()
    try:
        wait_acked(producer, 3_000)
        # the sticky partitioner may leave a partition empty: watch one that has records
        watched = Counter(partition for partition, _, _ in producer.acked).most_common(1)[0][0]
        before = max(offset for partition, offset, _ in producer.acked if partition == watched)
        broker.restart(hard=True)
        wait_acked(producer, producer.acked_count() + 3_000)
    finally:
        producer.stop()
    ends, log = consume_all(broker.bootstrap, topic)
    check_acknowledged(producer, log)
    first, last = _epochs(broker.bootstrap, topic, watched, (before, ends[watched] - 1))
    assert last > first, f"the session S (leader epoch) did not change across the restart: {first} -> {last}"


def test_hdfs_down_for_a_minute_slows_producers_and_loses_nothing(
        martlet_process, reference_hdfs, tmp_path) -> None:
    config = tmp_path / "martlet.toml"
    config.write_text(f"[engine]\nmemory_bytes = {MEMORY_BYTES}\n")
    broker = martlet_process(extra_args=[*store_args(reference_hdfs), "--config", str(config)])
    topic = unique_topic("hdfs-outage")
    confluent_create_topic(broker.bootstrap, topic)
    # librdkafka gives up on a request in flight after socket.timeout.ms (60 s by default),
    # drops the connection and, when idempotent, bumps its epoch and resends: the outage
    # would then test that client path, not Martlet. Both clients wait out the outage.
    patient = {"message.timeout.ms": int((OUTAGE_S + RECOVERY_S) * 1000),
               "socket.timeout.ms": int((OUTAGE_S + RECOVERY_S) * 1000), "linger.ms": 5}
    # A producer that is not idempotent keeps produce order only if nothing is retried: even
    # with one request in flight librdkafka has the partition's next request built and queued
    # (queue.buffering.backpressure.threshold >= 1); when the one in flight fails, its records
    # go back to the partition queue and the queued, later request is sent first ("retrying
    # may cause reordering unless enable.idempotence is set to true", CONFIGURATION.md,
    # `retries`). A full memory budget answers REQUEST_TIMED_OUT after timeout_ms (that is
    # request.timeout.ms, 30 s by default, shorter than the outage), so this producer gives
    # the broker long enough to wait for room instead.
    fast = ContinuousProducer(broker.bootstrap, topic, {
        "acks": 1, "enable.idempotence": False, "max.in.flight.requests.per.connection": 1,
        "request.timeout.ms": 150_000, "queue.buffering.max.messages": 2_000_000, **patient},
        max_outstanding=1_000_000, max_records=5_000_000)
    durable = ContinuousProducer(broker.bootstrap, topic, {
        "acks": "all", "enable.idempotence": True, "request.timeout.ms": 150_000, **patient},
        max_outstanding=200)
    fast.start()
    durable.start()
    try:
        wait_acked(fast, 20_000)
        wait_acked(durable, 500)
        reference_hdfs.stop_process()
        try:
            at_stop = fast.acked_count(), durable.acked_count()
            threading.Event().wait(OUTAGE_S)  # HDFS stays down this long
            in_outage = fast.acked_count() - at_stop[0], durable.acked_count() - at_stop[1]
        finally:
            reference_hdfs.restart()
        # acks=1 goes on until unpersisted data fills the budget, then waits: each record
        # takes at least 28 bytes in a batch (its 18-byte value, 3-byte key and framing).
        assert in_outage[0] > 0, "acks=1 produce stopped at once instead of filling memory"
        assert in_outage[0] * 28 <= MEMORY_BYTES + (2 << 20), (
            f"{in_outage[0]} acks=1 records were accepted while HDFS was down: more than the "
            f"{MEMORY_BYTES}-byte memory budget holds")
        assert in_outage[1] <= durable.max_outstanding, (
            f"{in_outage[1]} acks=all records were acknowledged while HDFS was down")
        after = fast.acked_count(), durable.acked_count()
        wait_acked(fast, after[0] + 20_000)
        wait_acked(durable, after[1] + 500)
    finally:
        fast.stop(timeout_s=RECOVERY_S)
        durable.stop(timeout_s=RECOVERY_S)
    assert not fast.failed and not durable.failed, (fast.failed[:3], durable.failed[:3])
    assert fast.unflushed == 0 and durable.unflushed == 0
    _, log = consume_all(broker.bootstrap, topic)
    check_acknowledged(fast, log)
    check_acknowledged(durable, log)
    values = Counter(got.value for records in log.values() for got in records)
    duplicated = [value for value, count in values.items() if count > 1]
    assert not duplicated, f"{len(duplicated)} values stored twice, e.g. {duplicated[:3]}"
    assert len(values) == fast.sent + durable.sent, "records sent but not stored"


# -- HDFS down while the control plane is used

CONTROL_OUTAGE_S = 30.0  # how long HDFS stays down: the scenario under test
QUICK_P99_S = 0.050  # issue 12: Metadata and Heartbeat keep p99 <= 50 ms during the outage
COMMIT_ANSWER_S = 5.0 + 1.0  # Martlet's commit timeout (Kafka's offsets.commit.timeout.ms), plus slack
DDL_TIMEOUT_MS = 3_000  # CreateTopics timeout_ms (the admin client's operation timeout)
RETRIABLE_COMMIT = {E.request_timed_out, E.coordinator_load_in_progress, E.coordinator_not_available,
                    E.not_coordinator}  # what librdkafka and the Java consumer retry a commit on
PRODUCE, FETCH, METADATA, CREATE_TOPICS = 0, 1, 3, 19
REOPEN_S = 240.0  # an offsets log reopened after a failed write may wait for HDFS lease recovery (~120 s)


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def _percentiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"n={len(ordered)} p50={statistics.median(ordered) * 1000:.1f} ms p99={p99 * 1000:.1f} ms "
            f"max={ordered[-1] * 1000:.1f} ms")


class Repeating(threading.Thread):
    """Sends one request every `period_s` on its own connection and records each latency,
    until stopped; an error code or a failure is kept for the test to report."""

    def __init__(self, bootstrap: str, name: str, period_s: float, call: Callable[[RawClient], int]) -> None:
        super().__init__(name=name, daemon=True)
        self.client = RawClient(bootstrap, timeout_s=CONTROL_OUTAGE_S, client_id=name)
        self.period_s = period_s
        self.call = call
        self.latencies: list[float] = []
        self.errors: list[object] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                code, took = _timed(lambda: self.call(self.client))
                self.latencies.append(took)
                if code != 0:
                    self.errors.append(E(code))
                self.stopping.wait(max(self.period_s - took, 0))
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.errors.append(error)

    def stop(self) -> None:
        self.stopping.set()
        self.join(CONTROL_OUTAGE_S)
        self.client.close()


def _metadata(client: RawClient) -> int:
    answer = client.request(request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}))
    return max((t.error_code for t in answer.topics), default=0)


def _produce(client: RawClient, topic: str, values: list[bytes], acks: int = 1) -> int:
    body = {"transactional_id": None, "acks": acks, "timeout": 30_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": record_batch(values)}]}]}
    return int(client.request(request(PRODUCE, 9, body)).responses[0].partition_responses[0].error_code)


def _fetch(client: RawClient, topic: str) -> tuple[int, bytes]:
    """Fetch from offset 0 of partition 0, without waiting: (error code, record bytes)."""
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    [partition] = client.request(request(FETCH, 12, body)).responses[0].partitions
    return int(partition.error_code), bytes(partition.records or b"")


def _create(client: RawClient, topic: str) -> int:
    body = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout": DDL_TIMEOUT_MS, "validate_only": False}
    return int(client.request(request(CREATE_TOPICS, 7, body)).topics[0].error_code)


def _until(call: Callable[[], Any], done: Callable[[Any], bool], timeout_s: float) -> Any:
    """Repeat `call` (each one bounded by its own request timeout) until `done` says its
    answer is final, or the time is up; the last answer."""
    deadline = time.monotonic() + timeout_s
    answer = call()
    while not done(answer) and time.monotonic() < deadline:
        answer = call()
    return answer


class Outage:
    """What was asked and answered while HDFS was down."""

    def __init__(self) -> None:
        self.fetched: list[tuple[tuple[int, bytes], float]] = []
        self.produced: list[tuple[int, float]] = []
        self.committed: list[Any] = []
        self.commit_s = 0.0
        self.recommitted: list[Any] = []  # the next commit: the failed log is being reopened
        self.recommit_s = 0.0
        self.create_code = 0
        self.create_s = 0.0


def _joined_member(client: RawClient, group: str, topic: str) -> tuple[str, int]:
    """A classic group's only member (KIP-394 join, then sync): its id and generation."""
    protocols = (("range", subscription(topic)),)
    first = join(client, group, protocols=protocols)
    joined = join(client, group, first.member_id, protocols=protocols)
    assert joined.error_code == 0, joined
    member_id, generation = joined.member_id, joined.generation_id
    assert sync(client, group, generation, member_id, assignments=[(member_id, assignment(topic, [0]))]) == E.none
    return member_id, generation


def _during(main: RawClient, commit_once: Callable[[int], list[Any]], topic: str, created: str) -> Outage:
    """Fetch of data in memory, acks=1 produce, one commit and one topic creation."""
    seen = Outage()
    seen.fetched = [_timed(lambda: _fetch(main, topic)) for _ in range(5)]
    seen.produced = [_timed(lambda i=i: _produce(main, topic, [b"during-%d" % i] * 10)) for i in range(5)]
    seen.committed, seen.commit_s = _timed(lambda: commit_once(50))
    seen.recommitted, seen.recommit_s = _timed(lambda: commit_once(55))
    seen.create_code, seen.create_s = _timed(lambda: _create(main, created))
    return seen


def _check_outage(seen: Outage, metadata: Repeating, beats: Repeating) -> None:
    print(f"\nduring the outage: Metadata {_percentiles(metadata.latencies)}; "
          f"Heartbeat {_percentiles(beats.latencies)}; Fetch {_percentiles([s for _, s in seen.fetched])}; "
          f"Produce acks=1 {_percentiles([s for _, s in seen.produced])}; "
          f"OffsetCommit {seen.committed} in {seen.commit_s * 1000:.0f} ms, "
          f"then {seen.recommitted} in {seen.recommit_s * 1000:.0f} ms; "
          f"CreateTopics {E(seen.create_code)} in {seen.create_s * 1000:.0f} ms")
    assert not metadata.errors and not beats.errors, (metadata.errors[:3], beats.errors[:3])
    assert len(metadata.latencies) > CONTROL_OUTAGE_S / 0.050 / 2, "Metadata was not answered all along"
    assert len(beats.latencies) > CONTROL_OUTAGE_S / 0.100 / 2, "Heartbeat was not answered all along"
    assert p99(metadata.latencies) <= QUICK_P99_S, _percentiles(metadata.latencies)
    assert p99(beats.latencies) <= QUICK_P99_S, _percentiles(beats.latencies)
    for (code, records), took in seen.fetched:
        assert code == 0 and b"before-99" in records, (E(code), len(records))
        assert took <= 1.0, f"a Fetch of data in memory took {took:.3f} s"
    for code, took in seen.produced:
        assert code == 0 and took <= 1.0, (E(code), took)
    # the commit and the topic creation need the store: a retriable answer within their timeouts
    assert seen.committed == [E.coordinator_not_available] and seen.commit_s <= COMMIT_ANSWER_S, (
        seen.committed, seen.commit_s)
    assert seen.recommitted == [E.coordinator_not_available] and seen.recommit_s <= COMMIT_ANSWER_S, (
        seen.recommitted, seen.recommit_s)
    assert seen.committed[0] in RETRIABLE_COMMIT
    assert seen.create_code == E.request_timed_out and seen.create_s <= DDL_TIMEOUT_MS / 1000 + 1.0, (
        E(seen.create_code), seen.create_s)


def test_hdfs_down_keeps_the_control_plane_answering(martlet_process, reference_hdfs, tmp_path) -> None:
    config = tmp_path / "martlet.toml"
    config.write_text("[groups]\ninitial_rebalance_delay_ms = 0\n")
    broker = martlet_process(extra_args=[*store_args(reference_hdfs), "--config", str(config)])
    topic, created, group = unique_topic("hdfs-ctl"), unique_topic("hdfs-ddl"), f"g-{uuid.uuid4().hex[:8]}"
    confluent_create_topic(broker.bootstrap, topic, partitions=1)
    main = RawClient(broker.bootstrap, timeout_s=RECOVERY_S, client_id="outage")
    member = RawClient(broker.bootstrap, timeout_s=RECOVERY_S, client_id="member")
    try:
        assert _produce(main, topic, [b"before-%d" % i for i in range(100)], acks=-1) == 0  # below C
        member_id, generation = _joined_member(member, group, topic)

        def commit_once(offset: int) -> list[Any]:
            return commit(member, group, generation, member_id, [(topic, 0, offset, None)])

        assert commit_once(10) == [E.none]
        metadata = Repeating(broker.bootstrap, "metadata", 0.050, _metadata)
        beats = Repeating(broker.bootstrap, "heartbeat", 0.100,
                          lambda client: heartbeat(client, group, generation, member_id))
        reference_hdfs.stop_process()
        stopped = time.monotonic()
        try:
            metadata.start()
            beats.start()
            seen = _during(main, commit_once, topic, created)
            threading.Event().wait(max(CONTROL_OUTAGE_S - (time.monotonic() - stopped), 0))  # HDFS stays down
        finally:
            metadata.stop()
            beats.stop()
            reference_hdfs.restart()
        _check_outage(seen, metadata, beats)
        # HDFS is back: the commit and the creation, retried as clients retry them, go through
        back = time.monotonic()
        again = _until(lambda: commit_once(60), lambda codes: codes != [E.coordinator_not_available], REOPEN_S)
        print(f"after HDFS came back: OffsetCommit {again} after {time.monotonic() - back:.1f} s")
        assert again == [E.none], again
        assert offset_fetch(member, group, {topic: [0]}) == (E.none, [(topic, 0, 60, E.none)])
        recreated = _until(lambda: _create(main, created), lambda code: code != E.request_timed_out, RECOVERY_S)
        assert recreated in (E.none, E.topic_already_exists), E(recreated)
        assert _produce(main, created, [b"after"], acks=-1) == 0
        code, records = _fetch(main, created)
        assert code == 0 and b"after" in records
    finally:
        main.close()
        member.close()
