"""The only socket code: accept connections, read frames, answer them in order.

Requests on one connection are handled one at a time, as Kafka does (it mutes a channel
until its response is sent), which keeps answers in request order. One exception: a produce
request that has appended its batches and only waits for C lets the connection go on to the
next request (gateway/ordering.py); its answer is written by the connection's answer writer,
which writes answers strictly in request order, and any other kind of request waits until
every earlier answer is out. At most PIPELINED_MAX answers wait per connection. A request
that arrives while its connection has nothing else to do is handled in the read callback
itself, and one that needs no wait is answered there (`_handle_now`); one that must wait goes
on in a task, taken up by the connection's serving task in its turn. A produce
request that has not appended yet when the peer goes away (it waits for room in memory) is
dropped: its producer resends it on a new connection, and appending both would store it twice. Reading goes
on while a request is handled, up to READ_AHEAD_BYTES of whole frames; then the connection
stops reading until the queue drains. A peer that sends something that is not a Kafka request is
disconnected with one log line; other connections are unaffected.

Each connection is an asyncio BufferedProtocol: the socket reads straight into the buffers
`FrameReader` hands out, so a large produce request is not copied on its way in. Reads go into
one chunk all connections share (the frames complete in it are copied out before the next
read), so an idle connection holds no read buffer; what connections do hold, frames on their
way in, frames read ahead and answers not yet taken by the socket, is `buffer_bytes`.

The server accepts connections itself, so that it can stop accepting: at max.connections (or
the share of the open-file limit connections may take) it waits until one ends, and a
connection from an address at its max.connections.per.ip is closed at once, as Kafka does
(gateway/connection_limits.py).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import socket
import ssl
import time
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import NamedTuple

from ..protocol.codec import ANONYMOUS, Peer, ProtocolError
from ..protocol.fetch_wire import Buffers
from ..protocol.framing import CHUNK_BYTES, FrameError, FrameReader, api_key_of
from .connection_limits import ConnectionLimits, client_ip, file_bound
from .dispatch import Dispatcher
from .ordering import handled_with, reset
from .principal_rules import NoMatchingRule
from .sasl import RECEIVE_BYTES_MAX, Authenticator, Closing, Verifier
from .tls import ServerContexts

logger = logging.getLogger(__name__)
READ_AHEAD_BYTES = 4 << 20  # whole frames read but not yet handled, per connection
PIPELINED_MAX = 32  # produce requests waiting for C, per connection
PRODUCE_KEY, SASL_HANDSHAKE_KEY, API_VERSIONS_KEY = 0, 17, 18
BACKLOG = 1024  # connections the kernel holds while none is accepted (capped by net.core.somaxconn)
ACCEPT_BATCH = 64  # connections accepted in one turn of the loop at most
RECHECK_S = 1.0  # while not accepting: how often the limits are read again (a dynamic change raises them)
HANDSHAKE_S = 10.0  # a TLS handshake not done by then closes the connection
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
REJECTED_LOG_S = 10.0  # after one line about a refused connection, the next comes this much later at the earliest


class Door(NamedTuple):
    """What a listener asks of its connections: its name, TLS (its contexts), SASL (what checks identities)."""

    listener: str = ""
    tls: ServerContexts | None = None
    sasl: Verifier | None = None


PLAIN_DOOR = Door()  # a PLAINTEXT listener's


class Server:
    def __init__(self, dispatcher: Dispatcher, frame_bytes_max: int,
                 limits: Callable[[], ConnectionLimits] = ConnectionLimits) -> None:
        self.dispatcher = dispatcher
        self.frame_bytes_max = frame_bytes_max
        self.limits = limits  # read at each accept: the dynamic configs may change them
        self.files_bound = file_bound()  # connections leave the rest of the open files to the store
        self.chunk = bytearray(CHUNK_BYTES)  # every connection's reads go here first (framing.py)
        self._sockets: list[tuple[socket.socket, Door]] = []  # listening, each for one listener
        self._loop: asyncio.AbstractEventLoop | None = None
        self._accepting = False
        self._recheck: asyncio.TimerHandle | None = None
        self._connections: set[Connection] = set()
        self._connecting: set[asyncio.Task[None]] = set()  # accepted, their transports being set up
        self._by_ip: collections.Counter[str] = collections.Counter()  # accepted and not ended, by address
        self._open = 0  # the same, in all
        self.accepted = 0  # connections since start (/metrics)
        self.rejected = 0  # connections closed at once: their address had its max.connections.per.ip
        self._rejected_logged = (-REJECTED_LOG_S, 0)  # when a refusal was last logged; refusals since

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def buffer_bytes(self) -> tuple[int, int]:
        """Memory connections hold for data: in (the shared chunk, frames on their way, frames
        read ahead) and out (answers the socket has not taken yet)."""
        held_in = len(self.chunk)
        held_out = 0
        for connection in self._connections:
            held_in += connection.reader.held_bytes + connection.queued_bytes
            if connection.transport is not None:
                held_out += connection.transport.get_write_buffer_size()
        return held_in, held_out

    async def start(self, host: str, port: int, door: Door = PLAIN_DOOR) -> tuple[str, int]:
        """Listen at (host, port) too, for one listener (gateway/listeners.py): with TLS when
        `door` gives contexts, with SASL when it gives settings; returns the address bound.
        Connection limits count every listener's connections."""
        self._loop = asyncio.get_running_loop()
        sock = _listen(host, port)
        self._stop_accepting()
        self._sockets.append((sock, door))
        self._accept_again()
        bound = sock.getsockname()
        return bound[0], bound[1]

    async def stop(self) -> None:
        self._stop_accepting()
        for sock, _ in self._sockets:
            sock.close()
        self._sockets = []
        for task in list(self._connecting):
            task.cancel()
        tasks = [c.task for c in self._connections if c.task is not None]
        for connection in list(self._connections):
            connection.abort()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- accepting -------------------------------------------------------------------------

    def _accept_ready(self, listening: socket.socket, door: Door) -> None:
        for _ in range(ACCEPT_BATCH):
            limits = self.limits()
            if self._open >= min(limits.total, self.files_bound):
                self._stop_accepting(recheck_s=RECHECK_S)  # they wait in the backlog, as at Kafka's acceptor
                return
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno not in OUT_OF_FILES:
                    continue  # that peer left before it was accepted (ECONNABORTED and the like)
                logger.error("cannot accept connections (%s): trying again in %.0f s", error, RECHECK_S)
                self._stop_accepting(recheck_s=RECHECK_S)
                return
            self._admit(sock, client_ip(peer[0]), limits, door)

    def _admit(self, sock: socket.socket, ip: str, limits: ConnectionLimits, door: Door) -> None:
        allowed = limits.of_ip(ip)
        if self._by_ip[ip] >= allowed:
            sock.close()
            self._log_rejected(ip, allowed)
            return
        self._by_ip[ip] += 1
        self._open += 1
        self.accepted += 1
        sock.setblocking(False)  # (asyncio's transports and uvloop's set TCP_NODELAY themselves)
        connection = Connection(self, ip, door)
        assert self._loop is not None
        task = self._loop.create_task(self._connect(sock, connection, door.tls))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, sock: socket.socket, connection: Connection, tls: ServerContexts | None) -> None:
        assert self._loop is not None
        try:
            if tls is None:
                await self._loop.connect_accepted_socket(lambda: connection, sock)
            else:
                await self._loop.connect_accepted_socket(lambda: connection, sock, ssl=tls.current(),
                                                         ssl_handshake_timeout=HANDSHAKE_S)
        except (OSError, asyncio.CancelledError) as error:  # the peer went away meanwhile, or the server stops
            if tls is not None and isinstance(error, OSError):  # no TLS client, a refused certificate, a timeout
                logger.info("TLS handshake with /%s on listener %s failed: %s", connection.ip,
                            connection.client.listener, _reason(error))
            sock.close()
            connection.release()

    def released(self, connection: Connection) -> None:
        """`connection` ended: its place (and its address's) is free."""
        self._by_ip[connection.ip] -= 1
        if self._by_ip[connection.ip] <= 0:
            del self._by_ip[connection.ip]
        self._open -= 1
        self._connections.discard(connection)
        if not self._accepting and self._recheck is not None:
            self._accept_again()

    def _accept_again(self) -> None:
        self._recheck = None
        if self._sockets and self._loop is not None and not self._accepting:
            for sock, door in self._sockets:
                self._loop.add_reader(sock.fileno(), self._accept_ready, sock, door)
            self._accepting = True

    def _stop_accepting(self, recheck_s: float | None = None) -> None:
        if self._accepting and self._loop is not None:
            for sock, _ in self._sockets:
                self._loop.remove_reader(sock.fileno())
        self._accepting = False
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
        if recheck_s is not None and self._loop is not None:
            self._recheck = self._loop.call_later(recheck_s, self._accept_again)

    def _log_rejected(self, ip: str, allowed: int) -> None:
        """Kafka's line for a refused connection; a client refused in a loop gets one line
        per REJECTED_LOG_S, with the count of those refused since."""
        self.rejected += 1
        last, unlogged = self._rejected_logged
        now = time.monotonic()
        if now - last < REJECTED_LOG_S:
            self._rejected_logged = (last, unlogged + 1)
            return
        since = f" ({unlogged} more refused since the last line)" if unlogged else ""
        logger.info("Rejected connection from /%s, address already has the configured maximum of %d connections.%s",
                    ip, allowed, since)
        self._rejected_logged = (now, 0)


