"""What a broker acknowledged is there: reading a topic back whole, checking every acknowledged
record at its offset, waiting for acknowledgements; a broker's store on the reference HDFS; and
a latency's 99th percentile."""

from __future__ import annotations

import uuid

from tests.integration.clients import (
    PARTITIONS,
    ContinuousProducer,
    Got,
    confluent_consume,
    confluent_consumer,
    confluent_high_watermarks,
)

ACK_WAIT_S = 60.0


def consume_all(bootstrap: str, topic: str) -> tuple[dict[int, int], dict[int, list[Got]]]:
    """High watermarks and every record of every partition (offset order)."""
    consumer = confluent_consumer(bootstrap)
    try:
        ends = confluent_high_watermarks(consumer, topic)
        got = confluent_consume(consumer, topic, sum(ends.values()))
    finally:
        consumer.close()
    log: dict[int, list[Got]] = {p: [] for p in range(PARTITIONS)}
    for g in got:
        log[g.partition].append(g)
    for partition, records in log.items():
        records.sort(key=lambda g: g.offset)
        offsets = [g.offset for g in records]
        assert offsets == list(range(ends[partition])), (
            f"partition {partition}: read {len(offsets)} records up to the high watermark "
            f"{ends[partition]}; offsets not dense from 0 (first {offsets[:3]}, last {offsets[-3:]})")
    return ends, log


def check_acknowledged(producer: ContinuousProducer, log: dict[int, list[Got]], ordered: bool = True) -> None:
    """Every acknowledged record is at its acknowledged offset, and (if `ordered`) per
    partition the acknowledged records are in produce order."""
    at: dict[tuple[int, int], int] = {}
    for partition, offset, seq in producer.acked:
        assert (partition, offset) not in at, (
            f"offset {partition}:{offset} acknowledged twice: seq {at[(partition, offset)]} and seq {seq}")
        at[(partition, offset)] = seq
    for (partition, offset), seq in sorted(at.items()):
        records = log[partition]
        assert offset < len(records), (
            f"acknowledged seq {seq} at {partition}:{offset} is missing: partition ends at {len(records)}")
        found = records[offset].value
        assert found == producer.value(seq), (
            f"acknowledged seq {seq} at {partition}:{offset}, found {found!r} there")
    for partition in range(PARTITIONS if ordered else 0):
        seqs = [seq for (p, _), seq in sorted(at.items()) if p == partition]
        assert seqs == sorted(seqs), f"partition {partition}: acknowledged records out of produce order"


def wait_acked(producer: ContinuousProducer, count: int) -> None:
    assert producer.wait_acked(count, ACK_WAIT_S), (
        f"only {producer.acked_count()} of {count} records acknowledged within {ACK_WAIT_S}s; "
        f"failed {len(producer.failed)} (first {producer.failed[:3]}); errors {producer.client_errors[:5]}")


def store_args(hdfs) -> list[str]:
    return ["--store", f"{hdfs.url}/martlet-{uuid.uuid4().hex[:8]}"]
