"""Kafka transactions through a real client (confluent-kafka / librdkafka) against `martlet
serve`: commit and abort as read_committed and read_uncommitted readers see them, fencing of
a producer whose transactional id was taken over, offsets committed in a transaction
(consume-transform-produce), Flink's one-hour timeout, and a transaction left open by a
kill -9 aborted at its timeout after the restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.fixtures.martlet import MartletProcess
from tests.support.transactions import TIMEOUT_S, commit_abort_commit, create_topic, producer, read_all


def transaction(made: Producer, topic: str, values: list[str], commit: bool = True, partition: int = 0) -> None:
    made.begin_transaction()
    for value in values:
        made.produce(topic, value=value.encode(), partition=partition)
    if commit:
        made.commit_transaction(TIMEOUT_S)
    else:
        made.flush(TIMEOUT_S)  # an abort purges what was not sent yet: send it, so readers have aborted data to skip
        made.abort_transaction(TIMEOUT_S)


def test_read_committed_sees_committed_transactions_only(martlet: MartletProcess) -> None:
    topic = create_topic(martlet.bootstrap)
    made = producer(martlet.bootstrap, f"tid-{topic}")
    transaction(made, topic, ["c1", "c2"], partition=0)
    transaction(made, topic, ["a1", "a2", "a3"], commit=False, partition=0)
    transaction(made, topic, ["c3"], partition=1)
    transaction(made, topic, ["a4"], commit=False, partition=1)
    transaction(made, topic, ["c4"], partition=0)
    assert sorted(read_all(martlet.bootstrap, topic, "read_committed")) == ["c1", "c2", "c3", "c4"]
    assert sorted(read_all(martlet.bootstrap, topic, "read_uncommitted")) == [
        "a1", "a2", "a3", "a4", "c1", "c2", "c3", "c4"]


def test_an_open_transaction_holds_read_committed_readers_back_until_it_commits(martlet: MartletProcess) -> None:
    topic = create_topic(martlet.bootstrap, partitions=1)
    made = producer(martlet.bootstrap, f"tid-{topic}")
    transaction(made, topic, ["before"])
    made.begin_transaction()
    made.produce(topic, value=b"open", partition=0)
    made.flush(TIMEOUT_S)
    assert read_all(martlet.bootstrap, topic, "read_committed", partitions=1) == ["before"]
    assert read_all(martlet.bootstrap, topic, "read_uncommitted", partitions=1) == ["before", "open"]
    made.commit_transaction(TIMEOUT_S)
    assert read_all(martlet.bootstrap, topic, "read_committed", partitions=1) == ["before", "open"]


def test_a_second_producer_with_the_same_id_fences_the_first(martlet: MartletProcess) -> None:
    topic = create_topic(martlet.bootstrap, partitions=1)
    first = producer(martlet.bootstrap, f"tid-{topic}")
    first.begin_transaction()
    first.produce(topic, value=b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = producer(martlet.bootstrap, f"tid-{topic}")  # aborts the first's open transaction
    transaction(second, topic, ["live"])
    with pytest.raises(KafkaException) as raised:
        first.produce(topic, value=b"late", partition=0)
        first.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal() or raised.value.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), raised.value
    assert read_all(martlet.bootstrap, topic, "read_committed", partitions=1) == ["live"]


def test_offsets_sent_in_a_transaction_count_only_if_it_commits(martlet: MartletProcess) -> None:
    source, sink = create_topic(martlet.bootstrap, partitions=1), create_topic(martlet.bootstrap, partitions=1)
    group = f"g-{source}"
    made = producer(martlet.bootstrap, f"tid-{source}")
    consumer = Consumer({"bootstrap.servers": martlet.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offset, commit in ((5, False), (7, True)):
            made.begin_transaction()
            made.produce(sink, value=f"out-{offset}".encode(), partition=0)
            made.send_offsets_to_transaction([TopicPartition(source, 0, offset)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
            made.commit_transaction(TIMEOUT_S) if commit else made.abort_transaction(TIMEOUT_S)
            committed = consumer.committed([TopicPartition(source, 0)], TIMEOUT_S)[0].offset
            assert committed == (7 if commit else -1001), (offset, commit, committed)
    finally:
        consumer.close()
    assert read_all(martlet.bootstrap, sink, "read_committed", partitions=1) == ["out-7"]


def test_flinks_one_hour_transaction_timeout_is_accepted(martlet: MartletProcess) -> None:
    topic = create_topic(martlet.bootstrap, partitions=1)
    made = producer(martlet.bootstrap, f"tid-{topic}", timeout_ms=3_600_000)
    transaction(made, topic, ["flink"])
    assert read_all(martlet.bootstrap, topic, "read_committed", partitions=1) == ["flink"]


def test_a_transaction_open_at_a_kill_9_is_aborted_at_its_timeout(martlet_process: Callable[..., MartletProcess],
                                                                  tmp_path: Any) -> None:
    process = martlet_process()
    topic = create_topic(process.bootstrap, partitions=1)
    made = producer(process.bootstrap, "tid-killed", timeout_ms=3_000)
    transaction(made, topic, ["kept"])
    made.begin_transaction()
    made.produce(topic, value=b"lost", partition=0)
    made.flush(TIMEOUT_S)
    # The open transaction's batch is persisted (acks=all) before the kill.
    process.restart(hard=True)
    # After the restart the coordinator finds the transaction ongoing and aborts it at its
    # timeout; until then read_committed readers stop before it.
    assert read_all(process.bootstrap, topic, "read_committed", partitions=1) == ["kept"]
    assert read_all(process.bootstrap, topic, "read_uncommitted", partitions=1) == ["kept", "lost"]
    again = producer(process.bootstrap, "tid-killed")  # the id is known: a bumped epoch, not a new id
    transaction(again, topic, ["after"])
    assert read_all(process.bootstrap, topic, "read_committed", partitions=1) == ["kept", "after"]


def test_a_transaction_across_the_brokers_of_a_cluster(local_cluster: Any) -> None:
    """Partitions and the group's coordinator shard on other brokers than the transaction's
    coordinator: its markers travel as WriteTxnMarkers, and read_committed sees the outcome."""
    from martlet.compat.bench.failover import all_led, wait_for

    cluster = local_cluster(brokers=2, admins=1)
    topic = create_topic(cluster.bootstrap, partitions=6)
    wait_for(lambda: all_led(cluster.bootstrap, topic), 60, "every partition to have a leader")
    assert commit_abort_commit(cluster.bootstrap, topic, 6) == 3
    wanted = sorted(f"{r}-{p}" for r in (0, 2) for p in range(6))
    # commit_transaction returns once the outcome is decided: the markers, and with them the
    # last stable offset, follow on each broker
    wait_for(lambda: sorted(read_all(cluster.bootstrap, topic, "read_committed", partitions=6)) == wanted, 60,
             "the committed transactions' records, marked on both brokers")
