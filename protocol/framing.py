"""Kafka request framing, sans-IO.

A frame is an int32 big-endian size followed by that many bytes. `FrameReader` hands the
socket the buffers to read into (`get_buffer`, then `filled` with the byte count, the shape
of asyncio's BufferedProtocol), so bytes are copied as little as possible and a connection
holds memory only while a frame is on its way:

- reads go into a chunk that every connection of an event loop shares (`chunk`): the
  frames complete in it are copied out at once, whole, in `filled`, so the chunk is free
  again before the loop reads from another socket (asyncio's and uvloop's transports, plain
  and TLS, read, report with `buffer_updated` and only then ask any protocol for a buffer);
- a frame still incomplete at the end of a read gets a bytearray of its own, its exact size
  (what already arrived is copied once), and the socket then reads the rest of it straight
  into place: a 1 MB produce request is not copied again on its way in, and an idle
  connection holds nothing but the few bytes of a size prefix it has begun.

Every frame handed out is a bytearray of its own (the size prefix stripped), which callers
may keep and patch. The size limit is checked before a frame's buffer is allocated, so an
oversized or hostile length never allocates.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
CHUNK_BYTES = 256 * 1024  # the shared chunk: the most one read from a socket takes in
TLS_HANDSHAKE = 0x1603  # the first two bytes of a TLS record carrying a handshake (a ClientHello)


class FrameError(Exception):
    """The peer sent bytes that cannot be a Kafka frame; the connection must close."""


class FrameReader:
    __slots__ = ("frame_bytes_max", "_chunk", "_prefix", "_frame", "_frame_filled")

    def __init__(self, frame_bytes_max: int, chunk: bytearray | None = None) -> None:
        self.frame_bytes_max = frame_bytes_max
        self._chunk = chunk if chunk is not None else bytearray(CHUNK_BYTES)
        self._prefix = b""  # the first bytes of a size prefix that ended a read
        self._frame: bytearray | None = None  # an incomplete frame, read in place
        self._frame_filled = 0

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (never empty)."""
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled:]
        view = memoryview(self._chunk)
        view[:len(self._prefix)] = self._prefix
        return view[len(self._prefix):]

    def filled(self, count: int) -> list[bytearray]:
        """`count` bytes were written at the start of the last buffer; the frames now complete."""
        if self._frame is not None:
            self._frame_filled += count
            if self._frame_filled < len(self._frame):
                return []
            done, self._frame = self._frame, None
            return [done]
        end = len(self._prefix) + count
        self._prefix = b""
        frames: list[bytearray] = []
        start = 0
        while end - start >= SIZE.size:
            (size,) = SIZE.unpack_from(self._chunk, start)
            self._check_size(size)
            body = start + SIZE.size
            start = body + size
            if start > end:  # incomplete: it goes on in a buffer of its own
                self._frame = bytearray(size)
                self._frame[:end - body] = memoryview(self._chunk)[body:end]
                self._frame_filled = end - body
                return frames
            frames.append(self._chunk[body:start])
        self._prefix = bytes(self._chunk[start:end])
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
        """Bytes of a frame that has begun to arrive."""
        return len(self._prefix) + (self._frame_filled if self._frame is not None else 0)

    @property
    def held_bytes(self) -> int:
        """Memory this connection holds for frames on their way in."""
        return len(self._prefix) + (len(self._frame) if self._frame is not None else 0)

    def _check_size(self, size: int) -> None:
        if size < 8:
            raise FrameError(f"frame size {size} is below the 8-byte request header minimum")
        if size >> 16 == TLS_HANDSHAKE:
            raise FrameError("it began a TLS handshake: a TLS client on a plaintext listener")
        if size > self.frame_bytes_max:
            raise FrameError(f"frame size {size} exceeds the limit of {self.frame_bytes_max} bytes")


def api_key_of(frame: bytes | bytearray) -> int:
    """A request frame's api key (the first two bytes of its header); -1 for a runt frame."""
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
