"""The records of the committed-offsets log: one change per engine batch.

Each change to the offset store is appended to an internal partition log as one batch in the
v2 batch layout (martlet.records.header): the 61-byte header with magic 2, attributes 0,
last_offset_delta 0, record_count 1, producer_id -1 (producer_epoch and base_sequence -1,
leader_epoch -1), both timestamps = the time of the write, and a correct CRC32C. What follows
the header is NOT a Kafka record: this log is never served to clients, so the payload is our
own format, compact UTF-8 JSON (no spaces, non-ASCII kept as is), an object of one of these
shapes ("v" is the format version, 1):

    {"v":1,"type":"commit","group":G,"offsets":[[topic,topic_id,partition,offset,leader_epoch,
                                                 metadata,commit_ms], ...]}
        upsert each (G, topic, partition); metadata is a string or null
    {"v":1,"type":"remove","group":G,"keys":[[topic,partition], ...]}
        tombstones for single offsets (OffsetDelete, retention expiry)
    {"v":1,"type":"delete_group","group":G}
        tombstone for every offset of G (DeleteGroups)
    {"v":1,"type":"classic_group"|"consumer_group"|"group_gone","group":G, ...}
        G's membership (members, generation or epochs, assignments): see membership.py.
        Independent of G's offsets: delete_group does not touch it, nor group_gone offsets.
    {"v":1,"type":"txn_offsets","group":G,"producer_id":P,"offsets":[entries as in commit]}
        offsets G commits in producer P's open transaction (TxnOffsetCommit): pending, not
        visible to OffsetFetch, until a txn_end of P
    {"v":1,"type":"txn_end","group":G,"producer_id":P,"commit":bool}
        P's transaction ended: its pending offsets in G are committed, or dropped
    {"v":1,"type":"txn","id":T,"producer_id":P,"epoch":E,"timeout_ms":M,"state":S,
     "partitions":[[topic,partition], ...],"groups":[G, ...],"started_ms":A,"updated_ms":B}
        transactional id T's whole state (engine/transactions/types.py TxnMetadata; S is
        Kafka's state name): the last record of T is its state. A transactional id lives in
        the shard its id hashes to, as a group does, so the shard's owner coordinates it.

Invariants, checked when a change is built (ValueError) and again when it is read back
(CorruptBatch: a payload that passed its CRC yet breaks them was written by a bug, and the open
stops rather than rebuild a wrong state): strings are str that UTF-8 can encode; partition is
in [0, 2**31); offset and commit_ms are i64; leader_epoch is an i32 (-1 when unknown, otherwise
kept as the client sent it, as Kafka does). Replaying the changes in log order from an empty
state rebuilds the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...records.header import (
    HEADER_BYTES,
    LENGTH_FIELD_END,
    MAGIC,
    BatchHeader,
    crc_ok,
    pack_header,
    parse_header,
    set_crc,
)
from ..errors import CorruptBatch
from ..transactions.types import EPOCH_MAX, TxnMetadata, TxnState
from ..types import TopicPartition
from .membership import MembershipChange, fields_of, parse

FORMAT_VERSION = 1
PAYLOAD_BYTES_MAX = 2**31 - 1 - HEADER_BYTES  # batch_length is an i32
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1



@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1 if unknown
    metadata: str | None
    commit_ms: int
    topic_id: str  # the topic's uuid (hex str) at commit time


@dataclass(frozen=True, slots=True)
class Commit:
    group_id: str
    offsets: tuple[tuple[str, int, CommittedOffset], ...]  # (topic, partition, value)


@dataclass(frozen=True, slots=True)
class Remove:
    group_id: str
    keys: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroup:
    group_id: str


@dataclass(frozen=True, slots=True)
class TxnOffsets:
    group_id: str
    producer_id: int
    offsets: tuple[tuple[str, int, CommittedOffset], ...]  # (topic, partition, value)


@dataclass(frozen=True, slots=True)
class TxnOffsetsEnd:
    group_id: str
    producer_id: int
    commit: bool


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A transactional id's new state."""

    meta: TxnMetadata

    @property
    def transactional_id(self) -> str:
        return self.meta.transactional_id


OffsetChange = Commit | Remove | DeleteGroup | TxnOffsets | TxnOffsetsEnd
Change = OffsetChange | MembershipChange | TxnRecord


