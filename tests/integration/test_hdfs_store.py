"""Martlet on a real HDFS (`martlet serve --store hdfs://...`): the round trip, kill -9 under
acks=all load, and HDFS stopped for 60 s under acks=1 and acks=all load."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

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
from tests.integration.test_restart import _check_acknowledged, _consume_all, _wait_acked

pytestmark = pytest.mark.integration

OUTAGE_S = 60.0  # how long HDFS stays down: the scenario under test, not a wait for anything
MEMORY_BYTES = 8 << 20  # a small budget, so that the outage fills it
RECOVERY_S = 120.0


def store_args(hdfs) -> list[str]:
    return ["--store", f"{hdfs.url}/martlet-{uuid.uuid4().hex[:8]}"]


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
        _wait_acked(producer, 3_000)
        # the sticky partitioner may leave a partition empty: watch one that has records
        watched = Counter(partition for partition, _, _ in producer.acked).most_common(1)[0][0]
        before = max(offset for partition, offset, _ in producer.acked if partition == watched)
        broker.restart(hard=True)
        _wait_acked(producer, producer.acked_count() + 3_000)
    finally:
        producer.stop()
    ends, log = _consume_all(broker.bootstrap, topic)
    _check_acknowledged(producer, log)
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
        _wait_acked(fast, 20_000)
        _wait_acked(durable, 500)
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
        _wait_acked(fast, after[0] + 20_000)
        _wait_acked(durable, after[1] + 500)
    finally:
        fast.stop(timeout_s=RECOVERY_S)
        durable.stop(timeout_s=RECOVERY_S)
    assert not fast.failed and not durable.failed, (fast.failed[:3], durable.failed[:3])
    assert fast.unflushed == 0 and durable.unflushed == 0
    _, log = _consume_all(broker.bootstrap, topic)
    _check_acknowledged(fast, log)
    _check_acknowledged(durable, log)
    values = Counter(got.value for records in log.values() for got in records)
    duplicated = [value for value, count in values.items() if count > 1]
    assert not duplicated, f"{len(duplicated)} values stored twice, e.g. {duplicated[:3]}"
    assert len(values) == fast.sent + durable.sent, "records sent but not stored"