def _reason(error: OSError) -> str:
    """A failed handshake in a few words: the TLS alert or error's reason, else the error."""
    if isinstance(error, ssl.SSLError) and error.reason:
        if error.reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNSUPPORTED_PROTOCOL"):
            return f"{error.reason} (no TLS client: a plaintext client on a TLS listener?)"
        if isinstance(error, ssl.SSLCertVerificationError):
            return f"{error.reason}: the client's certificate: {error.verify_message}"
        return error.reason
    return str(error) or type(error).__name__


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on the first address `host` names ("" or "0.0.0.0": every IPv4 one)."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Connection(asyncio.BufferedProtocol):
    # An idle connection is this object, its reader, its serving task and its transport (a
    # few KB in all, tests/integration/test_connections.py): slots, and futures made only
    # while someone waits, keep it small.
    __slots__ = ("server", "ip", "_released", "reader", "frames", "queued_bytes", "peer", "client", "transport",
                 "task", "_wake", "_write_waiters", "_reading_paused", "_ended", "_lost", "_answering", "_writer",
                 "_waiting", "_tls", "_sasl", "_gate", "_mechanism", "_session_end")

    def __init__(self, server: Server, ip: str, door: Door = PLAIN_DOOR) -> None:
        self.server = server
        self.ip = ip  # counted under it (max.connections.per.ip)
        self._released = False
        self.reader = FrameReader(server.frame_bytes_max, server.chunk)
        self.frames: collections.deque[_Queued] = collections.deque()
        self.queued_bytes = 0
        self.peer = "?"  # "host:port" of the client, for log lines
        self.client = Peer("", door.listener)  # who sent the requests, for the handlers
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None  # the serving task waits for a frame (or the end)
        self._write_waiters: list[asyncio.Future[None]] | None = None  # while the socket takes no more: who waits
        self._reading_paused = False
        self._ended = False  # EOF or connection lost: no more frames will come
        self._lost = False
        # Answers in request order (PIPELINED_MAX at most): a produce request's task, or an
        # answer that was ready while earlier ones still waited.
        self._answering: list[asyncio.Task[Buffers | None] | Buffers | None] = []
        self._writer: asyncio.Task[None] | None = None  # writes the answers of _answering
        self._waiting: asyncio.Task[Buffers | None] | None = None  # the produce that has not appended yet
        self._tls = door.tls  # a TLS listener's: its principal mapping rules
        self._sasl = door.sasl  # a SASL listener's settings
        # While set, frames go to the SASL exchange (gateway/sasl.py): before authentication,
        # while re-authenticating, and once the session has ended (the next request closes).
        self._gate: Authenticator | None = None
        self._mechanism = ""  # the SASL mechanism the connection authenticated with
        self._session_end: asyncio.TimerHandle | None = None  # KIP-368: when its session ends

    # -- protocol callbacks (the event loop calls these) ----------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass
        peer = transport.get_extra_info("peername")
        try:  # a TLS client's certificate names its principal
            who = ANONYMOUS if self._tls is None else self._tls.principal(transport.get_extra_info("peercert"))
        except NoMatchingRule as error:
            logger.info("closing connection from /%s on listener %s: %s", self.ip, self.client.listener, error)
            self.abort()
            return
        if isinstance(peer, tuple):
            self.peer = f"{peer[0]}:{peer[1]}"
            self.client = Peer(f"/{peer[0]}", self.client.listener, who)  # Kafka shows hosts as "/address"
        if self._sasl is not None:
            self._gate = Authenticator(self._sasl, self.client)
            self.reader.frame_bytes_max = min(RECEIVE_BYTES_MAX, self.server.frame_bytes_max)
        self.server._connections.add(self)
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
        if not frames:
            return
        queued: Sequence[_Queued] = self._handle_now(frames) if self._gate is None and self._idle() else frames
        if queued:
            self.frames.extend(queued)
            self.queued_bytes += sum(len(f) for f in queued if type(f) is bytearray)
            self._wake_up()
            if self.queued_bytes > READ_AHEAD_BYTES and self.transport is not None:
                self.transport.pause_reading()
                self._reading_paused = True

    def eof_received(self) -> bool:
        self._end()
        # Keep the transport open: answers to queued requests still go out. TLS cannot
        # half-close: there the peer's end ends the connection.
        return self.transport is not None and self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True  # requests read but not yet handled are dropped, as Kafka drops them
        self._end()
        self.resume_writing()
        self.release()

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.server.released(self)

    def pause_writing(self) -> None:
        if self._write_waiters is None:
            self._write_waiters = []

    def resume_writing(self) -> None:
        waiters, self._write_waiters = self._write_waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    # -- serving ---------------------------------------------------------------------------

    def abort(self) -> None:
        self._end()
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()

    def _end(self) -> None:
        self._ended = True
        if self._session_end is not None:
            self._session_end.cancel()
        self._wake_up()
        if self._waiting is not None:  # a produce that has not appended yet (waiting for room)
            self._waiting.cancel()  # appends nothing now: its producer resends it elsewhere

    def _idle(self) -> bool:
        """The serving task waits for a frame with nothing queued, no answer pending and the
        socket taking more: a frame that arrives now may be handled at once."""
        wake = self._wake
        return (wake is not None and not wake.done() and not self.frames and not self._answering
                and self._write_waiters is None)

    def _handle_now(self, frames: list[bytearray]) -> Sequence[_Queued]:
        """Handle frames as they arrive, in the read callback, while each is answered without
        suspending (the usual case: a produce with room in memory, a fetch with data, a
        metadata request), so an answer leaves in the loop turn its request came in without a
        wake-up of the serving task (issue 47: one request in flight). The first that
        suspends goes on in a task of its own, and it and the frames after it go to the
        serving task in order; so does the error of one that fails."""
        for index, frame in enumerate(frames):
            key = api_key_of(frame)
            if key == SASL_HANDSHAKE_KEY and self._reauthenticates():
                return frames[index:]  # re-authentication: the serving task runs it in turn
            release = _Release() if key == PRODUCE_KEY else None
            try:
                outcome = self._start(frame, release)
            except Exception as error:  # noqa: BLE001 - the serving task raises it, as if it had run it
                return [_Failed(error), *frames[index + 1:]]
            if not isinstance(outcome, asyncio.Task):
                self._write(outcome)
                if self._write_waiters is None:
                    continue
                return frames[index + 1:]
            if release is not None and not release.done:
                self._waiting = outcome  # not appended yet: the connection's end cancels it
            return [_Started(outcome, release), *frames[index + 1:]]
        return []

    def _start(self, frame: bytearray, release: _Release | None) -> Buffers | None | asyncio.Task[Buffers | None]:
        """Run a request eagerly, here: its answer if it needs no wait, else the task that goes
        on with it from where it suspended. A produce request calls `release` once appended."""
        token = handled_with(release)
        try:
            handling = self.server.dispatcher.handle(frame, self.client)
            try:
                waiting_on = handling.send(None)
            except StopIteration as done:
                answer: Buffers | None = done.value
                return answer
            return asyncio.get_running_loop().create_task(_resumed(handling, waiting_on))
        finally:
            reset(token)

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

    async def _take(self, queued: _Queued) -> None:
        if isinstance(queued, _Started):
            if queued.release is not None:
                await self._produced(queued.task, queued.release)
            else:
                self._write(await queued.task)  # nothing was pending when it started
        elif isinstance(queued, _Failed):
            raise queued.error
        elif self._gate is not None or ((key := api_key_of(queued)) == SASL_HANDSHAKE_KEY and self._reauthenticates()):
            await self._written()
            await self._authenticate(queued)
        elif key == PRODUCE_KEY:
            await self._produce(queued)
        else:
            await self._written()
            self._write(await self.server.dispatcher.handle(queued, self.client))
        if self._write_waiters is not None:
            await self._writable()

    async def _authenticate(self, frame: bytearray) -> None:
        """One frame of a SASL exchange (gateway/sasl.py); ConnectionAbortedError ends the connection."""
        assert self._sasl is not None
        gate = self._gate
        if gate is None:  # SaslHandshake on an authenticated connection: it authenticates again
            gate = self._gate = Authenticator(self._sasl, self.client, self.client.principal, self._mechanism)
        if gate.waiting_handshake and not gate.previous and not gate.versions_done and \
                api_key_of(frame) == API_VERSIONS_KEY:  # once, before the handshake (a second one closes, as at Kafka)
            self._write(await self.server.dispatcher.handle(frame, self.client))
            gate.versions_done = self.server.dispatcher.serves(frame)
            return
        try:
            step = await gate.take(frame)
        except Closing as why:
            logger.info("closing connection from %s on listener %s: %s", self.peer, self.client.listener, why)
            raise ConnectionAbortedError from None
        if step.failed:
            logger.info("Failed authentication with /%s on listener %s (%s)", self.ip, self.client.listener,
                        step.failed)
            await asyncio.sleep(self._sasl.settings.failed_authentication_delay_ms / 1000)
            self._write(None if step.answer is None else [step.answer])
            raise ConnectionAbortedError
        self._write(None if step.answer is None else [step.answer])
        if step.principal is not None:
            self._authenticated(step.principal, gate.mechanism, step.lifetime_ms)

    def _reauthenticates(self) -> bool:
        """KIP-368: SaslHandshake on an authenticated connection starts a re-authentication
        where sessions end (connections_max_reauth_ms); elsewhere Kafka answers it ILLEGAL_SASL_STATE."""
        return self._sasl is not None and self._sasl.settings.connections_max_reauth_ms > 0

    def _authenticated(self, principal: str, mechanism: str, lifetime_ms: int) -> None:
        self._gate = None
        self._mechanism = mechanism
        self.client = Peer(self.client.host, self.client.listener, principal)
        self.reader.frame_bytes_max = self.server.frame_bytes_max
        if self._session_end is not None:
            self._session_end.cancel()
            self._session_end = None
        if lifetime_ms > 0:
            self._session_end = asyncio.get_running_loop().call_later(lifetime_ms / 1000, self._session_over)

    def _session_over(self) -> None:
        """KIP-368: the session ended without a re-authentication; the next request closes."""
        self._session_end = None
        if self._gate is None and self._sasl is not None:
            self._gate = Authenticator(self._sasl, self.client, self.client.principal, self._mechanism, expired=True)

    def _stop_answering(self) -> None:
        for queued in self._answering:
            if isinstance(queued, asyncio.Future):
                queued.cancel()
        for waiting in self.frames:
            if type(waiting) is _Started:
                waiting.task.cancel()
        if self._writer is not None:
            self._writer.cancel()

    async def _produce(self, frame: bytearray) -> None:
        """Run a produce request until it is answered or has appended; in the second case the
        rest of it runs as a task whose answer the writer writes in turn.

        It starts eagerly, in this task: an acks=1 request with room in memory (the usual
        case) is answered without ever suspending, and so without a task, a future or a
        wait of its own (each request paid those before: issue 47)."""
        release = _Release()
        outcome = self._start(frame, release)
        if isinstance(outcome, asyncio.Task):
            await self._produced(outcome, release)
        else:
            self._answer(outcome)

    async def _produced(self, task: asyncio.Task[Buffers | None], release: _Release) -> None:
        """A produce request that suspended: its answer joins the queue; the connection goes
        on once it has appended."""
        self._queue(task)
        if not release.done:  # not appended yet: it waits (for room in memory, a topic, a partition)
            self._waiting = task
            try:
                release.waiter = asyncio.get_running_loop().create_future()
                await asyncio.wait((task, release.waiter), return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._waiting = None
        await self._pipelined_below_max()

    def _answer(self, answer: Buffers | None) -> None:
        """An answer ready now: written at once unless earlier ones still wait."""
        if self._answering:
            self._answering.append(answer)
        else:
            self._write(answer)

    def _queue(self, task: asyncio.Task[Buffers | None]) -> None:
        self._answering.append(task)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_answers())
            self._writer.add_done_callback(lambda _: self._wake_up())  # a failure ends the wait for frames

    async def _pipelined_below_max(self) -> None:
        writer = self._writer
        assert writer is not None
        while len(self._answering) > PIPELINED_MAX and not writer.done():
            head = self._answering[0]
            waits = (writer, head) if isinstance(head, asyncio.Future) else (writer,)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if writer.done():
            writer.result()  # the writer failed: raise its error here

    async def _write_answers(self) -> None:
        while self._answering:
            head = self._answering[0]
            answer = await head if isinstance(head, asyncio.Future) else head
            del self._answering[0]
            self._write(answer)
            if self._write_waiters is not None:
                await self._writable()

    async def _writable(self) -> None:
        """Return once the socket takes more (its buffer drained below the low-water mark)."""
        if self._write_waiters is not None:
            waiter = asyncio.get_running_loop().create_future()
            self._write_waiters.append(waiter)
            await waiter

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _written(self) -> None:
        """Return once every answer handed to the writer is written (raise its error)."""
        if self._writer is not None:
            await self._writer

    def _write(self, response: Buffers | None) -> None:
        if response is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(response)  # records go out without being joined

    async def _next_frame(self) -> _Queued | None:
        while not self.frames or self._lost:
            if self._writer is not None and self._writer.done() and not self._writer.cancelled():
                self._writer.result()  # an answer failed: its error ends the connection now
            if self._ended:
                return None
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        frame = self.frames.popleft()
        if type(frame) is bytearray:
            self.queued_bytes -= len(frame)
        if self._reading_paused and self.queued_bytes <= READ_AHEAD_BYTES // 2 and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        return frame


