import pytest

from martlet.gateway.protocol.framing import FrameError, FrameReader, frame


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
    reader = FrameReader(1 << 20, chunk_bytes=64)
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


def test_many_small_frames_wrap_around_the_chunk():
    reader = FrameReader(1024, chunk_bytes=64)
    payloads = [bytes([i]) * (8 + i % 20) for i in range(200)]
    frames = reader.feed(b"".join(frame(p) for p in payloads))
    assert [bytes(f) for f in frames] == payloads
