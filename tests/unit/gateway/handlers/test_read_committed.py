"""The reader side of transactions at the gateway: Produce takes transactional batches, Fetch
with isolation_level 1 (read_committed) stops at the last stable offset and lists the aborted
transactions, ListOffsets answers the last stable offset for read_committed."""

import pytest
from kio.schema.errors import ErrorCode

from martlet.records.build import NewRecord, build_batch, build_control_batch
from martlet.records.control import ControlType
from martlet.records.header import iter_batches
from tests.support.fetching import fetch_body
from tests.support.handler_transactions import TP, marker, produce, txn_batch

from .harness import FETCH, LIST_OFFSETS, NOW_MS, Broker

LATEST = -1


def plain_batch(*values: bytes) -> bytes:
    return bytes(build_batch([NewRecord(None, value, NOW_MS) for value in values]))


def fetched(broker: Broker, offset: int = 0, isolation_level: int = 1, version: int = 12):
    body = fetch_body([("t", 0, offset, 1 << 20)])
    body["isolation_level"] = isolation_level
    answer = broker.call(FETCH, version, body)
    return answer.responses[0].partitions[0]


def offsets(records: bytes | None) -> list[int]:
    return [header.base_offset for _, header in iter_batches(records or b"")]


def list_offset(broker: Broker, timestamp: int, isolation_level: int) -> tuple[int, int]:
    body = {"replica_id": -1, "isolation_level": isolation_level, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}]}]}
    answer = broker.call(LIST_OFFSETS, 7, body).topics[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    return answer.timestamp, answer.offset


def aborted(partition) -> list[tuple[int, int]] | None:
    if partition.aborted_transactions is None:
        return None
    return [(entry.producer_id, entry.first_offset) for entry in partition.aborted_transactions]


def test_transactional_batches_are_taken_and_control_batches_refused(broker: Broker) -> None:
    broker.create_topic("t")
    assert produce(broker, txn_batch(7, 0, b"a", b"b")).error_code == ErrorCode.none
    assert produce(broker, txn_batch(7, 2, b"c"), version=3).error_code == ErrorCode.none
    control = bytes(build_control_batch(7, 0, ControlType.COMMIT, 0, NOW_MS))
    refused = produce(broker, control)
    assert refused.error_code == ErrorCode.invalid_record
    outside = produce(broker, txn_batch(7, 3, b"d", transactional=False))
    assert outside.error_code == ErrorCode.invalid_txn_state  # its transaction is open: Kafka's answer
    marker(broker, 7, commit=True)
    assert produce(broker, txn_batch(7, 3, b"d", transactional=False)).error_code == ErrorCode.none


def test_read_committed_stops_at_the_open_transaction_and_lists_aborted_ones(broker: Broker) -> None:
    broker.create_topic("t")
    produce(broker, plain_batch(b"p0"))  # 0
    produce(broker, txn_batch(7, 0, b"a0", b"a1"))  # 1-2, aborted below
    produce(broker, txn_batch(8, 0, b"o0"))  # 3, stays open
    produce(broker, txn_batch(7, 2, b"a2"))  # 4
    marker(broker, 7, commit=False)  # 5
    produce(broker, plain_batch(b"p1"))  # 6

    committed = fetched(broker)
    assert (committed.high_watermark, committed.last_stable_offset) == (7, 3)
    assert offsets(committed.records) == [0, 1]
    assert aborted(committed) == [(7, 1)]

    uncommitted = fetched(broker, isolation_level=0)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (7, 3)
    assert offsets(uncommitted.records) == [0, 1, 3, 4, 5, 6]
    assert aborted(uncommitted) is None  # as Kafka: the list is for read_committed only

    assert fetched(broker, offset=3).records in (b"", None)  # at the LSO: nothing yet
    marker(broker, 8, commit=True)  # 7
    later = fetched(broker, offset=3)
    assert later.last_stable_offset == 8
    assert offsets(later.records) == [3, 4, 5, 6, 7]
    assert aborted(later) == [(7, 1)]  # 4 belongs to 7's aborted transaction
    assert aborted(fetched(broker, offset=6)) == []


def test_fetch_by_topic_id_answers_the_same(broker: Broker) -> None:
    broker.create_topic("t")
    produce(broker, txn_batch(7, 0, b"a"))
    marker(broker, 7, commit=False)
    produce(broker, txn_batch(9, 0, b"b"))
    topic_id = broker.engine.topics.find("t").resource.uid
    body = fetch_body([("t", 0, 0, 1 << 20)])
    body["isolation_level"] = 1
    body["topics"][0]["topic_id"] = topic_id
    partition = broker.call(FETCH, 18, body).responses[0].partitions[0]
    assert partition.last_stable_offset == 2
    assert offsets(partition.records) == [0, 1]
    assert aborted(partition) == [(7, 0)]


def test_list_offsets_answers_the_last_stable_offset_for_read_committed(broker: Broker) -> None:
    broker.create_topic("t")
    produce(broker, plain_batch(b"p0"))  # 0
    produce(broker, txn_batch(7, 0, b"a"))  # 1, open
    produce(broker, plain_batch(b"p1"))  # 2
    assert list_offset(broker, LATEST, isolation_level=0) == (-1, 3)
    assert list_offset(broker, LATEST, isolation_level=1) == (-1, 1)
    assert list_offset(broker, -2, isolation_level=1) == (-1, 0)  # earliest is never bounded
    assert list_offset(broker, NOW_MS, isolation_level=1) == (NOW_MS, 0)
    assert list_offset(broker, NOW_MS + 1, isolation_level=1) == (-1, -1)
    marker(broker, 7, commit=True)
    assert list_offset(broker, LATEST, isolation_level=1) == (-1, 4)


@pytest.mark.parametrize(("version", "code", "message"), [
    (9, ErrorCode.invalid_txn_state, "Partition was not added to the transaction"),
    (11, ErrorCode.transaction_abortable, None),
    (12, ErrorCode.transaction_abortable, None),
])
def test_a_transactional_batch_for_a_partition_outside_the_transaction_is_refused(
        broker: Broker, version: int, code: ErrorCode, message: str | None) -> None:
    """KIP-890 part 1, with the reference Kafka 4.4's answers per Produce version."""
    broker.create_topic("t")
    machine = broker.engine.transactions.coordinator
    machine.init_producer_id("tx-7", 60_000, NOW_MS, fresh_id=7)  # ongoing nowhere yet
    refused = produce(broker, txn_batch(7, 0, b"late"), transactional_id="tx-7", version=version)
    assert (refused.error_code, refused.error_message) == (code, message)
    assert list_offset(broker, LATEST, isolation_level=1) == list_offset(broker, LATEST, isolation_level=0)
    machine.add_partitions("tx-7", 7, 0, [TP], NOW_MS)
    assert produce(broker, txn_batch(7, 0, b"in"), transactional_id="tx-7", version=version).error_code == 0


def test_a_late_write_after_the_transaction_ended_cannot_open_a_hanging_one(broker: Broker) -> None:
    broker.create_topic("t")
    assert produce(broker, txn_batch(7, 0, b"a")).error_code == ErrorCode.none
    machine = broker.engine.transactions.coordinator
    machine.end_txn("tx-7", 7, 0, False, NOW_MS)  # aborted; its marker lands below
    machine.markers_written("tx-7", 0, NOW_MS)
    marker(broker, 7, commit=False)
    late = produce(broker, txn_batch(7, 1, b"retried"), transactional_id="tx-7")
    assert late.error_code == ErrorCode.invalid_txn_state
    high, stable = list_offset(broker, LATEST, isolation_level=0), list_offset(broker, LATEST, isolation_level=1)
    assert high == stable  # nothing left open


def test_a_fenced_producers_first_transactional_batch_is_refused(broker: Broker) -> None:
    broker.create_topic("t")
    machine = broker.engine.transactions.coordinator
    machine.init_producer_id("tx-7", 60_000, NOW_MS, fresh_id=7)
    assert machine.init_producer_id("tx-7", 60_000, NOW_MS, fresh_id=-1).epoch == 1  # a newer instance
    refused = produce(broker, txn_batch(7, 0, b"zombie"), transactional_id="tx-7")
    assert refused.error_code == ErrorCode.invalid_producer_epoch
