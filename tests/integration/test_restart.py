"""Martlet keeps what it acknowledged across graceful restarts and kill -9, an idempotent
producer leaves no duplicates across either, a consumer group keeps its members across a
restart, and a second broker cannot open a data dir in use."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import TopicPartition

from tests.integration.clients import (
    FLUSH_TIMEOUT_S,
    PARTITIONS,
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
from tests.support.durability import check_acknowledged, consume_all, wait_acked

pytestmark = pytest.mark.integration

BEFORE_RESTART = 5_000  # acknowledged records to wait for before each restart
SECOND_SERVE_TIMEOUT_S = 30.0


def test_graceful_restart_keeps_everything(martlet_process) -> None:
    broker = martlet_process()
    topic = unique_topic("restart")
    confluent_create_topic(broker.bootstrap, topic)
    first = make_records(6_000)
    acks = confluent_produce(broker.bootstrap, topic, first, **{"enable.idempotence": True})

    port = broker.port
    assert broker.stop() == 0, broker.log_tail()
    broker.start(port)

    consumer = confluent_consumer(broker.bootstrap)
    try:
        assert confluent_wait_partitions(consumer, topic, PARTITIONS) == PARTITIONS
        assert topic in consumer.list_topics(timeout=10).topics
        got = confluent_consume(consumer, topic, len(first))
    finally:
        consumer.close()
    check_round_trip(first, acks, got)

    # The log carries on after the restart: new records follow densely.
    second = make_records(3_000, codecs=("none", "zstd"), base_ts_ms=first[-1].timestamp_ms + 1000)
    more = confluent_produce(broker.bootstrap, topic, second, **{"enable.idempotence": True})
    ends, log = consume_all(broker.bootstrap, topic)
    assert sum(ends.values()) == len(first) + len(second)
    for seq, (partition, offset) in more.items():
        assert log[partition][offset].value == second[seq].value
        assert offset >= sum(1 for p, _ in acks.values() if p == partition)


def test_kill_9_under_acks_all_load_loses_nothing_acknowledged(martlet_process) -> None:
    broker = martlet_process()
    topic = unique_topic("kill9")
    confluent_create_topic(broker.bootstrap, topic)
    producer = ContinuousProducer(broker.bootstrap, topic, {
        "acks": "all",
        "enable.idempotence": False,
        # keeps produce order across the restart's retries: a lost connection fails the
        # queued request with the one in flight (an error answer would not, test_hdfs_store)
        "max.in.flight.requests.per.connection": 1,
        "linger.ms": 5,
        "batch.size": 64 * 1024,
        "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
    })
    producer.start()
    try:
        wait_acked(producer, BEFORE_RESTART)
        broker.restart(hard=True)
        wait_acked(producer, producer.acked_count() + BEFORE_RESTART)
    finally:
        producer.stop()
    _, log = consume_all(broker.bootstrap, topic)
    check_acknowledged(producer, log)


def test_idempotent_producer_across_restarts_has_no_duplicates_or_gaps(martlet_process) -> None:
    broker = martlet_process()
    topic = unique_topic("idempotent")
    confluent_create_topic(broker.bootstrap, topic)
    producer = ContinuousProducer(broker.bootstrap, topic, {
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 64 * 1024,
        "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
    })
    producer.start()
    try:
        wait_acked(producer, BEFORE_RESTART)
        broker.restart()
        wait_acked(producer, producer.acked_count() + BEFORE_RESTART)
        broker.restart(hard=True)
        wait_acked(producer, producer.acked_count() + BEFORE_RESTART)
    finally:
        producer.stop()
    assert producer.unflushed == 0, f"{producer.unflushed} records undelivered after flush"
    assert not producer.failed, f"{len(producer.failed)} deliveries failed, first {producer.failed[:5]}"
    assert not [e for e in producer.client_errors if e.startswith("FATAL")], producer.client_errors
    _, log = consume_all(broker.bootstrap, topic)
    check_acknowledged(producer, log)
    seqs = [producer.seq_of(g.value) for records in log.values() for g in records]
    duplicates = len(seqs) - len(set(seqs))
    assert duplicates == 0, f"{duplicates} duplicate records in the log"
    assert sorted(seqs) == list(range(producer.sent)), (
        f"log holds {len(seqs)} distinct records; {producer.sent} were produced and acknowledged")


def test_second_serve_on_the_same_data_dir_refuses(martlet_process) -> None:
    broker = martlet_process()
    args = [sys.executable, "-m", "martlet.cli", "serve", "--listen", "127.0.0.1:0",
            "--data-dir", str(broker.data_dir)]
    try:
        second = subprocess.run(args, capture_output=True, timeout=SECOND_SERVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a second serve on {broker.data_dir} was still running after {SECOND_SERVE_TIMEOUT_S}s; "
                    f"stdout {exc.stdout!r}")
    message = second.stderr.decode(errors="replace")
    assert second.returncode != 0, f"second serve exited 0; stdout {second.stdout!r} stderr {message}"
    assert "lock" in message.lower(), message
    assert str(broker.data_dir) in message or os.path.realpath(broker.data_dir) in message, message
    assert "Traceback" not in message, message

    assert broker.proc is not None and broker.proc.poll() is None, broker.log_tail()
    topic = unique_topic("still-serving")
    confluent_create_topic(broker.bootstrap, topic)
    records = make_records(100, codecs=("none",))
    acks = confluent_produce(broker.bootstrap, topic, records, **{"enable.idempotence": True})
    consumer = confluent_consumer(broker.bootstrap)
    try:
        got = confluent_consume(consumer, topic, len(records))
    finally:
        consumer.close()
    check_round_trip(records, acks, got)


GROUP_JOIN_TIMEOUT_S = 60.0


def test_a_consumer_group_member_survives_a_restart_without_rebalancing(martlet_process) -> None:
    """Group membership is replayed: after a graceful restart the member's commit (which
    names its member id and generation) is accepted, and it is never revoked or reassigned."""
    broker = martlet_process()
    topic = unique_topic("member")
    confluent_create_topic(broker.bootstrap, topic)
    assignments: list[int] = []
    revocations: list[int] = []
    consumer = confluent_consumer(broker.bootstrap, **{"group.id": unique_topic("group"),
                                                       "partition.assignment.strategy": "range"})
    try:
        consumer.subscribe([topic], on_assign=lambda _c, tps: assignments.append(len(tps)),
                           on_revoke=lambda _c, tps: revocations.append(len(tps)))
        deadline = time.monotonic() + GROUP_JOIN_TIMEOUT_S
        while not assignments and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert assignments == [PARTITIONS], "the consumer never got its partitions"
        member_id = consumer.memberid()

        broker.restart()
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # raises on UNKNOWN_MEMBER_ID
        consumer.poll(0.5)
        assert consumer.memberid() == member_id
        assert (assignments, revocations) == ([PARTITIONS], [])
    finally:
        consumer.close()