def owner_of(change: Change) -> tuple[str, str]:
    """Whose change it is: ("group", id) or ("txn", id). A group and a transactional id may
    share a name; their changes never mix."""
    if isinstance(change, TxnRecord):
        return "txn", change.transactional_id
    return "group", change.group_id


# -- batches ---------------------------------------------------------------------------------


def to_batch(change: Change, now_ms: int) -> tuple[bytearray, BatchHeader]:
    """The batch (and its header) that records `change`, ready for PartitionLog.append."""
    payload = encode(change)
    _require(len(payload) <= PAYLOAD_BYTES_MAX, "offset change too large for one batch")
    length = HEADER_BYTES - LENGTH_FIELD_END + len(payload)
    header = BatchHeader(0, length, -1, MAGIC, 0, 0, 0, now_ms, now_ms, -1, -1, -1, 1)
    batch = bytearray(pack_header(header)) + payload
    set_crc(batch)
    return batch, parse_header(batch)


def from_batch(batch: bytes | memoryview, header: BatchHeader) -> Change:
    """The change a stored batch records; CorruptBatch if it is not one of ours."""
    shape = (header.magic, header.attributes, header.last_offset_delta, header.record_count, header.producer_id)
    if shape != (MAGIC, 0, 0, 1, -1):
        raise CorruptBatch(f"not an offset-store batch: {header}")
    if len(batch) != header.size or not crc_ok(batch, 0, header):
        raise CorruptBatch(f"offset-store batch at {header.base_offset} fails its checksum")
    return decode(bytes(batch[HEADER_BYTES:]))


# -- payloads --------------------------------------------------------------------------------


def encode(change: Change) -> bytes:
    check(change)
    if isinstance(change, TxnRecord):
        body = _txn_body(change.meta)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    body = {"v": FORMAT_VERSION, "group": change.group_id}
    if isinstance(change, Commit):
        body["type"] = "commit"
        body["offsets"] = [
            [topic, value.topic_id, partition, value.offset, value.leader_epoch, value.metadata, value.commit_ms]
            for topic, partition, value in change.offsets
        ]
    elif isinstance(change, Remove):
        body["type"] = "remove"
        body["keys"] = [list(key) for key in change.keys]
    elif isinstance(change, DeleteGroup):
        body["type"] = "delete_group"
    elif isinstance(change, TxnOffsets):
        body["type"] = "txn_offsets"
        body["producer_id"] = change.producer_id
        body["offsets"] = [
            [topic, value.topic_id, partition, value.offset, value.leader_epoch, value.metadata, value.commit_ms]
            for topic, partition, value in change.offsets
        ]
    elif isinstance(change, TxnOffsetsEnd):
        body["type"] = "txn_end"
        body["producer_id"] = change.producer_id
        body["commit"] = change.commit
    else:
        body["type"], fields = fields_of(change)
        body.update(fields)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def decode(payload: bytes) -> Change:
    """Parse and validate a payload; anything unexpected is CorruptBatch."""
    try:
        body = json.loads(payload)
        change = _change(body)
        check(change)
    except (ValueError, TypeError, KeyError, RecursionError) as error:  # UnicodeError is a ValueError
        raise CorruptBatch(f"bad offset-store payload: {error}") from None
    return change


def _change(body: Any) -> Change:
    if not isinstance(body, dict) or body.get("v") != FORMAT_VERSION:
        raise ValueError("not a version 1 offset change")
    if body["type"] == "txn":
        return TxnRecord(TxnMetadata(
            body["id"], body["producer_id"], body["epoch"], body["timeout_ms"], TxnState(body["state"]),
            frozenset(_key(entry) for entry in body["partitions"]), frozenset(body["groups"]), body["started_ms"],
            body["updated_ms"]))
    kind, group_id = body["type"], body["group"]
    if kind == "commit":
        return Commit(group_id, tuple(_commit_entry(entry) for entry in body["offsets"]))
    if kind == "remove":
        return Remove(group_id, tuple(_key(entry) for entry in body["keys"]))
    if kind == "delete_group":
        return DeleteGroup(group_id)
    if kind == "txn_offsets":
        return TxnOffsets(group_id, body["producer_id"], tuple(_commit_entry(entry) for entry in body["offsets"]))
    if kind == "txn_end":
        return TxnOffsetsEnd(group_id, body["producer_id"], body["commit"])
    membership = parse(kind, group_id, body)
    if membership is not None:
        return membership
    raise ValueError(f"unknown change type {kind!r}")


