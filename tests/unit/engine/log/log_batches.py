"""Build valid batches in the engine's header layout for tests (records are opaque bytes)."""

from martlet.records.header import HEADER_BYTES, BatchHeader, pack_header, parse_header, set_crc


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
