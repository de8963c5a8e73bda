"""Fetch: stored batches come back as stored, limits follow KIP-74, long polls end on data.

Apache Kafka cuts the data at the byte limit, so it may end in a torn batch that clients drop
(Kafka 4.4.0 answers 450 bytes for partition_max_bytes=450 over 200-byte batches); Martlet
sends whole batches only. Both are right, so these tests accept a torn tail within the limit.
"""

import asyncio
import time

from martlet.records.header import crc_ok, iter_batches
from tests.integration.raw_client import batch_of_size, decode_response, encode_request, record_batch
from tests.support.fetching import fetch, fetch_body

from .harness import FETCH, Broker

BATCH_BYTES = 200
UNKNOWN_LEADER_EPOCH = 75


def base_offsets(records: bytes | None, limit: int | None = None) -> list[int]:
    """Base offsets of the whole batches in `records`, each with a valid CRC. With `limit`:
    the data fits it, or is exactly one whole batch (the first-batch rule)."""
    data = records or b""
    found = list(iter_batches(data))
    assert all(crc_ok(data, pos, header) for pos, header in found)
    whole = sum(header.size for _, header in found)
    if limit is None:
        assert whole == len(data), "a torn batch without a limit"
    else:
        assert len(data) <= limit or (len(found) == 1 and whole == len(data)), (len(data), limit)
    return [header.base_offset for _, header in found]


def three_batches(broker: Broker, partitions: int = 1) -> None:
    broker.create_topic("t", partitions)
    for partition in range(partitions):
        for _ in range(3):
            broker.produce("t", partition, batch_of_size(BATCH_BYTES))


def test_returns_the_stored_batches(broker: Broker) -> None:
    broker.create_topic("t")
    sent = [record_batch([b"a", b"b"]), record_batch([b"c"])]
    for batch in sent:
        broker.produce("t", 0, batch)
    [got] = fetch(broker, [("t", 0, 0, 1 << 20)])
    assert (got.error_code, got.high_watermark, got.last_stable_offset, got.log_start_offset) == (0, 3, 3, 0)
    assert base_offsets(got.records) == [0, 2]
    second = got.records[len(sent[0]):]
    assert second[12:16] == b"\0\0\0\0"  # the leader epoch is the partition session
    assert second[16:] == sent[1][16:]  # the rest as sent, CRC included
    [inside] = fetch(broker, [("t", 0, 1, 1 << 20)])
    assert base_offsets(inside.records) == [0, 2]  # the batch holding offset 1 comes whole
    [at_end] = fetch(broker, [("t", 0, 3, 1 << 20)])
    assert (at_end.error_code, at_end.records or b"") == (0, b"")


def test_partition_max_bytes_takes_whole_batches_but_at_least_one(broker: Broker) -> None:
    three_batches(broker)
    limit = 2 * BATCH_BYTES + 50
    assert base_offsets(fetch(broker, [("t", 0, 0, limit)])[0].records, limit) == [0, 1]
    assert base_offsets(fetch(broker, [("t", 0, 0, 3 * BATCH_BYTES)])[0].records, 3 * BATCH_BYTES) == [0, 1, 2]
    assert base_offsets(fetch(broker, [("t", 0, 0, 1)])[0].records, 1) == [0]  # too small: still one batch
    assert base_offsets(fetch(broker, [("t", 0, 1, 0)])[0].records, 0) == [1]


def test_only_the_first_partition_with_data_may_exceed_its_limit(broker: Broker) -> None:
    three_batches(broker, partitions=2)
    first, second = fetch(broker, [("t", 0, 0, 1), ("t", 1, 0, 1)])
    assert base_offsets(first.records, 1) == [0]
    assert (second.error_code, base_offsets(second.records, 1)) == (0, [])
    empty, full = fetch(broker, [("t", 0, 3, 1), ("t", 1, 0, 1)])  # partition 0 has nothing at 3
    assert (base_offsets(empty.records, 1), base_offsets(full.records, 1)) == ([], [0])


