"""The only socket code: accept connections, read frames, answer them in order.

Requests on one connection are handled one at a time, as Kafka does (it mutes a channel
until its response is sent), which keeps answers in request order. A peer that sends
something that is not a Kafka request is disconnected with one log line; other
connections are unaffected.
"""

from __future__ import annotations

import asyncio
import logging

from .dispatch import Dispatcher
from .protocol.codec import ProtocolError
from .protocol.framing import FrameDecoder, FrameError

log = logging.getLogger(__name__)
READ_BYTES = 256 * 1024


class Server:
    def __init__(self, dispatcher: Dispatcher, frame_bytes_max: int) -> None:
        self.dispatcher = dispatcher
        self.frame_bytes_max = frame_bytes_max
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._accept, host, port, limit=READ_BYTES)
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._server:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # stop() ends connections mid-request (a long-polling Fetch, a waiting JoinGroup)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(self.frame_bytes_max)
        peer = writer.get_extra_info("peername")
        client_host = f"/{peer[0]}" if peer else ""  # Kafka shows hosts as "/address"
        try:
            while data := await reader.read(READ_BYTES):
                for frame in decoder.feed(data):
                    response = await self.dispatcher.handle(frame, client_host)
                    if response is not None:
                        writer.write(response)
                        await writer.drain()
            if decoder.pending_bytes:
                log.warning("closing connection from %s: it ended inside a frame (%d bytes pending)",
                            peer, decoder.pending_bytes)
        except (FrameError, ProtocolError) as error:
            log.warning("closing connection from %s: %s", peer, error)
        except ConnectionError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
