"""The transaction admin views through the dispatcher: ListTransactions with each filter,
DescribeTransactions of known, unknown and elsewhere-coordinated ids, DescribeProducers of
a partition with an idempotent producer and an open transaction, and of `__consumer_offsets`
partitions (coordinator shards)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from martlet.engine.api import NodeIdentity, TopicPartition
from tests.support.handler_transactions import add, end, init, marker, produce, settle, txn_batch

from .fake_cluster import LOCAL, NODE_2, ThreeNodes
from .harness import NOW_MS, Broker

ADD_OFFSETS_TO_TXN, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 25, 61, 65, 66


def listed(broker: Broker, version: int = 2, **filters) -> dict[str, tuple[int, str]]:
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, **filters}
    answer = broker.call(LIST_TRANSACTIONS, version, body)
    assert answer.error_code == ErrorCode.none
    return {t.transactional_id: (t.producer_id, t.transaction_state) for t in answer.transaction_states}


def described(broker: Broker, *tids: str):
    return broker.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(tids)}).transaction_states


def producers(broker: Broker, topic: str, *partitions: int):
    answer = broker.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": list(partitions)}]})
    return answer.topics[0].partitions


def two_transactions(broker: Broker) -> tuple[int, int]:
    """'open' has a transaction ongoing on t-0; 'done' committed one; the producer ids."""
    broker.create_topic("t", partitions=2)
    _, open_pid, open_epoch = init(broker, tid="open")
    assert add(broker, open_pid, open_epoch, {"t": [1, 0]}, tid="open") == {("t", 1): 0, ("t", 0): 0}
    _, done_pid, done_epoch = init(broker, tid="done")
    add(broker, done_pid, done_epoch, {"t": [1]}, tid="done")
    assert end(broker, done_pid, done_epoch, tid="done") == 0
    settle(broker)
    return open_pid, done_pid


def test_list_transactions_shows_every_id_with_kafkas_state_names(broker: Broker) -> None:
    open_pid, done_pid = two_transactions(broker)
    assert listed(broker) == {"open": (open_pid, "Ongoing"), "done": (done_pid, "CompleteCommit")}
    assert listed(broker, version=0) == listed(broker)


def test_list_transactions_filters_by_state_producer_and_pattern(broker: Broker) -> None:
    open_pid, done_pid = two_transactions(broker)
    assert set(listed(broker, state_filters=["Ongoing"])) == {"open"}
    assert set(listed(broker, producer_id_filters=[done_pid])) == {"done"}
    assert set(listed(broker, transactional_id_pattern="d.*")) == {"done"}
    assert set(listed(broker, transactional_id_pattern="on")) == set()  # the whole id must match
    answer = broker.call(LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Sleeping"], "producer_id_filters": [],
                                                "duration_filter": -1})
    assert list(answer.unknown_state_filters) == ["Sleeping"]
    assert [t.transactional_id for t in answer.transaction_states] == ["open"]


def test_list_transactions_by_duration_shows_only_those_started_longer_ago(broker: Broker) -> None:
    two_transactions(broker)
    assert set(listed(broker, duration_filter=1_000)) == set()
    async def later() -> None:  # timers the clock fires (flushes) run on the loop
        broker.engine.clock.advance(1_001)

    broker.loop.run_until_complete(later())
    # Kafka compares the start of the id's last transaction, whatever its state: the
    # committed one started as long ago as the open one.
    assert set(listed(broker, duration_filter=1_000)) == {"open", "done"}
    assert set(listed(broker, duration_filter=1_000, state_filters=["Ongoing"])) == {"open"}


def test_a_bad_pattern_is_invalid_regular_expression(broker: Broker) -> None:
    answer = broker.call(LIST_TRANSACTIONS, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                                "transactional_id_pattern": "(unclosed"})
    assert answer.error_code == ErrorCode.invalid_regular_expression


def test_describe_transactions_gives_state_partitions_and_times(broker: Broker) -> None:
    open_pid, _ = two_transactions(broker)
    ongoing, done, unknown = described(broker, "open", "done", "nobody")
    assert (ongoing.error_code, ongoing.transaction_state, ongoing.producer_id, ongoing.producer_epoch) == \
        (ErrorCode.none, "Ongoing", open_pid, 0)
    assert ongoing.transaction_timeout.total_seconds() == 60
    assert ongoing.transaction_start_time.timestamp() * 1000 == broker.engine.clock.now_ms()
    assert [(t.topic, list(t.partitions)) for t in ongoing.topics] == [("t", [0, 1])]
    assert (done.error_code, done.transaction_state, list(done.topics)) == (ErrorCode.none, "CompleteCommit", [])
    assert unknown.error_code == ErrorCode.transactional_id_not_found


def test_describe_transactions_lists_the_offsets_partition_of_each_group_in_the_transaction(broker: Broker) -> None:
    """As Kafka, whose AddOffsetsToTxn adds the group's __consumer_offsets partition."""
    broker.create_topic("t")
    _, pid, epoch = init(broker)
    add(broker, pid, epoch, {"t": [0]})
    for group in ("g1", "g2"):
        added = broker.call(ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                    "producer_epoch": epoch, "group_id": group})
        assert added.error_code == ErrorCode.none
    (ongoing,) = described(broker, "tx")
    shards = sorted({broker.engine.groups.shard_of("g1"), broker.engine.groups.shard_of("g2")})
    assert sorted((t.topic, list(t.partitions)) for t in ongoing.topics) == [("__consumer_offsets", shards),
                                                                             ("t", [0])]


def test_describe_producers_shows_sequences_timestamps_and_the_open_transaction(broker: Broker) -> None:
    broker.create_topic("t")
    assert produce(broker, txn_batch(7, 0, b"a", b"b")).error_code == ErrorCode.none
    assert produce(broker, txn_batch(9, 0, b"c", transactional=False), transactional_id=None).error_code == 0
    (partition,) = producers(broker, "t", 0)
    assert partition.error_code == ErrorCode.none
    states = {p.producer_id: p for p in partition.active_producers}
    assert (states[7].producer_epoch, states[7].last_sequence, states[7].last_timestamp,
            states[7].current_txn_start_offset, states[7].coordinator_epoch) == (0, 1, NOW_MS, 0, -1)
    assert (states[9].last_sequence, states[9].current_txn_start_offset) == (0, -1)
    marker(broker, 7, commit=True)
    (after,) = [p for p in producers(broker, "t", 0)[0].active_producers if p.producer_id == 7]
    assert (after.current_txn_start_offset, after.coordinator_epoch) == (-1, 0)


def test_describe_producers_of_a_missing_partition_is_unknown_topic_or_partition(broker: Broker) -> None:
    broker.create_topic("t")
    assert broker.engine.partitions.producers(TopicPartition("t", 0)) == []
    missing, present = producers(broker, "t", 3, 0)
    assert (missing.error_code, missing.error_message) == (ErrorCode.unknown_topic_or_partition, None)
    assert (present.error_code, list(present.active_producers)) == (ErrorCode.none, [])
    (unknown,) = producers(broker, "none", 0)  # Kafka 4.4 sends a text for a topic it lacks only
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.unknown_topic_or_partition,
                                                           "This server does not host this topic-partition.")



class ShardThreeElsewhere(ThreeNodes):
    def shard_owner(self, shard: int) -> NodeIdentity | None:
        return NODE_2 if shard == 3 else LOCAL

    def owns_shard(self, shard: int) -> bool:
        return shard != 3


def test_describe_producers_of_an_offsets_shard_is_empty_here_and_elsewhere_not_leader() -> None:
    # find-hanging --broker-id asks about every partition the broker leads, __consumer_offsets
    # included; UNKNOWN_TOPIC_OR_PARTITION there made the Admin client retry until it timed out.
    broker = Broker(cluster=ShardThreeElsewhere())
    try:
        count = broker.engine.groups.shard_count
        served, elsewhere, beyond = producers(broker, "__consumer_offsets", 0, 3, count)
    finally:
        broker.close()
    assert (served.error_code, list(served.active_producers)) == (ErrorCode.none, [])
    assert elsewhere.error_code == ErrorCode.not_leader_or_follower
    assert beyond.error_code == ErrorCode.unknown_topic_or_partition
