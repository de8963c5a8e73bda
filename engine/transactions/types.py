"""Values of the transaction coordinator (coordinator.py): a transactional id's state, the
answers, and the effects the caller carries out.

The states are Kafka's (TransactionState), with Kafka's meaning:
    EMPTY           no transaction open; the producer may start one
    ONGOING         partitions (or a group's offsets) were added; EndTxn ends it
    PREPARE_COMMIT  EndTxn(commit) was taken: markers are being written
    PREPARE_ABORT   EndTxn(abort), a fence or a timeout: abort markers are being written
    COMPLETE_COMMIT the markers are written: a transaction ended, committed
    COMPLETE_ABORT  the same, aborted
Error values are engine words; the gateway maps them to Kafka codes per API version.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..types import TopicPartition

EPOCH_MAX = 32767  # a producer epoch is an int16; at the top a new producer id starts at epoch 0
NO_PRODUCER = -1


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def ended(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class TxnError(enum.Enum):
    NONE = "none"
    INVALID_PRODUCER_ID_MAPPING = "invalid producer id mapping"  # Kafka 49: unknown id, or another producer id
    PRODUCER_FENCED = "producer fenced"                          # 90 (47 INVALID_PRODUCER_EPOCH for old versions)
    CONCURRENT_TRANSACTIONS = "concurrent transactions"          # 51: retriable, markers are being written
    INVALID_TXN_STATE = "invalid transaction state"              # 48
    INVALID_TRANSACTION_TIMEOUT = "invalid transaction timeout"  # 50


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """What the coordinator knows of one transactional id; also the record of the
    transaction log (the latest record of an id is its state after a replay)."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    groups: frozenset[str] = frozenset()  # groups whose offsets the transaction commits (AddOffsetsToTxn)
    started_ms: int = -1  # when the last transaction began, kept once it ended (-1: none since InitProducerId)
    updated_ms: int = -1


@dataclass(frozen=True, slots=True)
class Markers:
    """Write a commit or abort marker into each partition and end the transaction's staged
    offsets in each group (applied on commit, dropped on abort), then tell the coordinator
    (`markers_written`)."""

    transactional_id: str
    producer_id: int
    epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    groups: frozenset[str]


@dataclass(slots=True)
class Outcome:
    """An answer and the effects behind it: `persist` goes to the transaction log before the
    answer is sent, then `markers` are written (in order)."""

    error: TxnError = TxnError.NONE
    producer_id: int = NO_PRODUCER
    epoch: int = -1
    persist: list[TxnMetadata] = field(default_factory=list)
    markers: list[Markers] = field(default_factory=list)
