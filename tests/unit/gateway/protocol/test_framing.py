import pytest

from martlet.gateway.protocol.framing import FrameDecoder, FrameError, frame


def test_frames_split_across_reads_are_reassembled():
    decoder = FrameDecoder(1024)
    data = frame(b"a" * 10) + frame(b"b" * 20)
    frames = []
    for i in range(len(data)):
        frames += decoder.feed(data[i : i + 1])
    assert [bytes(f) for f in frames] == [b"a" * 10, b"b" * 20]
    assert decoder.pending_bytes == 0


def test_oversized_frame_is_refused_before_buffering():
    decoder = FrameDecoder(100)
    with pytest.raises(FrameError, match="exceeds the limit"):
        decoder.feed(b"\x00\x00\x01\x00")


def test_negative_or_tiny_size_is_refused():
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(b"\xff\xff\xff\xff")
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(b"\x00\x00\x00\x02")