class _Release:
    """What `next_request_may_start` calls for one produce request: it has appended."""

    __slots__ = ("done", "waiter")

    def __init__(self) -> None:
        self.done = False
        self.waiter: asyncio.Future[None] | None = None  # set while the connection waits for it

    def __call__(self) -> None:
        self.done = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class _Started(NamedTuple):
    """A request handled as it arrived (Connection._handle_now) that suspended: the task
    that goes on with it, and for a produce request what it calls once it has appended."""

    task: asyncio.Task[Buffers | None]
    release: _Release | None


class _Failed(NamedTuple):
    """A request handled as it arrived that raised: the serving task raises it in turn."""

    error: Exception


_Queued = bytearray | _Started | _Failed  # what waits for the serving task, in request order


@types.coroutine
def _resumed(handling: Coroutine[object, None, Buffers | None],
             waiting_on: object) -> Generator[object, None, Buffers | None]:
    """The rest of a coroutine that ran eagerly until it suspended on `waiting_on` (what it
    yielded to the event loop): a task runs it from there, as if it had run it from the start
    (Python 3.12's eager tasks do the same)."""
    try:
        yield waiting_on
    except GeneratorExit:
        handling.close()
        raise
    except BaseException as error:  # noqa: BLE001 - cancelled while it waited: the coroutine hears it
        try:
            waiting_on = handling.throw(error)
        except StopIteration as done:
            answer: Buffers | None = done.value
            return answer
        return (yield from _resumed(handling, waiting_on))
    answered: Buffers | None = yield from handling  # a native coroutine, driven from a generator coroutine
    return answered
