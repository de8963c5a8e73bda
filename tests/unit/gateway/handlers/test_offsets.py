"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords."""

from .harness import DELETE_RECORDS, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, Broker

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
T = 1_700_000_000_000


def filled(broker: Broker) -> Broker:
    """Topic "t": offsets 0-2 stamped T+100, T+300, T+200; offsets 3-4 stamped T+500, T+400."""
    broker.create_topic("t")
    assert broker.append("t", 0, [b"a", b"b", b"c"], [T + 100, T + 300, T + 200]) == 0
    assert broker.append("t", 0, [b"d", b"e"], [T + 500, T + 400]) == 3
    return broker


def offset_at(broker: Broker, timestamp: int) -> tuple[int, int]:
    answer = broker.list_offset("t", 0, timestamp)
    assert answer.error_code == 0
    return answer.timestamp, answer.offset


def test_earliest_latest_and_max_timestamp(broker: Broker) -> None:
    filled(broker)
    assert offset_at(broker, EARLIEST) == (-1, 0)
    assert offset_at(broker, LATEST) == (-1, 5)
    assert offset_at(broker, MAX_TIMESTAMP) == (T + 500, 3)
    assert broker.list_offset("t", 0, LATEST).leader_epoch == 0


def test_empty_partition(broker: Broker) -> None:
    broker.create_topic("t")
    assert offset_at(broker, EARLIEST) == (-1, 0)
    assert offset_at(broker, LATEST) == (-1, 0)
    assert offset_at(broker, MAX_TIMESTAMP) == (-1, -1)
    assert offset_at(broker, T) == (-1, -1)


def test_by_time_finds_the_first_offset_at_or_after(broker: Broker) -> None:
    filled(broker)
    assert offset_at(broker, 0) == (T + 100, 0)
    assert offset_at(broker, T + 100) == (T + 100, 0)
    assert offset_at(broker, T + 150) == (T + 300, 1)  # offset order, not the closest timestamp
    assert offset_at(broker, T + 301) == (T + 500, 3)
    assert offset_at(broker, T + 450) == (T + 500, 3)
    assert offset_at(broker, T + 501) == (-1, -1)


def test_unknown_partition_and_leader_epochs(broker: Broker) -> None:
    filled(broker)
    assert broker.list_offset("t", 1, LATEST).error_code == 3
    assert broker.list_offset("ghost", 0, LATEST).error_code == 3
    answers = [broker.call(LIST_OFFSETS, 7, {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": LATEST, "current_leader_epoch": epoch}]}]}).topics[0].partitions[0]
        for epoch in (0, 7)]
    assert [(p.error_code, p.offset) for p in answers] == [(0, 5), (75, -1)]  # 75: UNKNOWN_LEADER_EPOCH
    twice = {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": LATEST, "current_leader_epoch": -1}] * 2}]}
    assert [(p.partition_index, p.error_code) for p in broker.call(LIST_OFFSETS, 7, twice).topics[0].partitions] == [
        (0, 42)]  # as Kafka: a partition asked twice is answered once, INVALID_REQUEST


def epoch_end(broker: Broker, partition: int, leader_epoch: int, current: int = -1) -> tuple[int, int, int]:
    body = {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": leader_epoch}]}]}
    result = broker.call(OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]
    return result.error_code, result.leader_epoch, result.end_offset


def test_offset_for_leader_epoch_of_the_current_session(broker: Broker) -> None:
    filled(broker)
    assert epoch_end(broker, 0, 0) == (0, 0, 5)
    assert epoch_end(broker, 0, 0, current=0) == (0, 0, 5)
    assert epoch_end(broker, 0, 0, current=3) == (75, -1, -1)
    assert epoch_end(broker, 1, 0)[0] == 3
    broker.append("t", 0, [b"f"])
    assert epoch_end(broker, 0, 0) == (0, 0, 6)


def delete_before(broker: Broker, offset: int, partition: int = 0) -> tuple[int, int]:
    body = {"topics": [{"name": "t", "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout": 1000}
    result = broker.call(DELETE_RECORDS, 2, body).topics[0].partitions[0]
    return result.error_code, result.low_watermark


def test_delete_records_moves_the_low_watermark(broker: Broker) -> None:
    filled(broker)
    assert delete_before(broker, 2) == (0, 2)
    assert offset_at(broker, EARLIEST) == (-1, 2)
    assert offset_at(broker, 0) == (T + 200, 2)  # deleted records are not found by time
    assert delete_before(broker, 1) == (0, 2)  # never moves back
    assert delete_before(broker, 6) == (1, -1)  # beyond the high watermark: OFFSET_OUT_OF_RANGE
    assert delete_before(broker, 0, partition=4) == (3, -1)


def test_delete_records_minus_one_means_the_high_watermark(broker: Broker) -> None:
    filled(broker)
    assert delete_before(broker, -1) == (0, 5)
    assert offset_at(broker, EARLIEST) == (-1, 5)
    assert offset_at(broker, LATEST) == (-1, 5)
    assert broker.append("t", 0, [b"after"]) == 5
