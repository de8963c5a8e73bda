"""The only socket code: accept connections, read frames, answer them in order.

Requests on one connection are handled one at a time, as Kafka does (it mutes a channel
until its response is sent), which keeps answers in request order. One exception: a produce
request that has appended its batches and only waits for C lets the connection go on to the
next request (gateway/ordering.py); its answer is written by the connection's answer writer,
which writes answers strictly in request order, and any other kind of request waits until
every earlier answer is out. At most PIPELINED_MAX answers wait per connection. A produce
request that has not appended yet when the peer goes away (it waits for room in memory) is
dropped: its producer resends it on a new connection, and appending both would store it twice. Reading goes
on while a request is handled, up to READ_AHEAD_BYTES of whole frames; then the connection
stops reading until the queue drains. A peer that sends something that is not a Kafka request is
disconnected with one log line; other connections are unaffected.

Each connection is an asyncio BufferedProtocol: the socket reads straight into the buffers
`FrameReader` hands out, so a large produce request is not copied on its way in.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from .dispatch import Dispatcher
from .ordering import handled_with
from .protocol.codec import ProtocolError
from .protocol.fetch_wire import Buffers
from .protocol.framing import FrameError, FrameReader

logger = logging.getLogger(__name__)
READ_AHEAD_BYTES = 4 << 20  # whole frames read but not yet handled, per connection
PIPELINED_MAX = 32  # produce requests waiting for C, per connection
PRODUCE_KEY = 0


class Server:
    def __init__(self, dispatcher: Dispatcher, frame_bytes_max: int) -> None:
        self.dispatcher = dispatcher
        self.frame_bytes_max = frame_bytes_max
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self.accepted = 0  # connections since start (/metrics)

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
        self.peer = "?"  # "host:port" of the client, for log lines
        self.client_host = ""
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()  # a frame was queued, or the peer went away
        self._writable = asyncio.Event()
        self._writable.set()
        self._reading_paused = False
        self._ended = False  # EOF or connection lost: no more frames will come
        self._lost = False
        self._answering: collections.deque[asyncio.Task[Buffers | None]] = collections.deque()  # in request order
        self._writer: asyncio.Task[None] | None = None  # writes the answers of _answering
        self._waiting: asyncio.Task[Buffers | None] | None = None  # the produce that has not appended yet

    # -- protocol callbacks (the event loop calls these) ----------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = f"{peer[0]}:{peer[1]}"
            self.client_host = f"/{peer[0]}"  # Kafka shows hosts as "/address"
        self.server._connections.add(self)
        self.server.accepted += 1
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.filled(nbytes)
        except FrameError as error:
            logger.warning("closing connection from %s: %s", self.peer, error, extra={"peer": self.peer})
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
        if self._waiting is not None:  # a produce that has not appended yet (waiting for room)
            self._waiting.cancel()  # appends nothing now: its producer resends it elsewhere

    async def _serve(self) -> None:
        try:
            while (frame := await self._next_frame()) is not None:
                await self._take(frame)
            await self._written()
            if self.reader.pending_bytes:
                logger.warning("closing connection from %s: it ended inside a frame (%d bytes pending)",
                            self.peer, self.reader.pending_bytes)
        except asyncio.CancelledError:
            pass  # stop() ends connections mid-request (a long-polling Fetch, a waiting JoinGroup)
        except ProtocolError as error:
            logger.warning("closing connection from %s (client id %r): %s", self.peer, error.client_id, error,
                           extra={"peer": self.peer, "client_id": error.client_id})
        except ConnectionError:
            pass
        except Exception:
            logger.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self._stop_answering()
            if self.transport is not None:
                self.transport.close()

    async def _take(self, frame: bytearray) -> None:
        if _api_key(frame) == PRODUCE_KEY:
            await self._start(frame)
        else:
            await self._written()
            self._write(await self.server.dispatcher.handle(frame, self.client_host))
            await self._writable.wait()

    def _stop_answering(self) -> None:
        for task in self._answering:
            task.cancel()
        if self._writer is not None:
            self._writer.cancel()

    async def _start(self, frame: bytearray) -> None:
        """Hand a produce request over and return once it has appended (or is answered);
        its answer is written in turn by the writer."""
        loop = asyncio.get_running_loop()
        released: asyncio.Future[None] = loop.create_future()
        task = loop.create_task(self._handle(frame, released))
        self._answering.append(task)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_answers())
            self._writer.add_done_callback(lambda _: self._arrived.set())  # a failure ends the wait for frames
        self._waiting = task
        try:
            await asyncio.wait((task, released), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiting = None
        while len(self._answering) > PIPELINED_MAX and not self._writer.done():
            await asyncio.wait((self._writer, self._answering[0]), return_when=asyncio.FIRST_COMPLETED)
        if self._writer.done():
            self._writer.result()  # the writer failed: raise its error here

    async def _handle(self, frame: bytearray, released: asyncio.Future[None]) -> Buffers | None:
        def release() -> None:
            if not released.done():
                released.set_result(None)

        handled_with(release)
        return await self.server.dispatcher.handle(frame, self.client_host)

    async def _write_answers(self) -> None:
        while self._answering:
            answer = await self._answering[0]
            self._answering.popleft()
            self._write(answer)
            await self._writable.wait()

    async def _written(self) -> None:
        """Return once every answer handed to the writer is written (raise its error)."""
        if self._writer is not None:
            await self._writer

    def _write(self, response: Buffers | None) -> None:
        if response is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(response)  # records go out without being joined

    async def _next_frame(self) -> bytearray | None:
        while not self.frames or self._lost:
            if self._writer is not None and self._writer.done() and not self._writer.cancelled():
                self._writer.result()  # an answer failed: its error ends the connection now
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


def _api_key(frame: bytearray) -> int:
    """The request's api key (the first two bytes of its header); -1 for a runt frame."""
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
