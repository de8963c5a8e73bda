"""What a partition's read-committed readers need of its transactions (KIP-98): the last
stable offset (LSO) and the aborted transactions that overlap a read.

The LSO is the first offset a read-committed reader may not see yet: the smallest of
- the limit readers have anyway (the high watermark; C when it is published),
- the first offset of every open transaction (ProducerState.open, which holds the partition's
  memory tail too), and
- the first offset of every transaction whose marker lies at or above that limit: it is
  decided, but a reader below the limit cannot see the decision yet (Kafka keeps such
  transactions unstable until the high watermark passes their marker, too).
Every transaction that begins below the LSO thus has its marker below the limit, so a
reader that takes the aborted list with the data can filter it.

Aborted transactions are kept for the whole log in marker order (the per-segment indexes of
the log, txnindex.py, joined when the partition opens, and every ABORT appended since), so a
read from memory and a read from the store are told of them alike without a store call.
Entries whose marker lies below the log start are let go (no read can need them), and so are
those whose ABORT marker compaction removed (`forget`, from the compaction worker: the
aborted list alone is guarded by a lock for it).

Otherwise not thread-safe: the event loop owns it, as it owns the tail.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable

from ...records.header import Buffer, iter_batches
from ..log.producers import CompletedTxn, ProducerState
from ..log.txnindex import AbortedTxn, overlapping


class PartitionTransactions:
    def __init__(self, producers: ProducerState, aborted: list[AbortedTxn]) -> None:
        self.producers = producers  # the partition's own state, memory tail included
        self.aborted = aborted
        self._aborted_lock = threading.Lock()
        self._unpersisted: deque[CompletedTxn] = deque()  # decided, marker not yet below C, in marker order

    def completed(self, txn: CompletedTxn | None, checkpoint: int) -> None:
        """A marker was appended (at or above C) and closed `txn`, if it closed one."""
        if txn is None:
            return
        if txn.aborted:
            with self._aborted_lock:
                self.aborted.append(txn.aborted_entry())
        if txn.last_offset >= checkpoint:
            self._unpersisted.append(txn)

    def persisted(self, checkpoint: int) -> None:
        """C moved: markers below it are persisted now."""
        while self._unpersisted and self._unpersisted[0].last_offset < checkpoint:
            self._unpersisted.popleft()

    def last_stable(self, limit: int) -> int:
        """The LSO for readers that see below `limit` (see the module header)."""
        stable = limit
        first_open = self.producers.first_open_offset()
        if first_open is not None:
            stable = min(stable, first_open)
        if self._unpersisted:
            for txn in list(self._unpersisted):  # a copy: close publishes from a worker thread
                if txn.last_offset >= limit:
                    stable = min(stable, txn.first_offset)
        return stable

    def overlapping(self, fetch_offset: int, records: Buffer, start_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a reader of `records` (whole batches from fetch_offset)
        must be told of: those ending at or after fetch_offset that begin below the end of
        `records` (Kafka's rule, UnifiedLog.collectAbortedTransactions)."""
        with self._aborted_lock:
            self._forget_below(start_offset)
            if not records or not self.aborted or self.aborted[-1].last_offset < fetch_offset:
                return []  # the usual case: no walk over the batches (and nothing read: as Kafka, none)
            upper = fetch_offset
            for _, header in iter_batches(records):
                upper = header.next_offset
            return overlapping(self.aborted, fetch_offset, upper)

    def forget(self, entries: Iterable[AbortedTxn]) -> None:
        """Compaction removed these ABORT markers (with nothing left that they hid)."""
        gone = set(entries)
        if gone:
            with self._aborted_lock:
                self.aborted[:] = [entry for entry in self.aborted if entry not in gone]

    def _forget_below(self, start_offset: int) -> None:
        if self.aborted and self.aborted[0].last_offset < start_offset:
            del self.aborted[: bisect_left(self.aborted, start_offset, key=lambda entry: entry.last_offset)]
