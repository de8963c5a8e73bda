"""A TCP proxy in front of one broker that can hold back chosen requests, for tests that need a
request to be sent by a client and never reach the broker (a commit in flight when the client
dies).

The broker is started with ``--advertised`` set to the proxy's address, so clients that
bootstrap anywhere end up sending everything through it. Each client connection gets one
upstream connection and two threads (client to broker frame by frame, broker to client as a
byte stream). While ``holding(predicate)`` is on, a request frame the predicate matches is
kept instead of forwarded, and its connection forwards nothing more (Kafka answers in order,
so a later request must not overtake it); ``drop_held()`` closes those connections, so the
broker never sees the held requests.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from martlet.protocol.codec import decode_request, peek_header

SIZE = struct.Struct(">i")
FRAME_BYTES_MAX = 128 * 1024 * 1024
JOIN_TIMEOUT_S = 10.0
LOOPBACK = "127.0.0.1"
END_TXN_KEY = 26


@dataclass
class Held:
    """A request frame kept back, and the connection it froze."""

    api_key: int
    api_version: int
    body: object
    client: socket.socket
    upstream: socket.socket


@dataclass
class _Pair:
    client: socket.socket
    upstream: socket.socket
    threads: list[threading.Thread] = field(default_factory=list)


Predicate = Callable[[int, int, object], bool]


def end_txn_commit(api_key: int, api_version: int, body: object) -> bool:
    """An EndTxn that commits (KIP-98): what Flink's committer sends on notifyCheckpointComplete."""
    return api_key == END_TXN_KEY and bool(getattr(body, "committed", False))


class HoldingProxy:
    def __init__(self) -> None:
        self.listener = socket.create_server((LOOPBACK, 0))
        self.target: tuple[str, int] | None = None
        self._predicate: Predicate | None = None
        self._lock = threading.Lock()
        self._held: list[Held] = []
        self._pairs: list[_Pair] = []
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.listener.getsockname()[1]}"

    def start(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self._acceptor.start()

    def holding(self, predicate: Predicate | None) -> None:
        """Hold requests that match `predicate` from now on (None: forward everything again)."""
        with self._lock:
            self._predicate = predicate

    def held(self) -> list[Held]:
        with self._lock:
            return list(self._held)

    def drop_held(self) -> None:
        """Close the connections of held requests: the broker never sees them."""
        with self._lock:
            held, self._held = self._held, []
        for item in held:
            _close(item.client, item.upstream)

    def close(self) -> None:
        self._closed = True
        # close() alone neither wakes a thread blocked in accept() nor stops the socket from
        # accepting (the kernel keeps it while accept runs); shutdown() does both on Linux.
        _close(self.listener)
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            _close(pair.client, pair.upstream)
        for thread in [self._acceptor, *(t for pair in pairs for t in pair.threads)]:
            if thread.is_alive():
                thread.join(JOIN_TIMEOUT_S)

    def _accept(self) -> None:
        assert self.target is not None
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:  # the broker is gone: so is this connection
                _close(client)
                continue
            pair = _Pair(client, upstream)
            pair.threads = [threading.Thread(target=self._requests, args=(pair,), daemon=True),
                            threading.Thread(target=_pipe, args=(upstream, client), daemon=True)]
            with self._lock:
                self._pairs.append(pair)
            for thread in pair.threads:
                thread.start()

    def _requests(self, pair: _Pair) -> None:
        """Client to broker, one frame at a time; stops at a held frame."""
        try:
            while (frame := _read_frame(pair.client)) is not None:
                if self._hold(frame, pair):
                    return
                pair.upstream.sendall(SIZE.pack(len(frame)) + frame)
        except OSError:
            pass
        _close(pair.client, pair.upstream)

    def _hold(self, frame: bytes, pair: _Pair) -> bool:
        with self._lock:
            predicate = self._predicate
        if predicate is None:
            return False
        header = peek_header(frame)
        body = _decode(frame, header.api_key, header.api_version)
        if body is None or not predicate(header.api_key, header.api_version, body):
            return False
        with self._lock:
            self._held.append(Held(header.api_key, header.api_version, body, pair.client, pair.upstream))
        return True


def _decode(frame: bytes, api_key: int, api_version: int) -> object | None:
    try:
        return decode_request(frame, api_key, api_version)[1]
    except Exception:  # an API kio does not know at that version: never held
        return None


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exactly(sock, SIZE.size)
    if head is None:
        return None
    (size,) = SIZE.unpack(head)
    if not 0 <= size <= FRAME_BYTES_MAX:  # not Kafka: the connection is closed, as a broker would
        return None
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    parts = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        count -= len(chunk)
    return b"".join(parts)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(1 << 16):
            sink.sendall(chunk)
    except OSError:
        pass
    _close(source, sink)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