def _txn_body(meta: TxnMetadata) -> dict[str, object]:
    return {"v": FORMAT_VERSION, "type": "txn", "id": meta.transactional_id, "producer_id": meta.producer_id,
            "epoch": meta.epoch, "timeout_ms": meta.timeout_ms, "state": meta.state.value,
            "partitions": sorted([tp.topic, tp.partition] for tp in meta.partitions),
            "groups": sorted(meta.groups), "started_ms": meta.started_ms, "updated_ms": meta.updated_ms}


def _commit_entry(entry: Any) -> tuple[str, int, CommittedOffset]:
    topic, topic_id, partition, offset, leader_epoch, metadata, commit_ms = entry
    return topic, partition, CommittedOffset(offset, leader_epoch, metadata, commit_ms, topic_id)


def _key(entry: Any) -> TopicPartition:
    topic, partition = entry
    return TopicPartition(topic, partition)


# -- validation (both sides of the disk) ---------------------------------------------------


def check(change: Change) -> None:
    """Raise ValueError unless `change` satisfies the record invariants (module docstring).
    Explicit checks rather than asserts: replay relies on them even under python -O."""
    if isinstance(change, TxnRecord):
        _check_txn(change.meta)
        return
    _require(_is_text(change.group_id), "group id must be a str")
    if isinstance(change, (Commit, TxnOffsets)):
        for topic, partition, value in change.offsets:
            _check_key(topic, partition)
            _check_value(value)
        if isinstance(change, TxnOffsets):
            _require(_is_int(change.producer_id, 0, I64_MAX), f"bad producer id {change.producer_id!r}")
    elif isinstance(change, TxnOffsetsEnd):
        _require(_is_int(change.producer_id, 0, I64_MAX), f"bad producer id {change.producer_id!r}")
        _require(isinstance(change.commit, bool), "commit must be a bool")
    elif isinstance(change, Remove):
        for topic, partition in change.keys:
            _check_key(topic, partition)
    elif not isinstance(change, DeleteGroup):
        _require(isinstance(change, MembershipChange), f"not a change: {change!r}")


def _check_key(topic: object, partition: object) -> None:
    _require(_is_text(topic), "topic must be a str")
    _require(_is_int(partition, 0, I32_MAX), f"bad partition {partition!r}")


def _check_txn(meta: TxnMetadata) -> None:
    _require(isinstance(meta, TxnMetadata), f"not a TxnMetadata: {meta!r}")
    _require(_is_text(meta.transactional_id), "transactional id must be a str")
    _require(_is_int(meta.producer_id, 0, I64_MAX), f"bad producer id {meta.producer_id!r}")
    _require(_is_int(meta.epoch, 0, EPOCH_MAX), f"bad producer epoch {meta.epoch!r}")
    _require(_is_int(meta.timeout_ms, 1, I32_MAX), f"bad transaction timeout {meta.timeout_ms!r}")
    _require(isinstance(meta.state, TxnState), f"bad transaction state {meta.state!r}")
    for topic, partition in meta.partitions:
        _check_key(topic, partition)
    for group_id in meta.groups:
        _require(_is_text(group_id), "group id must be a str")
    _require(_is_int(meta.started_ms, -1, I64_MAX) and _is_int(meta.updated_ms, -1, I64_MAX), "bad transaction times")


def _check_value(value: CommittedOffset) -> None:
    _require(isinstance(value, CommittedOffset), f"not a CommittedOffset: {value!r}")
    _require(_is_int(value.offset, I64_MIN, I64_MAX), f"bad offset {value.offset!r}")
    _require(_is_int(value.leader_epoch, I32_MIN, I32_MAX), f"bad leader epoch {value.leader_epoch!r}")
    _require(value.metadata is None or _is_text(value.metadata), "metadata must be a str or None")
    _require(_is_int(value.commit_ms, I64_MIN, I64_MAX), f"bad commit time {value.commit_ms!r}")
    _require(_is_text(value.topic_id), "topic id must be a str")


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise ValueError(problem)


def _is_text(value: object) -> bool:
    """A str that UTF-8 can encode (json.loads lets lone surrogates such as "\\ud800" through)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_int(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
