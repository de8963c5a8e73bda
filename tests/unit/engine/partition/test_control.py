"""Transaction markers: the engine builds a control batch and appends it like any batch."""

import asyncio

from martlet.engine.clock import ManualClock
from martlet.engine.partitions import Durability
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore
from martlet.engine.types import TopicPartition
from martlet.records.build import NewRecord, Producer, build_batch
from martlet.records.control import ControlType, Marker
from martlet.records.decode import control_marker
from martlet.records.header import crc_ok, iter_batches, parse_header

NOW_MS = 1_700_000_000_000


def produced(sequence: int) -> bytearray:
    return build_batch([NewRecord(None, b"a", NOW_MS), NewRecord(None, b"b", NOW_MS)],
                       producer=Producer(7, 2, sequence), transactional=True)


async def append_and_read(engine: Engine) -> tuple[list[int], bytes, int]:
    engine.pool.bind(asyncio.get_running_loop())
    await engine.topics.create("t", 1, {})
    tp, partitions = TopicPartition("t", 0), engine.partitions
    first = produced(0)
    offsets = [partitions.append(tp, first, parse_header(first), Durability.MEMORY).base_offset]
    for commit in (True, False):
        offsets.append(partitions.append_control(tp, producer_id=7, producer_epoch=2, commit=commit,
                                                 coordinator_epoch=5, timestamp_ms=NOW_MS))
    after = produced(2)  # markers are outside the producer's sequence
    offsets.append(partitions.append(tp, after, parse_header(after), Durability.MEMORY).base_offset)
    assert await engine.flush(10)
    stored = await partitions.read(tp, 0, 1 << 20)
    session = partitions.info(tp).session
    await engine.close()
    return offsets, stored, session


def test_a_commit_marker_is_appended_and_read_back_as_a_control_batch():
    engine = Engine(MemoryStore(), EngineSettings(), ManualClock(NOW_MS))
    engine.open()
    offsets, stored, session = asyncio.run(append_and_read(engine))
    assert offsets == [0, 2, 3, 4]
    batches = [(stored[pos : pos + header.size], header) for pos, header in iter_batches(stored)]
    assert [header.base_offset for _, header in batches] == offsets
    (_, header), (commit_bytes, commit), (abort_bytes, aborted), _ = batches
    assert not header.is_control and commit.is_control and commit.is_transactional and aborted.is_control
    assert header.leader_epoch == session
    assert (commit.producer_id, commit.producer_epoch, commit.base_sequence) == (7, 2, -1)
    assert (commit.leader_epoch, commit.max_timestamp) == (session, NOW_MS)
    assert crc_ok(commit_bytes) and crc_ok(abort_bytes)
    assert control_marker(commit_bytes) == Marker(ControlType.COMMIT, 5)
    assert control_marker(abort_bytes) == Marker(ControlType.ABORT, 5)
