"""Producer state of one partition log: who wrote what, to drop retried batches, and which
transactions are open.

For each producer id (>= 0) the log keeps the producer's epoch and the sequence ranges of its
last BATCHES_KEPT batches, the same window a producer may have in flight (KIP-98,
max.in.flight.requests.per.connection <= 5). Control batches carry no sequence.

Sequence numbers are i32 and wrap from SEQUENCE_MAX to 0. The state is rebuilt on open from a
snapshot (written when a segment rolls and on clean close) plus the batch headers after it.

Transactions (KIP-98), as Kafka's ProducerStateManager keeps them: a transactional batch of a
producer with no open transaction opens one at its base offset; the producer's next control
batch (a COMMIT or ABORT marker, martlet.records.control) closes it, and `update` returns the
completed transaction, which for an ABORT becomes an entry of the segment's transaction index
(txnindex.py). A marker of a producer with no open transaction here changes nothing (its
transaction wrote nothing to this partition); a marker also moves the producer to its epoch,
as the coordinator may have bumped it. A producer with an open transaction may not write
outside it (`check`: TransactionOpen, Kafka's INVALID_TXN_STATE). `open` keeps the open
transactions in the order they began, which is their first offsets' order, so the first one
bounds the last stable offset.

Snapshot file format: CRC32C (u32, big-endian) of the rest, then UTF-8 JSON:
    {"offset": N, "producers": [[producer_id, epoch, [[first_seq, last_seq, base_offset,
    last_offset], ...], last_timestamp, coordinator_epoch], ...],
     "transactions": [[producer_id, first_offset], ...]}
"transactions" (the open ones) is absent from snapshots written before transactions were
served: none were open then; so are a producer's last_timestamp and coordinator_epoch from
snapshots written before DescribeProducers was served (-1 each).
"""

import json
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from ...records.control import ControlType, Marker
from ...records.decode import control_marker
from ...records.errors import InvalidBatch
from ...records.header import BatchHeader, Buffer
from ..errors import CoordinatorFenced, DuplicateBatch, OutOfOrderSequence, StaleProducerEpoch, TransactionOpen
from .txnindex import AbortedTxn

BATCHES_KEPT = 5
SEQUENCE_MAX = 2**31 - 1
_CRC = struct.Struct(">I")


def wrap_sequence(sequence: int) -> int:
    return sequence % (SEQUENCE_MAX + 1)


class ProducerBatch(NamedTuple):
    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[ProducerBatch] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1  # the max timestamp of its last batch or marker (DescribeProducers)
    coordinator_epoch: int = -1  # of the last marker written for it; -1 before any
    last_marker: int = -1  # the offset of its last marker (a cleaner keeps it while no batch follows at its epoch)

    def next_sequence(self) -> int | None:
        return wrap_sequence(self.batches[-1].last_sequence + 1) if self.batches else None


class ActiveProducer(NamedTuple):
    """What a partition knows of one producer (Kafka's DescribeProducers)."""

    producer_id: int
    epoch: int
    last_sequence: int  # of its last batch; -1 when it has none at this epoch
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int  # the first offset of its open transaction, -1 when none is open


