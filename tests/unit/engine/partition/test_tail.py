from martlet.engine.partition.tail import Tail
from martlet.records.header import iter_batches, parse_header, set_base_offset
from tests.unit.engine.log.log_batches import make_batch


def add(tail: Tail, records: int = 2) -> bytearray:
    batch, _ = make_batch(record_count=records)
    set_base_offset(batch, tail.end)
    tail.append(batch, parse_header(batch))
    return batch


def offsets(data: bytes | None) -> list[int]:
    assert data is not None
    return [header.base_offset for _, header in iter_batches(data)]


def test_reads_stop_at_the_limit_and_return_whole_batches():
    tail = Tail(10)
    for _ in range(4):
        add(tail)
    assert (tail.end, tail.checkpoint, tail.unpersisted_bytes) == (18, 10, 4 * 81)
    assert offsets(tail.read(10, 10**6, limit=18)) == [10, 12, 14, 16]
    assert offsets(tail.read(13, 10**6, limit=16)) == [12, 14]
    assert tail.read(16, 10**6, limit=16) == b""
    assert offsets(tail.read(10, 100, limit=18)) == [10]  # at least one whole batch
    assert offsets(tail.read(10, 170, limit=18)) == [10, 12]
    assert tail.read(9, 100, limit=18) is None  # older than memory: the store has it


def test_persisting_moves_c_and_only_persisted_batches_are_dropped():
    tail = Tail(0)
    for _ in range(3):
        add(tail)
    batches, headers = tail.unpersisted(10**6)
    assert [h.base_offset for h in headers] == [0, 2, 4]
    assert tail.mark_persisted(4) == 2 * 81
    assert (tail.checkpoint, tail.persisted_bytes, tail.unpersisted_bytes) == (4, 162, 81)
    assert [h.base_offset for h in tail.unpersisted(10**6)[1]] == [4]
    assert tail.drop_persisted() == 162
    assert tail.first_offset == 4 and tail.read(2, 100, limit=6) is None
    assert offsets(tail.read(4, 100, limit=6)) == [4]


def test_unpersisted_takes_about_max_bytes_but_at_least_one():
    tail = Tail(0)
    for _ in range(5):
        add(tail)
    assert len(tail.unpersisted(200)[0]) == 2
    assert len(tail.unpersisted(1)[0]) == 1


def test_many_drops_keep_offsets_and_reads_right():
    tail = Tail(0)
    for round_ in range(3000):
        add(tail, records=1)
        tail.mark_persisted(tail.end)
        if round_ % 7 == 0:
            tail.drop_persisted()
    assert tail.end == 3000 and tail.checkpoint == 3000
    assert offsets(tail.read(2999, 100, limit=3000)) == [2999]
