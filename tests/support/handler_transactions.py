"""Transactions through the handler test broker (harness.Broker): transactional batches produced
into an ongoing transaction and markers appended on partition t-0; InitProducerId,
AddPartitionsToTxn and EndTxn through the dispatcher, and waiting for the markers."""

from __future__ import annotations

import asyncio

from martlet.engine.api import TopicPartition
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.header import parse_header
from tests.unit.gateway.handlers.harness import CALL_S_MAX, INIT_PRODUCER_ID, NOW_MS, PRODUCE, Broker

TP = TopicPartition("t", 0)
ADD_PARTITIONS_TO_TXN, END_TXN = 24, 26


def produce(broker: Broker, batch: bytes, transactional_id: str | None = None, version: int = 9):
    """A transactional batch goes in as part of an ongoing transaction of id tx-<producer id>
    (the coordinator is told of it first: the produce path verifies it, KIP-890 part 1)."""
    header = parse_header(batch)
    if header.is_transactional and transactional_id is None:
        transactional_id = ongoing(broker, header.producer_id)
    body = {"transactional_id": transactional_id, "acks": -1, "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
    return broker.call(PRODUCE, version, body).responses[0].partition_responses[0]


def ongoing(broker: Broker, pid: int) -> str:
    """The coordinator holds tx-<pid> ongoing with partition t-0, at producer id `pid` epoch 0
    (straight into its state machine: the tests pick their producer ids)."""
    machine, transactional_id = broker.engine.transactions.coordinator, f"tx-{pid}"
    if machine.get(transactional_id) is None:
        assert machine.init_producer_id(transactional_id, 60_000, NOW_MS, fresh_id=pid).producer_id == pid
    machine.add_partitions(transactional_id, pid, 0, [TP], NOW_MS)
    return transactional_id


def txn_batch(pid: int, sequence: int, *values: bytes, transactional: bool = True) -> bytes:
    records = [NewRecord(None, value, NOW_MS) for value in values]
    return bytes(build_batch(records, producer=Producer(pid, 0, sequence), transactional=transactional))


def marker(broker: Broker, pid: int, commit: bool) -> int:
    async def append() -> int:
        offset = broker.engine.partitions.append_control(TP, pid, 0, commit, 0, NOW_MS)
        assert await broker.engine.flush(10)
        return offset

    return broker.loop.run_until_complete(append())


def init(broker: Broker, tid: str = "tx", timeout_ms: int = 60_000, version: int = 4) -> tuple[int, int, int]:
    answer = broker.call(INIT_PRODUCER_ID, version, {"transactional_id": tid, "transaction_timeout": timeout_ms,
                                                     "producer_id": -1, "producer_epoch": -1})
    return int(answer.error_code), answer.producer_id, answer.producer_epoch


def add(broker: Broker, pid: int, epoch: int, partitions: dict[str, list[int]], tid: str = "tx",
        version: int = 3) -> dict[tuple[str, int], int]:
    topics = [{"name": name, "partitions": indexes} for name, indexes in partitions.items()]
    answer = broker.call(ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics})
    return {(t.name, p.partition_index): int(p.partition_error_code)
            for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(broker: Broker, pid: int, epoch: int, commit: bool = True, tid: str = "tx", version: int = 3) -> int:
    answer = broker.call(END_TXN, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                            "committed": commit})
    return int(answer.error_code)


def settle(broker: Broker) -> None:
    """Until the markers tasks are done (bounded)."""
    broker.loop.run_until_complete(asyncio.wait_for(broker.engine.transactions.markers_settled(), CALL_S_MAX))
    broker.loop.run_until_complete(broker.engine.flush())
