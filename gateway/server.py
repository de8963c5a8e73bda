"""The only socket code: accept connections, read frames, answer them in order.

Requests on one connection are handled one at a time, as Kafka does (it mutes a channel
until its response is sent), which keeps answers in request order. Reading goes on while a
request is handled, up to READ_AHEAD_BYTES of whole frames; then the connection stops
reading until the queue drains. A peer that sends something that is not a Kafka request is
disconnected with one log line; other connections are unaffected.

Each connection is an asyncio BufferedProtocol: the socket reads straight into the buffers
`FrameReader` hands out, so a large produce request is not copied on its way in.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from .dispatch import Dispatcher
from .protocol.codec import ProtocolError
from .protocol.framing import FrameError, FrameReader

logger = logging.getLogger(__name__)
READ_AHEAD_BYTES = 4 << 20  # whole frames read but not yet handled, per connection


class Server:
    def __init__(self, dispatcher: Dispatcher, frame_bytes_max: int) -> None:
        self.dispatcher = dispatcher
        self.frame_bytes_max = frame_bytes_max
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Connection(self), host, port)
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._server:
            self._server.close()
        tasks = [c.task for c in self._connections if c.task is not None]
        for connection in list(self._connections):
            connection.abort()
        await asyncio.gather(*tasks, return_exceptions=True)


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.reader = FrameReader(server.frame_bytes_max)
        self.frames: collections.deque[bytearray] = collections.deque()
        self.queued_bytes = 0
        self.peer: object = None
        self.client_host = ""
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()  # a frame was queued, or the peer went away
        self._writable = asyncio.Event()
        self._writable.set()
        self._reading_paused = False
        self._ended = False  # EOF or connection lost: no more frames will come
        self._lost = False

    # -- protocol callbacks (the event loop calls these) ----------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass
        self.peer = transport.get_extra_info("peername")
        if isinstance(self.peer, tuple):
            self.client_host = f"/{self.peer[0]}"  # Kafka shows hosts as "/address"
        self.server._connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.filled(nbytes)
        except FrameError as error:
            logger.warning("closing connection from %s: %s", self.peer, error)
            self.abort()
            return
        if frames:
            self.frames.extend(frames)
            self.queued_bytes += sum(len(f) for f in frames)
            self._arrived.set()
            if self.queued_bytes > READ_AHEAD_BYTES and self.transport is not None:
                self.transport.pause_reading()
                self._reading_paused = True

    def eof_received(self) -> bool:
        self._end()
        return True  # keep the transport open: answers to queued requests still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True  # requests read but not yet handled are dropped, as Kafka drops them
        self._end()
        self._writable.set()
        self.server._connections.discard(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- serving ---------------------------------------------------------------------------

    def abort(self) -> None:
        self._end()
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()

    def _end(self) -> None:
        self._ended = True
        self._arrived.set()

    async def _serve(self) -> None:
        try:
            while (frame := await self._next_frame()) is not None:
                response = await self.server.dispatcher.handle(frame, self.client_host)
                if response is not None and self.transport is not None and not self.transport.is_closing():
                    self.transport.writelines(response)  # records go out without being joined
                    await self._writable.wait()
            if self.reader.pending_bytes:
                logger.warning("closing connection from %s: it ended inside a frame (%d bytes pending)",
                            self.peer, self.reader.pending_bytes)
        except asyncio.CancelledError:
            pass  # stop() ends connections mid-request (a long-polling Fetch, a waiting JoinGroup)
        except ProtocolError as error:
            logger.warning("closing connection from %s: %s", self.peer, error)
        except ConnectionError:
            pass
        except Exception:
            logger.exception("closing connection from %s after an internal error", self.peer)
        finally:
            if self.transport is not None:
                self.transport.close()

    async def _next_frame(self) -> bytearray | None:
        while not self.frames or self._lost:
            if self._ended:
                return None
            self._arrived.clear()
            await self._arrived.wait()
        frame = self.frames.popleft()
        self.queued_bytes -= len(frame)
        if self._reading_paused and self.queued_bytes <= READ_AHEAD_BYTES // 2 and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        return frame
