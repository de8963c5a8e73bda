"""Build valid batches in the engine's header layout for tests (records are opaque bytes),
and read batches as a read_committed consumer does."""

from collections.abc import Iterable

from martlet.engine.log.txnindex import AbortedTxn
from martlet.records.control import ControlType
from martlet.records.decode import control_marker, decode_records
from martlet.records.header import HEADER_BYTES, BatchHeader, Buffer, pack_header, parse_header, set_crc


def read_committed(batches: Iterable[Buffer], aborted: Iterable[AbortedTxn]) -> dict[int, tuple[bytes | None, bytes | None]]:
    """The records (by offset: key, value) a read_committed consumer reading `batches` from
    the start gets, told of `aborted`, by the Java client's rule: a producer named by an
    aborted transaction starting at or before a batch has its transactional batches skipped
    until its ABORT marker."""
    pending = sorted(aborted, key=lambda entry: entry.first_offset)
    skipping: set[int] = set()
    seen = {}
    for batch in batches:
        header = parse_header(batch)
        while pending and pending[0].first_offset <= header.last_offset:
            skipping.add(pending.pop(0).producer_id)
        if header.is_control:
            if header.record_count and control_marker(batch).control_type == ControlType.ABORT:
                skipping.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in skipping):
            seen.update({r.offset: (r.key, r.value) for r in decode_records(batch)})
    return seen


def make_batch(
    record_count: int = 1,
    payload: bytes | None = None,
    timestamp_ms: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = 0,
    base_sequence: int = -1,
    attributes: int = 0,
) -> tuple[bytearray, BatchHeader]:
    """A batch of `record_count` records, all stamped `timestamp_ms`, and its header."""
    body = payload if payload is not None else b"r" * (10 * record_count)
    header = BatchHeader(
        base_offset=0,
        batch_length=HEADER_BYTES - 12 + len(body),
        leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=record_count - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=record_count,
    )
    batch = bytearray(pack_header(header)) + body
    set_crc(batch)
    return batch, parse_header(batch)


class ManualClock:
    """An injected clock that moves only when a test says so."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms
