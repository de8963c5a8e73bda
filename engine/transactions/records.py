"""Transactional ids as a coordinator machine (engine/coordinator): the last state of every
transactional id in a shard. A transactional id lives in the shard its id hashes to, as a group
does, so the shard's owner coordinates it.

Payload, inside the coordinator's {"v":1,"type":"txn", ...} object:

    "id":T,"producer_id":P,"epoch":E,"timeout_ms":M,"state":S,"partitions":[[topic,partition],
    ...],"groups":[G, ...],"started_ms":A,"updated_ms":B
        transactional id T's whole state (types.py TxnMetadata; S is Kafka's state name): the
        last record of T is its state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..coordinator.checks import I32_MAX, I64_MAX, check_key, is_int, is_text, require
from ..coordinator.machine import Body, Kind, Machine
from ..types import TopicPartition
from .types import EPOCH_MAX, TxnMetadata, TxnState

NAME = "transactions"
RECORD_OVERHEAD_BYTES = 128  # batch header and framing, beyond the payload


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A transactional id's new state."""

    meta: TxnMetadata

    @property
    def transactional_id(self) -> str:
        return self.meta.transactional_id


class TxnsState:
    def __init__(self) -> None:
        self.by_id: dict[str, tuple[TxnMetadata, int]] = {}  # transactional id -> (state, its record's size)
        self.live_bytes = 0

    def copy(self) -> TxnsState:
        twin = TxnsState()
        twin.by_id = dict(self.by_id)
        twin.live_bytes = self.live_bytes
        return twin

    def apply(self, record: object) -> None:
        if not isinstance(record, TxnRecord):
            raise TypeError(f"not a transaction record: {record!r}")
        old = self.by_id.get(record.transactional_id)
        if old is not None:
            self.live_bytes -= old[1]
        size = len(KIND.payload(record)) + RECORD_OVERHEAD_BYTES
        self.by_id[record.transactional_id] = (record.meta, size)
        self.live_bytes += size

    def records(self) -> Iterator[TxnRecord]:
        for transactional_id in sorted(self.by_id):
            yield TxnRecord(self.by_id[transactional_id][0])

    def all(self) -> list[TxnMetadata]:
        return [meta for meta, _ in self.by_id.values()]

    def get(self, transactional_id: str) -> TxnMetadata | None:
        entry = self.by_id.get(transactional_id)
        return None if entry is None else entry[0]


def _fields(record: TxnRecord) -> Body:
    meta = record.meta
    return {"id": meta.transactional_id, "producer_id": meta.producer_id, "epoch": meta.epoch,
            "timeout_ms": meta.timeout_ms, "state": meta.state.value,
            "partitions": sorted([tp.topic, tp.partition] for tp in meta.partitions),
            "groups": sorted(meta.groups), "started_ms": meta.started_ms, "updated_ms": meta.updated_ms}


def _parse(body: Body) -> TxnRecord:
    partitions = frozenset(TopicPartition(topic, partition) for topic, partition in body["partitions"])
    return TxnRecord(TxnMetadata(
        body["id"], body["producer_id"], body["epoch"], body["timeout_ms"], TxnState(body["state"]), partitions,
        frozenset(body["groups"]), body["started_ms"], body["updated_ms"]))


def _check(record: TxnRecord) -> None:
    meta = record.meta
    require(isinstance(meta, TxnMetadata), f"not a TxnMetadata: {meta!r}")
    require(is_text(meta.transactional_id), "transactional id must be a str")
    require(is_int(meta.producer_id, 0, I64_MAX), f"bad producer id {meta.producer_id!r}")
    require(is_int(meta.epoch, 0, EPOCH_MAX), f"bad producer epoch {meta.epoch!r}")
    require(is_int(meta.timeout_ms, 1, I32_MAX), f"bad transaction timeout {meta.timeout_ms!r}")
    require(isinstance(meta.state, TxnState), f"bad transaction state {meta.state!r}")
    for topic, partition in meta.partitions:
        check_key(topic, partition)
    for group_id in meta.groups:
        require(is_text(group_id), "group id must be a str")
    require(is_int(meta.started_ms, -1, I64_MAX) and is_int(meta.updated_ms, -1, I64_MAX), "bad transaction times")


KIND = Kind("txn", TxnRecord, lambda r: r.transactional_id, _fields, _parse, _check)
MACHINE = Machine(NAME, (KIND,), TxnsState)
