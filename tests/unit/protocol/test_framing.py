import pytest

from martlet.protocol.framing import FrameError, FrameReader, frame


def test_frames_split_across_reads_are_reassembled():
    decoder = FrameReader(1024)
    data = frame(b"a" * 10) + frame(b"b" * 20)
    frames = []
    for i in range(len(data)):
        frames += decoder.feed(data[i : i + 1])
    assert [bytes(f) for f in frames] == [b"a" * 10, b"b" * 20]
    assert decoder.pending_bytes == 0


def test_oversized_frame_is_refused_before_buffering():
    decoder = FrameReader(100)
    with pytest.raises(FrameError, match="exceeds the limit"):
        decoder.feed(b"\x00\x00\x01\x00")


def test_negative_or_tiny_size_is_refused():
    with pytest.raises(FrameError):
        FrameReader(100).feed(b"\xff\xff\xff\xff")
    with pytest.raises(FrameError):
        FrameReader(100).feed(b"\x00\x00\x00\x02")


def test_a_large_frame_is_read_in_place_and_small_ones_around_it_survive():
    reader = FrameReader(1 << 20, chunk=bytearray(64))
    big = bytes(range(256)) * 4  # larger than half the chunk
    data = frame(b"small one") + frame(big) + frame(b"small two" * 3)
    frames = []
    pos = 0
    while pos < len(data):
        buffer = reader.get_buffer()
        count = min(len(buffer), 7, len(data) - pos)  # the socket hands over a few bytes at a time
        buffer[:count] = data[pos:pos + count]
        frames += reader.filled(count)
        pos += count
    assert [bytes(f) for f in frames] == [b"small one", big, b"small two" * 3]
    assert all(isinstance(f, bytearray) for f in frames) and reader.pending_bytes == 0


def test_many_small_frames_pass_through_a_small_chunk():
    reader = FrameReader(1024, chunk=bytearray(64))
    payloads = [bytes([i]) * (8 + i % 20) for i in range(200)]
    frames = reader.feed(b"".join(frame(p) for p in payloads))
    assert [bytes(f) for f in frames] == payloads


def test_readers_sharing_one_chunk_keep_their_frames_apart():
    """Every connection of a loop reads into one chunk: what a read leaves incomplete (a
    frame, or the first bytes of a size prefix) must not live in it."""
    chunk = bytearray(64)
    streams = [b"".join(frame(bytes([n]) * (8 + (n * i) % 90)) for i in range(40)) for n in (1, 2, 3)]
    readers = [FrameReader(1024, chunk=chunk) for _ in streams]
    positions = [0] * len(streams)
    got: list[list[bytes]] = [[] for _ in streams]
    step = 0
    while any(pos < len(data) for pos, data in zip(positions, streams)):
        for n, (reader, data) in enumerate(zip(readers, streams)):
            step += 1
            buffer = reader.get_buffer()
            count = min(len(buffer), 1 + step % 11, len(data) - positions[n])
            if count == 0:
                continue
            buffer[:count] = data[positions[n]:positions[n] + count]
            positions[n] += count
            got[n] += [bytes(f) for f in reader.filled(count)]
    for n, data in enumerate(streams):
        assert got[n] == [bytes(f) for f in FrameReader(1024).feed(data)] and len(got[n]) == 40
        assert readers[n].pending_bytes == 0


def test_a_reader_holds_memory_only_for_a_frame_on_its_way():
    reader = FrameReader(1 << 20, chunk=bytearray(64))
    assert reader.held_bytes == 0
    reader.feed(frame(b"x" * 20) + frame(b"y" * 200)[:30])
    assert reader.held_bytes == 200 and reader.pending_bytes == 26
    assert [bytes(f) for f in reader.feed(frame(b"y" * 200)[30:] + b"\x00\x00")] == [b"y" * 200]
    assert reader.held_bytes == reader.pending_bytes == 2
    reader.get_buffer()  # a read that finds nothing (EAGAIN) reports no bytes: nothing is lost
    assert [bytes(f) for f in reader.feed(b"\x00\x09abcdefghi")] == [b"abcdefghi"]
    assert reader.held_bytes == 0