class CompletedTxn(NamedTuple):
    """A transaction a marker closed (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    last_stable_offset: int  # the first offset of a transaction still open after the marker, else last_offset + 1
    aborted: bool

    def aborted_entry(self) -> AbortedTxn:
        return AbortedTxn(self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def end_marker(batch: Buffer, header: BatchHeader) -> Marker | None:
    """The marker a control batch carries, None for any other batch (or a control batch that
    holds no end-of-transaction marker: it ends nothing)."""
    if not header.is_control:
        return None
    try:
        return control_marker(batch)
    except InvalidBatch:
        return None


def tracked(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and not header.is_control


def sequence_range(header: BatchHeader) -> tuple[int, int]:
    return header.base_sequence, wrap_sequence(header.base_sequence + header.last_offset_delta)


class ProducerState:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction, in offset order

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def check(self, header: BatchHeader, marker: Marker | None = None) -> None:
        """Raise if the batch must not be written: stale epoch, duplicate, or a gap; for a
        marker (`marker`: what the control batch carries, see end_marker), a stale producer
        or coordinator epoch."""
        if marker is not None and header.producer_id >= 0:
            self._check_marker(header, marker)
        if not tracked(header):
            return
        if not header.is_transactional and header.producer_id in self.open:
            raise TransactionOpen(f"producer {header.producer_id} wrote outside its open transaction "
                                  f"(from offset {self.open[header.producer_id]})")
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return  # unknown producers start anywhere, e.g. after retention removed their batches
        if header.producer_epoch < entry.epoch:
            raise StaleProducerEpoch(f"producer {header.producer_id} epoch {header.producer_epoch} < {entry.epoch}")
        if header.producer_epoch > entry.epoch:
            _expect_sequence(header, 0)
            return
        _check_duplicate(entry, header)
        _expect_sequence(header, entry.next_sequence())

    def _check_marker(self, header: BatchHeader, marker: Marker) -> None:
        """Kafka's appendEndTxnMarker checks: a marker older than the producer's epoch, or
        from an older coordinator than the producer's last marker, is refused."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.epoch:
            raise StaleProducerEpoch(f"marker of producer {header.producer_id} at epoch {header.producer_epoch} "
                                     f"< {entry.epoch}")
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise CoordinatorFenced(f"marker of producer {header.producer_id} from coordinator epoch "
                                    f"{marker.coordinator_epoch} < {entry.coordinator_epoch}")

    def active(self) -> list[ActiveProducer]:
        return [ActiveProducer(pid, entry.epoch, entry.batches[-1].last_sequence if entry.batches else -1,
                               entry.last_timestamp, entry.coordinator_epoch, self.open.get(pid, -1))
                for pid, entry in sorted(self.producers.items())]

    def first_open_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None if none is open."""
        return next(iter(self.open.values()), None)

    def update(self, header: BatchHeader, marker: Marker | None = None) -> CompletedTxn | None:
        """Record a batch that was written (its base_offset is the real one; `marker`: what
        a control batch carries, see end_marker). Returns the transaction a marker closed."""
        if header.producer_id < 0:
            return None
        if header.is_control:
            return self._end(header, marker) if marker is not None else None
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self._at_epoch(header.producer_id, header.producer_epoch, entry)
        first, last = sequence_range(header)
        entry.batches.append(ProducerBatch(first, last, header.base_offset, header.last_offset))
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional:
            self.open.setdefault(header.producer_id, header.base_offset)
        return None

    def _end(self, header: BatchHeader, marker: Marker) -> CompletedTxn | None:
        """A marker: close the producer's open transaction, and take the marker's epoch if it
        is newer (Kafka's appendEndTxnMarker)."""
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None or entry.epoch < header.producer_epoch:
            entry = self._at_epoch(pid, header.producer_epoch, entry)
        entry.last_timestamp = header.max_timestamp
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_marker = header.base_offset
        first = self.open.pop(pid, None)
        if first is None:
            return None
        after = self.first_open_offset()
        last_stable = after if after is not None else header.base_offset + 1
        return CompletedTxn(pid, first, header.base_offset, last_stable, marker.control_type == ControlType.ABORT)

    def _at_epoch(self, pid: int, epoch: int, old: ProducerEntry | None) -> ProducerEntry:
        """A producer starting over at a new epoch: no batches yet, the coordinator epoch kept."""
        entry = self.producers[pid] = ProducerEntry(epoch)
        if old is not None:
            entry.coordinator_epoch = old.coordinator_epoch
        return entry

    def to_bytes(self, offset: int) -> bytes:
        producers = [[pid, e.epoch, [list(b) for b in e.batches], e.last_timestamp, e.coordinator_epoch, e.last_marker]
                     for pid, e in self.producers.items()]
        transactions = [[pid, first] for pid, first in self.open.items()]
        body = json.dumps({"offset": offset, "producers": producers, "transactions": transactions},
                          separators=(",", ":")).encode()
        return _CRC.pack(crc32c.crc32c(body)) + body

    @classmethod
    def from_bytes(cls, data: bytes) -> tuple[int, "ProducerState"]:
        """(offset, state) from a snapshot; ValueError if it is damaged."""
        if len(data) < _CRC.size or _CRC.unpack_from(data)[0] != crc32c.crc32c(data[_CRC.size :]):
            raise ValueError("producer snapshot checksum mismatch")
        doc = json.loads(data[_CRC.size :])
        state = cls()
        for pid, epoch, batches, *seen in doc["producers"]:
            entry = state.producers[pid] = ProducerEntry(epoch, last_timestamp=seen[0] if seen else -1,
                                                         coordinator_epoch=seen[1] if seen else -1,
                                                         last_marker=seen[2] if len(seen) > 2 else -1)
            entry.batches.extend(ProducerBatch(*b) for b in batches)
        for pid, first in sorted(doc.get("transactions", []), key=lambda txn: txn[1]):
            state.open[pid] = first
        return doc["offset"], state


def _check_duplicate(entry: ProducerEntry, header: BatchHeader) -> None:
    wanted = sequence_range(header)
    for batch in entry.batches:
        if (batch.first_sequence, batch.last_sequence) == wanted:
            raise DuplicateBatch(base_offset=batch.base_offset)


def _expect_sequence(header: BatchHeader, expected: int | None) -> None:
    if expected is not None and header.base_sequence != expected:
        raise OutOfOrderSequence(
            f"producer {header.producer_id} epoch {header.producer_epoch}: "
            f"sequence {header.base_sequence}, expected {expected}"
        )