def test_max_bytes_bounds_the_whole_answer(broker: Broker) -> None:
    three_batches(broker, partitions=2)
    limit = BATCH_BYTES + 50
    first, second = fetch(broker, [("t", 0, 0, 1 << 20), ("t", 1, 0, 1 << 20)], max_bytes=limit)
    assert base_offsets(first.records, limit) == [0]
    assert base_offsets(second.records, limit - len(first.records)) == []
    first, second = fetch(broker, [("t", 0, 0, 1 << 20), ("t", 1, 0, 1 << 20)], max_bytes=4 * BATCH_BYTES)
    assert (base_offsets(first.records), base_offsets(second.records)) == ([0, 1, 2], [0])
    [alone] = fetch(broker, [("t", 0, 0, 1 << 20)], max_bytes=1)
    assert base_offsets(alone.records, 1) == [0]


def test_errors_per_partition(broker: Broker) -> None:
    three_batches(broker)
    beyond, unknown_partition, unknown_topic = fetch(
        broker, [("t", 0, 4, 1000), ("t", 5, 0, 1000), ("ghost", 0, 0, 1000)])
    assert (beyond.error_code, beyond.high_watermark) == (1, -1)  # as Kafka: a refused read names no offsets
    assert unknown_partition.error_code == 3 and unknown_topic.error_code == 3


def test_a_leader_epoch_other_than_the_session_is_refused_before_reading(broker: Broker) -> None:
    """KIP-320: the epoch a consumer names is checked against the session S (0 on a fresh
    partition); a newer one is UNKNOWN_LEADER_EPOCH, answered with no offsets and no records."""
    three_batches(broker)
    body = fetch_body([("t", 0, 0, 1000)])
    for named, code in ((0, 0), (1, UNKNOWN_LEADER_EPOCH), (-1, 0)):
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = named
        [got] = [p for topic in broker.call(FETCH, 12, body).responses for p in topic.partitions]
        assert got.error_code == code, named
        if code:
            assert (got.high_watermark, got.records or b"", got.aborted_transactions) == (-1, b"", None)
        else:
            assert got.high_watermark == 3 and base_offsets(got.records)


def test_min_bytes_zero_answers_at_once(broker: Broker) -> None:
    broker.create_topic("t")
    started = time.monotonic()
    [got] = fetch(broker, [("t", 0, 0, 1000)], min_bytes=0, max_wait_ms=20_000)
    assert time.monotonic() - started < 2.0
    assert (got.error_code, got.records or b"") == (0, b"")


def test_available_data_answers_at_once(broker: Broker) -> None:
    three_batches(broker)
    started = time.monotonic()
    [got] = fetch(broker, [("t", 0, 0, 1000)], min_bytes=1, max_wait_ms=20_000)
    assert time.monotonic() - started < 2.0
    assert base_offsets(got.records) == [0, 1, 2]


def test_wait_is_capped_by_fetch_wait_ms_max() -> None:
    broker = Broker(fetch_wait_ms_max=50)
    try:
        broker.create_topic("t")
        started = time.monotonic()
        [got] = fetch(broker, [("t", 0, 0, 1000)], min_bytes=1, max_wait_ms=20_000)
        assert time.monotonic() - started < 2.0
        assert (got.error_code, got.records or b"") == (0, b"")
    finally:
        broker.close()


def test_long_poll_ends_when_data_arrives(broker: Broker) -> None:
    broker.create_topic("t")
    request = encode_request(broker.request(FETCH, 12, fetch_body([("t", 0, 0, 1000)], min_bytes=1,
                                                                  max_wait_ms=20_000)), 3)

    async def scenario() -> tuple[bytes | None, float]:
        started = time.monotonic()
        polling = asyncio.create_task(broker.dispatcher.handle(request[4:]))
        await asyncio.sleep(0)  # let the fetch find nothing and start waiting
        assert not polling.done()
        arrived = broker.dispatcher.handle(encode_request(broker.request(0, 9, {
            "acks": 1, "timeout": 1000, "topic_data": [{"name": "t", "partition_data": [
                {"index": 0, "records": record_batch([b"wake"])}]}]}), 4)[4:])
        assert await arrived is not None
        answer = await asyncio.wait_for(polling, 5.0)
        return None if answer is None else b"".join(answer), time.monotonic() - started

    answer, elapsed = broker.loop.run_until_complete(scenario())
    assert answer is not None and elapsed < 5.0
    _, body = decode_response(answer[4:], FETCH, 12)
    assert base_offsets(body.responses[0].partitions[0].records) == [0]
