"""Kafka request framing, sans-IO.

A frame is an int32 big-endian size followed by that many bytes. `FrameReader` owns the
buffers the socket reads into (`get_buffer`, then `filled` with the byte count, the shape
of asyncio's BufferedProtocol), so bytes are copied as little as possible:

- small frames arrive in a reused chunk buffer and are copied out once, whole;
- a frame larger than half the chunk gets its own bytearray as soon as its size is known,
  and the socket then reads the rest of it straight into place (what was already in the
  chunk is copied once; a 1 MB produce request is otherwise never copied on its way in).

Every frame handed out is a bytearray of its own (the size prefix stripped), which callers
may keep and patch. The size limit is checked before a frame's buffer is allocated, so an
oversized or hostile length never allocates.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
CHUNK_BYTES = 256 * 1024


class FrameError(Exception):
    """The peer sent bytes that cannot be a Kafka frame; the connection must close."""


class FrameReader:
    def __init__(self, frame_bytes_max: int, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.frame_bytes_max = frame_bytes_max
        self._chunk = bytearray(chunk_bytes)
        self._start = 0  # unparsed bytes are self._chunk[_start:_end]
        self._end = 0
        self._large: bytearray | None = None  # a large frame being read in place
        self._large_filled = 0

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (never empty)."""
        if self._large is not None:
            return memoryview(self._large)[self._large_filled:]
        if len(self._chunk) - self._end < len(self._chunk) // 4:
            self._compact()
        return memoryview(self._chunk)[self._end:]

    def filled(self, count: int) -> list[bytearray]:
        """`count` bytes were written at the start of the last buffer; the frames now complete."""
        if self._large is not None:
            self._large_filled += count
            if self._large_filled < len(self._large):
                return []
            done, self._large = self._large, None
            return [done]
        self._end += count
        frames = []
        while self._end - self._start >= SIZE.size:
            (size,) = SIZE.unpack_from(self._chunk, self._start)
            self._check_size(size)
            body = self._start + SIZE.size
            have = self._end - body
            if have >= size:
                frames.append(self._chunk[body:body + size])
                self._start = body + size
            elif size > len(self._chunk) // 2:
                self._large = bytearray(size)
                self._large[:have] = memoryview(self._chunk)[body:self._end]
                self._large_filled = have
                self._start = self._end = 0
                break
            else:
                break
        if self._start == self._end:
            self._start = self._end = 0
        return frames

    def feed(self, data: bytes) -> list[bytearray]:
        """`get_buffer` and `filled` for bytes that are already in memory (tests, tools)."""
        frames: list[bytearray] = []
        view = memoryview(data)
        while view:
            buffer = self.get_buffer()
            count = min(len(buffer), len(view))
            buffer[:count] = view[:count]
            frames += self.filled(count)
            view = view[count:]
        return frames

    @property
    def pending_bytes(self) -> int:
        return self._end - self._start + (self._large_filled if self._large is not None else 0)

    def _compact(self) -> None:
        pending = self._end - self._start
        self._chunk[:pending] = self._chunk[self._start:self._end]
        self._start, self._end = 0, pending

    def _check_size(self, size: int) -> None:
        if size < 8:
            raise FrameError(f"frame size {size} is below the 8-byte request header minimum")
        if size > self.frame_bytes_max:
            raise FrameError(f"frame size {size} exceeds the limit of {self.frame_bytes_max} bytes")


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
