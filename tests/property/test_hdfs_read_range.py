from collections.abc import Iterator
from typing import cast

from hdfs_native import FileReader
from hypothesis import given
from hypothesis import strategies as st

from martlet.engine.store.hdfs import _read_range


class Packets:
    """A reader whose stream yields the bytes in packets of the given sizes (the DataNode's
    are 64 KiB, but the first and last of a range are cut to it)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes = data, sizes

    def read_range_stream(self, offset: int, length: int) -> Iterator[bytes]:
        at, end = offset, offset + length
        for size in self.sizes:
            if at >= end:
                return
            yield self.data[at : min(at + size, end)]
            at += size
        if at < end:
            yield self.data[at:end]


@given(st.binary(min_size=1, max_size=5000), st.lists(st.integers(1, 700), max_size=20),
       st.integers(1, 1000), st.data())
def test_packets_are_joined_into_pieces_of_the_asked_size(data, sizes, piece_bytes, draw):
    offset = draw.draw(st.integers(0, len(data) - 1))
    length = draw.draw(st.integers(1, len(data) - offset))
    reader = cast(FileReader, Packets(data, sizes))
    wanted = data[offset : offset + length]
    assert _read_range(reader, offset, length, piece_bytes) == [
        wanted[at : at + piece_bytes] for at in range(0, length, piece_bytes)]
    assert _read_range(reader, offset, length) == [wanted]
