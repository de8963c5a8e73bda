"""The HTTP port's socket loop: one asyncio server on the broker's event loop.

Each connection reads a head (at most HEAD_BYTES_MAX), then the body its Content-Length
announces (at most BODY_BYTES_MAX), hands the request to the router and writes the answer;
connections are kept alive unless the client says otherwise, and closed after IDLE_S without a
request. A malformed request is answered with its 4xx status and the connection closed; an
endpoint's own failure is answered 500 (routes.py). Nothing a client sends ends the server.
At most CONNECTIONS_MAX connections are served at once; one more is answered 503 and closed.
A request guard.py refuses (a Host not naming this port, another origin's page, a change not
declared JSON) is answered with its status before any endpoint sees it, and logged (at most one
line each REFUSAL_LOG_S). Then the gate (login.py) asks who the request is, when [http] login
says it must, and answers the login endpoints.

With [http] tls the port speaks only TLS, with the [tls] certificate and key: each handshake
takes the context ServerContexts.current gives (gateway/tls.py), so a certificate replaced on
disk serves new connections within a second, as on the Kafka listeners. The server's own
context only hands each handshake over to that one (its SNI callback, which OpenSSL calls for
every ClientHello, with or without a server name). A client that does not speak TLS is closed
at its first bytes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable

from ..tls import ServerContexts, build
from .guard import Hosts, LogThrottle, refusal
from .login import Gate
from .parser import HEAD_BYTES_MAX, BadRequest, Request, body_length, parse_head, request_of
from .response import Response, error_response
from .routes import Router

logger = logging.getLogger(__name__)
IDLE_S = 60.0  # a kept-alive connection without a request is closed after this
BODY_S = 30.0  # the longest a body may take to arrive once its head has
END = b"\r\n\r\n"
CONNECTIONS_MAX = 256
LINGER_S = 2.0  # after an error answer, how long what the client still sends is read and dropped
LINGER_BYTES = 1 << 20
REFUSAL_LOG_S = 10.0  # a page refused in a loop gives one log line this often
HANDSHAKE_S = 10.0  # a TLS handshake not done by then closes the connection


class HttpServer:
    """`hosts` gives the names a request's Host may give (read for every request: the advertised
    name comes later); without it, those of the address `start` binds. `gate` decides who may
    go on to the routes (none: everyone); `tls` makes the port HTTPS."""

    def __init__(self, router: Router, connections_max: int = CONNECTIONS_MAX,
                 hosts: Callable[[], Hosts] | None = None, gate: Gate | None = None,
                 tls: ServerContexts | None = None) -> None:
        self.router = router
        self.connections_max = connections_max
        self.hosts = hosts
        self.gate = gate
        self.tls = tls
        self._refusals = LogThrottle(REFUSAL_LOG_S)
        self.connections = 0  # open now
        self.accepted = 0  # since start
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind and serve; OSError if the address cannot be bound."""
        self._server = await asyncio.start_server(self._accept, host, port, limit=HEAD_BYTES_MAX + len(END),
                                                  ssl=None if self.tls is None else _handing_over(self.tls),
                                                  ssl_handshake_timeout=None if self.tls is None else HANDSHAKE_S)
        bound = self._server.sockets[0].getsockname()
        if self.hosts is None:
            own = Hosts.of(host, [bound[0]])
            self.hosts = lambda: own
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        self.accepted += 1
        try:
            if self.connections > self.connections_max:
                await _answer(writer, error_response(503, "too many connections"), False)
                await _linger(reader, writer)
                return
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.connections -= 1
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head_bytes = await asyncio.wait_for(reader.readuntil(END), IDLE_S)
            except asyncio.LimitOverrunError:
                await _answer(writer, error_response(431, "request head too large"), False)
                await _linger(reader, writer)
                return
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            keep_alive = await self._one(reader, writer, head_bytes[:-len(END)])
            if not keep_alive:
                return

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head_bytes: bytes) -> bool:
        """Answer one request; whether the connection goes on."""
        try:
            head = parse_head(head_bytes)
            body = await asyncio.wait_for(reader.readexactly(body_length(head)), BODY_S)
            request = request_of(head, body)
        except BadRequest as bad:
            logger.info("bad HTTP request from %s: %s", writer.get_extra_info("peername"), bad)
            await _answer(writer, error_response(bad.status, str(bad)), False)
            await _linger(reader, writer)
            return False
        except (asyncio.IncompleteReadError, TimeoutError):
            return False
        peer = writer.get_extra_info("peername")
        response = self._refused(request, peer)
        if response is None and self.gate is not None:
            response = await self.gate.admit(request, _address(peer))
        if response is None:
            response = await self.router.handle(request)
        await _answer(writer, response, head.keep_alive, head_only=request.method == "HEAD")
        return head.keep_alive

    def _refused(self, request: Request, peer: object) -> Response | None:
        """The answer to a request guard.py refuses (logged, throttled), else None."""
        assert self.hosts is not None, "start() sets it"
        refused = refusal(request.method, request.path, request.headers, self.hosts())
        if refused is None:
            return None
        held = self._refusals.admit(time.monotonic())
        if held is not None:
            logger.warning("refused HTTP %s %r from %s: %d %s%s", request.method, request.path[:200], peer, *refused,
                           f" ({held} more refused since the last such line)" if held else "")
        return error_response(*refused)


def _handing_over(contexts: ServerContexts) -> ssl.SSLContext:
    """A server context that hands each handshake to the context current now (see above)."""
    front = build(contexts.settings)

    def current(connection: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext) -> None:
        connection.context = contexts.current()

    front.sni_callback = current
    return front


def _address(peer: object) -> str:
    """"host:port" of a peername (IPv4 or IPv6 tuple), for log lines."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)


async def _answer(writer: asyncio.StreamWriter, response: Response, keep_alive: bool, head_only: bool = False) -> None:
    writer.write(response.encode(keep_alive, head_only))
    await writer.drain()


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Before closing after an error answer: stop writing, then read and drop what the client
    still sends (bounded), so the close does not reset the connection before the client has
    read the answer (RFC 9112, 9.6)."""
    if writer.can_write_eof():
        writer.write_eof()
    try:
        async with asyncio.timeout(LINGER_S):
            dropped = 0
            while dropped < LINGER_BYTES and (chunk := await reader.read(65536)):
                dropped += len(chunk)
    except (TimeoutError, ConnectionError):
        pass
