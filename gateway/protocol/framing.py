"""Kafka request framing, sans-IO.

A frame is an int32 big-endian size followed by that many bytes. `FrameDecoder` takes
whatever bytes the socket produced and hands back complete frames; it checks the size
limit before buffering a frame, so an oversized or hostile length never allocates.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer sent bytes that cannot be a Kafka frame; the connection must close."""


class FrameDecoder:
    def __init__(self, frame_bytes_max: int) -> None:
        self.frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[memoryview]:
        """Append `data`; return every frame now complete (without its size prefix)."""
        self._buffer += data
        frames = []
        pos = 0
        while len(self._buffer) - pos >= 4:
            (size,) = SIZE.unpack_from(self._buffer, pos)
            self._check_size(size)
            if len(self._buffer) - pos - 4 < size:
                break
            frames.append(bytes(self._buffer[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del self._buffer[:pos]
        return [memoryview(frame) for frame in frames]

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer)

    def _check_size(self, size: int) -> None:
        if size < 8:
            raise FrameError(f"frame size {size} is below the 8-byte request header minimum")
        if size > self.frame_bytes_max:
            raise FrameError(f"frame size {size} exceeds the limit of {self.frame_bytes_max} bytes")


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
