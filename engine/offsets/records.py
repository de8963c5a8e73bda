"""The records of committed offsets, as kinds of coordinator record (engine/coordinator).

Payloads, inside the coordinator's {"v":1,"type":T, ...} object:

    commit       "group":G,"offsets":[[topic,topic_id,partition,offset,leader_epoch,metadata,
                                       commit_ms], ...]
        upsert each (G, topic, partition); metadata is a string or null
    remove       "group":G,"keys":[[topic,partition], ...]
        tombstones for single offsets (OffsetDelete, retention expiry)
    delete_group "group":G
        tombstone for every offset of G (DeleteGroups); G's membership is another machine's
    txn_offsets  "group":G,"producer_id":P,"offsets":[entries as in commit]
        offsets G commits in producer P's open transaction (TxnOffsetCommit): pending, not
        visible to OffsetFetch, until a txn_end of P
    txn_end      "group":G,"producer_id":P,"commit":bool
        P's transaction ended: its pending offsets in G are committed, or dropped

Invariants (coordinator/checks.py): strings are str that UTF-8 can encode; partition is in
[0, 2**31); offset and commit_ms are i64; leader_epoch is an i32 (-1 when unknown, otherwise
kept as the client sent it, as Kafka does); a producer id is in [0, 2**63).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..coordinator.checks import I32_MAX, I32_MIN, I64_MAX, I64_MIN, check_key, is_int, is_text, require
from ..coordinator.machine import Json, Kind
from ..types import CommittedOffset, TopicPartition

Entries = tuple[tuple[str, int, CommittedOffset], ...]  # (topic, partition, value)


@dataclass(frozen=True, slots=True)
class Commit:
    group_id: str
    offsets: Entries


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
    offsets: Entries


@dataclass(frozen=True, slots=True)
class TxnOffsetsEnd:
    group_id: str
    producer_id: int
    commit: bool


OffsetRecord = Commit | Remove | DeleteGroup | TxnOffsets | TxnOffsetsEnd


def _group(record: OffsetRecord) -> str:
    return record.group_id


def _entries(offsets: Entries) -> list[list[Json]]:
    return [[topic, value.topic_id, partition, value.offset, value.leader_epoch, value.metadata, value.commit_ms]
            for topic, partition, value in offsets]


def _parse_entries(entries: Json) -> Entries:
    parsed = []
    for entry in entries:
        topic, topic_id, partition, offset, leader_epoch, metadata, commit_ms = entry
        parsed.append((topic, partition, CommittedOffset(offset, leader_epoch, metadata, commit_ms, topic_id)))
    return tuple(parsed)


def _key(entry: Json) -> TopicPartition:
    topic, partition = entry
    return TopicPartition(topic, partition)


def _check_group(record: OffsetRecord) -> None:
    require(is_text(record.group_id), "group id must be a str")


def _check_entries(offsets: Entries) -> None:
    for topic, partition, value in offsets:
        check_key(topic, partition)
        require(isinstance(value, CommittedOffset), f"not a CommittedOffset: {value!r}")
        require(is_int(value.offset, I64_MIN, I64_MAX), f"bad offset {value.offset!r}")
        require(is_int(value.leader_epoch, I32_MIN, I32_MAX), f"bad leader epoch {value.leader_epoch!r}")
        require(value.metadata is None or is_text(value.metadata), "metadata must be a str or None")
        require(is_int(value.commit_ms, I64_MIN, I64_MAX), f"bad commit time {value.commit_ms!r}")
        require(is_text(value.topic_id), "topic id must be a str")


def _check_producer(producer_id: object) -> None:
    require(is_int(producer_id, 0, I64_MAX), f"bad producer id {producer_id!r}")


def _check_commit(record: Commit) -> None:
    _check_group(record)
    _check_entries(record.offsets)


def _check_remove(record: Remove) -> None:
    _check_group(record)
    for topic, partition in record.keys:
        check_key(topic, partition)


def _check_txn_offsets(record: TxnOffsets) -> None:
    _check_group(record)
    _check_entries(record.offsets)
    _check_producer(record.producer_id)


def _check_txn_end(record: TxnOffsetsEnd) -> None:
    _check_group(record)
    _check_producer(record.producer_id)
    require(isinstance(record.commit, bool), "commit must be a bool")


KINDS = (
    Kind("commit", Commit, _group,
         lambda r: {"group": r.group_id, "offsets": _entries(r.offsets)},
         lambda body: Commit(body["group"], _parse_entries(body["offsets"])), _check_commit),
    Kind("remove", Remove, _group,
         lambda r: {"group": r.group_id, "keys": [list(key) for key in r.keys]},
         lambda body: Remove(body["group"], tuple(_key(entry) for entry in body["keys"])), _check_remove),
    Kind("delete_group", DeleteGroup, _group,
         lambda r: {"group": r.group_id},
         lambda body: DeleteGroup(body["group"]), _check_group),
    Kind("txn_offsets", TxnOffsets, _group,
         lambda r: {"group": r.group_id, "producer_id": r.producer_id, "offsets": _entries(r.offsets)},
         lambda body: TxnOffsets(body["group"], body["producer_id"], _parse_entries(body["offsets"])),
         _check_txn_offsets),
    Kind("txn_end", TxnOffsetsEnd, _group,
         lambda r: {"group": r.group_id, "producer_id": r.producer_id, "commit": r.commit},
         lambda body: TxnOffsetsEnd(body["group"], body["producer_id"], body["commit"]), _check_txn_end),
)
