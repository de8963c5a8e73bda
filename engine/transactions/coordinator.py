"""The transaction coordinator's state machine (KIP-98, KIP-447): transactional ids, their
producer id and epoch, and the two-phase end of each transaction.

Deterministic: time comes in as `now_ms`, producer ids as `fresh_id` (the caller allocates
one when `needs_producer_id` says so), and nothing here touches a store. Each call returns an
`Outcome`: the answer, the records the caller appends to the transaction log before it
answers (`persist`, a transactional id's whole new state: replaying the latest record of
each id rebuilds the coordinator, see `replay`), and the markers to write. The state changes
in memory at once; a caller whose log append fails reloads from the log.

Kafka's rules, as TransactionCoordinator applies them to client requests:
- InitProducerId: a new id gets a producer id and epoch 0; an id whose transaction ended gets
  its epoch bumped (a new producer id at the epoch's top), which fences older producers; an
  ongoing transaction is aborted with a bumped epoch and the caller answered
  CONCURRENT_TRANSACTIONS (it retries, and gets the next epoch once the abort is written);
  while markers are being written, CONCURRENT_TRANSACTIONS. A timeout outside 1 ..
  timeout_ms_max is INVALID_TRANSACTION_TIMEOUT; the default maximum is an hour (Kafka's is
  15 minutes; Flink's KafkaSink asks for an hour).
- AddPartitionsToTxn and AddOffsetsToTxn: the id must be known and hold this producer id
  (else INVALID_PRODUCER_ID_MAPPING) at this epoch (else PRODUCER_FENCED); while markers are
  being written, CONCURRENT_TRANSACTIONS; the first addition opens a transaction (ONGOING),
  and adding what is already in it changes nothing.
- EndTxn: the same identity checks; an ongoing transaction goes to PREPARE_COMMIT or
  PREPARE_ABORT and its markers are due; a repeated EndTxn of a transaction that completed
  the same way answers success (a client retrying, or Flink committing a transaction it
  resumed after a restart), the other way INVALID_TXN_STATE; one still being prepared the
  same way CONCURRENT_TRANSACTIONS; EndTxn with nothing open INVALID_TXN_STATE.
- `markers_written`: a prepared transaction completes (COMPLETE_COMMIT or COMPLETE_ABORT).
- `expire`: an ongoing transaction older than its timeout is aborted with a bumped epoch, so
  its producer is fenced.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from ..types import TopicPartition
from .types import EPOCH_MAX, Markers, Outcome, TxnError, TxnMetadata, TxnState

TIMEOUT_MS_MAX = 3_600_000  # transaction.max.timeout.ms: an hour, so Flink's default is taken as is


class TransactionCoordinator:
    def __init__(self, timeout_ms_max: int = TIMEOUT_MS_MAX) -> None:
        self.timeout_ms_max = timeout_ms_max
        self._txns: dict[str, TxnMetadata] = {}

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def __iter__(self) -> Iterator[TxnMetadata]:
        return iter(list(self._txns.values()))

    def needs_producer_id(self, transactional_id: str) -> bool:
        """Whether InitProducerId for this id would hand out a new producer id."""
        meta = self._txns.get(transactional_id)
        return meta is None or meta.epoch >= EPOCH_MAX - 1

    # -- log ---------------------------------------------------------------------------

    def replay(self, records: Iterable[TxnMetadata]) -> None:
        """Rebuild from the transaction log: each id's latest record is its state."""
        for meta in records:
            self._txns[meta.transactional_id] = meta

    def forget(self, transactional_ids: Iterable[str]) -> None:
        """Stop coordinating these ids (their shard moved away, or their log lacks them)."""
        for transactional_id in transactional_ids:
            self._txns.pop(transactional_id, None)

    def pending_markers(self) -> list[Markers]:
        """The markers of every transaction being prepared: after a replay they are written
        again (markers are idempotent: a partition that has one for this epoch skips it)."""
        return [_markers(meta) for meta in self._txns.values() if meta.state.preparing]

    # -- client requests -----------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, now_ms: int, fresh_id: int) -> Outcome:
        if not 0 < timeout_ms <= self.timeout_ms_max:
            return Outcome(TxnError.INVALID_TRANSACTION_TIMEOUT)
        meta = self._txns.get(transactional_id)
        if meta is None:
            return self._answer(TxnMetadata(transactional_id, fresh_id, 0, timeout_ms, TxnState.EMPTY,
                                            updated_ms=now_ms))
        if meta.state.preparing:
            return Outcome(TxnError.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            outcome = self._abort(meta, now_ms)
            outcome.error = TxnError.CONCURRENT_TRANSACTIONS
            return outcome
        producer_id, epoch = (fresh_id, 0) if meta.epoch >= EPOCH_MAX - 1 else (meta.producer_id, meta.epoch + 1)
        return self._answer(replace(meta, producer_id=producer_id, epoch=epoch, timeout_ms=timeout_ms,
                                    state=TxnState.EMPTY, partitions=frozenset(), groups=frozenset(),
                                    started_ms=-1, updated_ms=now_ms))

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int) -> Outcome:
        return self._add(transactional_id, producer_id, epoch, frozenset(partitions), frozenset(), now_ms)

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str, now_ms: int) -> Outcome:
        return self._add(transactional_id, producer_id, epoch, frozenset(), frozenset({group_id}), now_ms)

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int) -> Outcome:
        meta, error = self._identify(transactional_id, producer_id, epoch)
        if meta is None:
            return Outcome(error)
        done, preparing = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                           else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
        if meta.state is TxnState.ONGOING:
            prepared = replace(meta, state=preparing, updated_ms=now_ms)
            outcome = self._answer(prepared)
            outcome.markers.append(_markers(prepared))
            return outcome
        if meta.state is done:
            return Outcome(TxnError.NONE, meta.producer_id, meta.epoch)
        if meta.state is preparing:
            return Outcome(TxnError.CONCURRENT_TRANSACTIONS)
        return Outcome(TxnError.INVALID_TXN_STATE)

    # -- the coordinator's own steps -----------------------------------------------------

    def markers_written(self, transactional_id: str, epoch: int, now_ms: int) -> Outcome:
        """Every marker of the transaction prepared at `epoch` is written: it completes."""
        meta = self._txns.get(transactional_id)
        if meta is None or not meta.state.preparing or meta.epoch != epoch:
            return Outcome()  # already completed (markers written twice), or superseded
        done = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._answer(replace(meta, state=done, partitions=frozenset(), groups=frozenset(), updated_ms=now_ms))

    def expire(self, now_ms: int) -> Outcome:
        """Abort every ongoing transaction older than its timeout, fencing its producer."""
        outcome = Outcome()
        for meta in list(self._txns.values()):
            if meta.state is TxnState.ONGOING and now_ms - meta.started_ms > meta.timeout_ms:
                aborted = self._abort(meta, now_ms)
                outcome.persist += aborted.persist
                outcome.markers += aborted.markers
        return outcome

    # -- helpers -------------------------------------------------------------------------

    def _identify(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[TxnMetadata | None, TxnError]:
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return None, TxnError.INVALID_PRODUCER_ID_MAPPING
        if meta.epoch != epoch:
            return None, TxnError.PRODUCER_FENCED
        return meta, TxnError.NONE

    def _add(self, transactional_id: str, producer_id: int, epoch: int, partitions: frozenset[TopicPartition],
             groups: frozenset[str], now_ms: int) -> Outcome:
        meta, error = self._identify(transactional_id, producer_id, epoch)
        if meta is None:
            return Outcome(error)
        if meta.state.preparing:
            return Outcome(TxnError.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            if partitions <= meta.partitions and groups <= meta.groups:
                return Outcome(TxnError.NONE, meta.producer_id, meta.epoch)
            return self._answer(replace(meta, partitions=meta.partitions | partitions, groups=meta.groups | groups,
                                        updated_ms=now_ms))
        return self._answer(replace(meta, state=TxnState.ONGOING, partitions=partitions, groups=groups,
                                    started_ms=now_ms, updated_ms=now_ms))

    def _abort(self, meta: TxnMetadata, now_ms: int) -> Outcome:
        """Abort an ongoing transaction at the next epoch: the producer that opened it is fenced."""
        aborting = replace(meta, epoch=min(meta.epoch + 1, EPOCH_MAX), state=TxnState.PREPARE_ABORT,
                           updated_ms=now_ms)
        outcome = self._answer(aborting)
        outcome.markers.append(_markers(aborting))
        return outcome

    def _answer(self, meta: TxnMetadata) -> Outcome:
        self._txns[meta.transactional_id] = meta
        return Outcome(TxnError.NONE, meta.producer_id, meta.epoch, persist=[meta])


def _markers(meta: TxnMetadata) -> Markers:
    commit = meta.state is TxnState.PREPARE_COMMIT
    return Markers(meta.transactional_id, meta.producer_id, meta.epoch, commit, meta.partitions, meta.groups)
