"""check_handed (engine/log/log.py): a batch and the header handed with it must agree, apart
from the base offset and leader epoch, which the engine patches into the bytes itself."""

import pytest

from martlet.engine.log.log import CorruptBatch, check_handed
from martlet.records.build import NewRecord, build_batch
from martlet.records.header import parse_header


def _batch() -> bytearray:
    return bytearray(build_batch([NewRecord(b"k", b"v" * 20, 1_000), NewRecord(None, b"w", 1_001)]))


def test_base_offset_and_leader_epoch_may_differ() -> None:
    batch = _batch()
    check_handed(batch, parse_header(batch)._replace(base_offset=41, leader_epoch=7))


@pytest.mark.parametrize("field", ["batch_length", "magic", "crc", "attributes", "last_offset_delta",
                                   "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                                   "base_sequence", "record_count"])
def test_any_other_field_that_differs_is_refused(field: str) -> None:
    batch = _batch()
    header = parse_header(batch)
    with pytest.raises(CorruptBatch):
        check_handed(batch, header._replace(**{field: getattr(header, field) + 1}))
