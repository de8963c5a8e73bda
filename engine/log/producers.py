"""Idempotent-producer state of one partition log: who wrote what, to drop retried batches.

For each producer id (>= 0) the log keeps the producer's epoch and the sequence ranges of its
last BATCHES_KEPT batches, the same window a producer may have in flight (KIP-98,
max.in.flight.requests.per.connection <= 5). Control batches carry no sequence and are skipped.

Sequence numbers are i32 and wrap from SEQUENCE_MAX to 0. The state is rebuilt on open from a
snapshot (written when a segment rolls and on clean close) plus the batch headers after it.

Snapshot file format: CRC32C (u32, big-endian) of the rest, then UTF-8 JSON:
    {"offset": N, "producers": [[producer_id, epoch, [[first_seq, last_seq, base_offset,
    last_offset], ...]], ...]}
"""

import json
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from ...records.header import BatchHeader
from ..errors import DuplicateBatch, OutOfOrderSequence, StaleProducerEpoch

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

    def next_sequence(self) -> int | None:
        return wrap_sequence(self.batches[-1].last_sequence + 1) if self.batches else None


def tracked(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and not header.is_control


def sequence_range(header: BatchHeader) -> tuple[int, int]:
    return header.base_sequence, wrap_sequence(header.base_sequence + header.last_offset_delta)


class ProducerState:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def check(self, header: BatchHeader) -> None:
        """Raise if the batch must not be written: stale epoch, duplicate, or a gap."""
        entry = self.producers.get(header.producer_id) if tracked(header) else None
        if entry is None:
            return  # unknown producers start anywhere, e.g. after retention removed their batches
        if header.producer_epoch < entry.epoch:
            raise StaleProducerEpoch(f"producer {header.producer_id} epoch {header.producer_epoch} < {entry.epoch}")
        if header.producer_epoch > entry.epoch:
            _expect_sequence(header, 0)
            return
        _check_duplicate(entry, header)
        _expect_sequence(header, entry.next_sequence())

    def update(self, header: BatchHeader) -> None:
        """Record a batch that was written (its base_offset is the real one)."""
        if not tracked(header):
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        first, last = sequence_range(header)
        entry.batches.append(ProducerBatch(first, last, header.base_offset, header.last_offset))

    def to_bytes(self, offset: int) -> bytes:
        producers = [[pid, e.epoch, [list(b) for b in e.batches]] for pid, e in self.producers.items()]
        body = json.dumps({"offset": offset, "producers": producers}, separators=(",", ":")).encode()
        return _CRC.pack(crc32c.crc32c(body)) + body

    @classmethod
    def from_bytes(cls, data: bytes) -> tuple[int, "ProducerState"]:
        """(offset, state) from a snapshot; ValueError if it is damaged."""
        if len(data) < _CRC.size or _CRC.unpack_from(data)[0] != crc32c.crc32c(data[_CRC.size :]):
            raise ValueError("producer snapshot checksum mismatch")
        doc = json.loads(data[_CRC.size :])
        state = cls()
        for pid, epoch, batches in doc["producers"]:
            entry = state.producers[pid] = ProducerEntry(epoch)
            entry.batches.extend(ProducerBatch(*b) for b in batches)
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
