"""fetching.decode_fetched: whole batches only, records below the offset asked dropped,
control batches skipped, aborted transactions dropped as a read_committed Kafka consumer does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from martlet.client.errors import MartletError
from martlet.client.fetching import TopicPartition, decode_fetched
from martlet.records.build import NewRecord, Producer, build_batch, build_control_batch
from martlet.records.control import ControlType

TP = TopicPartition("t", 3)
TXN_A, TXN_B = Producer(7, 0, 0), Producer(8, 0, 0)


def batch(base: int, values: list[bytes], producer: Producer | None = None) -> bytes:
    records = [NewRecord(b"k", v, 1000 + base + i, (("h", v),)) for i, v in enumerate(values)]
    if producer is None:
        return bytes(build_batch(records, base_offset=base))
    return bytes(build_batch(records, producer=producer, transactional=True, base_offset=base))


def marker(base: int, producer: Producer, kind: ControlType) -> bytes:
    return bytes(build_control_batch(producer.producer_id, producer.producer_epoch, kind, 0, 5000, base_offset=base))


def aborted(*pairs: tuple[int, int]) -> list[SimpleNamespace]:
    return [SimpleNamespace(producer_id=pid, first_offset=first) for pid, first in pairs]


def values(messages) -> list[bytes]:
    return [m.value for m in messages]


def test_whole_batches_from_the_offset_asked():
    data = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d"])
    messages, next_offset = decode_fetched(TP, 1, data, None)
    assert values(messages) == [b"b", b"c", b"d"]
    assert next_offset == 4
    first = messages[0]
    assert (first.topic, first.partition, first.offset, first.key, first.timestamp, first.headers) == \
        ("t", 3, 1, b"k", 1001, (("h", b"b"),))


@pytest.mark.parametrize("cut", [1, 12, 61, 70])
def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch(cut):
    second = batch(2, [b"c", b"d"])
    messages, next_offset = decode_fetched(TP, 0, batch(0, [b"a", b"b"]) + second[:cut], None)
    assert values(messages) == [b"a", b"b"]
    assert next_offset == 2


def test_nothing_whole_keeps_the_offset():
    assert decode_fetched(TP, 5, batch(5, [b"x"])[:40], None) == ([], 5)
    assert decode_fetched(TP, 5, None, None) == ([], 5)


def test_aborted_transaction_dropped_committed_kept_markers_skipped():
    data = (batch(0, [b"plain"]) + batch(1, [b"a1", b"a2"], TXN_A) + batch(3, [b"b1"], TXN_B)
            + marker(4, TXN_A, ControlType.ABORT) + marker(5, TXN_B, ControlType.COMMIT)
            + batch(6, [b"a3"], TXN_A) + batch(7, [b"plain2"]))
    messages, next_offset = decode_fetched(TP, 0, data, aborted((TXN_A.producer_id, 1)))
    assert values(messages) == [b"plain", b"b1", b"a3", b"plain2"]  # A's later transaction was not aborted
    assert next_offset == 8


def test_without_the_aborted_list_every_data_record_is_read():
    data = batch(0, [b"a1"], TXN_A) + marker(1, TXN_A, ControlType.ABORT)
    messages, next_offset = decode_fetched(TP, 0, data, None)
    assert values(messages) == [b"a1"]
    assert next_offset == 2


def test_only_control_batches_move_the_position():
    messages, next_offset = decode_fetched(TP, 4, marker(4, TXN_B, ControlType.COMMIT), aborted())
    assert messages == [] and next_offset == 5


def test_a_corrupt_batch_is_an_error():
    data = bytearray(batch(0, [b"abc"]))
    data[-1] ^= 0xFF
    with pytest.raises(MartletError, match="CRC"):
        decode_fetched(TP, 0, bytes(data), None)
