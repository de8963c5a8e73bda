"""Log compaction's rules, on batches: what one cleaning pass keeps of a compacted log.

A pass first reads the log's records up to some offset into a map of each key's latest
offset (`latest_offsets`), then rewrites batches (`clean_batch`), as Kafka's cleaner does:
- a record whose key has a later record in the map is dropped; so is a record without a key
  (a compacted topic takes none; older data may hold some);
- a tombstone (a null value) is kept until its batch's delete horizon has passed: the first
  pass that keeps it sets the horizon to now + delete.retention.ms (KIP-534, written into the
  batch, so nothing else needs remembering), and a later pass drops it, giving consumers that
  time to see the deletion;
- surviving records keep their offsets, and a batch keeps its offset range and producer
  fields (records/build.py `retained`): offsets have gaps, as in Kafka;
- a batch left with no records is dropped, unless it is its producer's last batch in the
  log: that one stays, empty, so the producer's sequence survives (idempotence);
- the records of aborted transactions are removed and never mapped (so an aborted write
  never hides the committed value before it), as Kafka's cleaner discards them; the batch
  stays, empty, where it is its producer's last;
- a transaction marker (a control batch) goes once its transaction has no batch left, as in
  Kafka: walking the log from its start (`Markers`), a marker is removable when no
  transactional batch of its producer came since that producer's previous marker (earlier
  passes removed them all). Like a tombstone it first gets a delete horizon, so readers have
  delete.retention.ms to see it, and a later pass drops it, unless it is its producer's last
  batch (which keeps the producer's epoch): that one stays whole. An ABORT marker goes with its
  entry in the aborted transactions (compaction.py), and nothing it hid is left by then.
Which batches a pass may touch (sealed segments below the first open transaction, older
than min.compaction.lag.ms) is the caller's decision; nothing here reads a clock or a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ...records.build import retained
from ...records.decode import decode_records, record_keys
from ...records.header import BatchHeader, Buffer, parse_header
from .txnindex import AbortedTxn

MAP_ENTRY_BYTES = 110  # what a mapped key costs beyond its bytes: the bytes object, the offset, the dict slot


class Aborted:
    """Which transactional batches an ABORT marker ended, from the log's aborted transactions
    (each: a producer, its transaction's first offset, the marker's offset)."""

    def __init__(self, entries: Iterable[AbortedTxn] = ()) -> None:
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for entry in entries:
            self._ranges.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))

    def __contains__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset <= last for first, last in self._ranges.get(header.producer_id, ()))


NONE_ABORTED = Aborted()


class Markers:
    """Which transaction markers a pass may remove. Fed every batch of the log from its start,
    in order (`clean_batch` does), it tells for each marker whether its transaction still has
    a batch in the log (Kafka's cleaner, CleanedTransactionMetadata)."""

    def __init__(self) -> None:
        self._holding: set[int] = set()  # producers with a transactional batch since their last marker

    def emptied(self, header: BatchHeader) -> bool:
        """For a control batch: True when its transaction left no batch before it. For a
        transactional batch: noted (its marker stays), False."""
        if header.is_control:
            holding = header.producer_id in self._holding
            self._holding.discard(header.producer_id)
            return not holding
        if header.is_transactional:
            self._holding.add(header.producer_id)
        return False


def latest_offsets(batches: Iterable[Buffer], latest: dict[bytes, int] | None = None,
                   aborted: Aborted = NONE_ABORTED) -> dict[bytes, int]:
    """Each key's latest offset in `batches` (in log order), added to `latest` if given."""
    found: dict[bytes, int] = {} if latest is None else latest
    for batch in batches:
        map_batch(batch, found, aborted)
    return found


def map_batch(batch: Buffer, latest: dict[bytes, int], aborted: Aborted = NONE_ABORTED) -> int:
    """Record each key's offset in `batch` in `latest`; returns the bytes the map grew by
    (about: MAP_ENTRY_BYTES and the key's length per new key)."""
    header = parse_header(batch)
    if header.is_control or header in aborted:
        return 0
    before = len(latest)
    added = 0
    for offset, key, _tombstone in record_keys(batch):
        if key is not None:
            if key not in latest:
                added += len(key)
            latest[key] = offset
    return added + (len(latest) - before) * MAP_ENTRY_BYTES


def last_batches(batches: Iterable[Buffer], last: dict[int, int] | None = None) -> dict[int, int]:
    """Each producer id's last batch (its base offset) in `batches`, added to `last` if given."""
    found: dict[int, int] = {} if last is None else last
    for batch in batches:
        header = parse_header(batch)
        if header.producer_id >= 0:
            found[header.producer_id] = header.base_offset
    return found


def clean_batch(batch: Buffer, latest: Mapping[bytes, int], now_ms: int, delete_retention_ms: int,
                producers_last: Mapping[int, int], markers: Markers, aborted: Aborted = NONE_ABORTED) -> Buffer | None:
    """What a pass keeps of `batch`: the batch itself when nothing changes, a rebuilt one, or
    None when nothing of it stays. `markers` sees every batch of the log, in order."""
    header = parse_header(batch)
    if header.is_control:
        if not markers.emptied(header):
            return batch  # its transaction still has records in the log
        horizon = header.delete_horizon
        if horizon is None:
            return retained(header, list(decode_records(batch)), now_ms + delete_retention_ms)
        if now_ms < horizon or producers_last.get(header.producer_id) == header.base_offset:
            return batch
        return None
    markers.emptied(header)
    if header in aborted:
        return retained(header, []) if producers_last.get(header.producer_id) == header.base_offset else None
    horizon = header.delete_horizon
    expired = horizon is not None and now_ms >= horizon
    scanned = list(record_keys(batch))  # keys only, no values: most batches stay as they are
    keeps = [key is not None and latest.get(key, offset) <= offset and not (tombstone and expired)
             for offset, key, tombstone in scanned]
    tombstones = any(keep and tombstone for keep, (_, _, tombstone) in zip(keeps, scanned, strict=True))
    new_horizon = (horizon if horizon is not None else now_ms + delete_retention_ms) if tombstones else None
    if all(keeps) and new_horizon == horizon:
        return batch
    if not any(keeps) and producers_last.get(header.producer_id) != header.base_offset:
        return None
    kept = [record for record, keep in zip(decode_records(batch), keeps, strict=True) if keep]
    return retained(header, kept, new_horizon)
