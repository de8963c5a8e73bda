"""One TCP connection to a broker: requests pipelined on it, answers matched to them by
correlation id (a broker answers one connection's requests in order, but nothing here
depends on that).

Kafka requests are built and read with the gateway's kio codec (martlet.protocol,
which imports no broker); Martlet's own (LAYOUT, WRITE) with protocol/native.py. A broken
connection fails every request waiting on it with Disconnected: whether the broker took a
request it was sending is then unknown, which the producer's resend protocol settles.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.codec import build, decode_response, encode_request, request_type
from ..protocol.sasl_client import Login, LoginRefused, login
from .errors import BrokerError, Disconnected

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
CONNECT_TIMEOUT_S = 10.0


class Connection:
    def __init__(self, host: str, port: int, client_id: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader, self._writer = reader, writer
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._broken: BaseException | None = None
        self._reading = asyncio.ensure_future(self._read_answers())

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float = CONNECT_TIMEOUT_S,
                   tls: ssl.SSLContext | None = None, sasl: Login | None = None) -> Connection:
        """Connect, with TLS when `tls` is given (the broker's name checked against `host`),
        and authenticated as `sasl` says (a broker's SASL listener): BrokerError
        SASL_AUTHENTICATION_FAILED if the broker refuses the login."""
        try:
            opening = asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls is not None else None)
            reader, writer = await asyncio.wait_for(opening, timeout_s)
        except (OSError, TimeoutError) as error:
            raise Disconnected(f"cannot connect to {host}:{port}: {error or type(error).__name__}") from error
        connection = cls(host, port, client_id, reader, writer)
        if sasl is not None:
            try:
                await asyncio.wait_for(login(connection.kafka, sasl), timeout_s)
            except LoginRefused as error:
                await connection.close()
                raise BrokerError(ErrorCode.sasl_authentication_failed, f"{host}:{port}: {error}") from None
            except (Disconnected, TimeoutError) as error:
                await connection.close()
                raise Disconnected(f"{host}:{port}: no SASL login: {error or type(error).__name__}") from error
        return connection

    @property
    def usable(self) -> bool:
        return self._broken is None and not self._writer.is_closing()

    def next_id(self) -> int:
        return next(self._ids)

    async def call(self, pieces: Sequence[bytes | bytearray | memoryview], correlation_id: int) -> bytes:
        """Send one request frame (its pieces in order) and return its answer frame, without
        the size prefix. Disconnected if the connection breaks first."""
        if self._broken is not None:
            raise Disconnected(f"{self.host}:{self.port}: {self._broken}")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        try:
            self._writer.writelines(pieces)
            await self._writer.drain()
        except (OSError, RuntimeError) as error:
            self._break(error)
        return await future

    async def kafka(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        """A Kafka request from a mapping of its fields (kio's names); its kio answer."""
        correlation_id = self.next_id()
        frame = encode_request(build(request_type(api_key, version), body), correlation_id, self.client_id)
        answer = await self.call([frame], correlation_id)
        return decode_response(answer, api_key, version)[1]

    async def close(self) -> None:
        self._break(ConnectionResetError("closed by the client"))
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        self._reading.cancel()

    async def _read_answers(self) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await self._reader.readexactly(_SIZE.size))
                frame = await self._reader.readexactly(size)
                (correlation_id,) = _CORRELATION.unpack_from(frame)
                future = self._waiting.pop(correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(frame)
        except (OSError, asyncio.IncompleteReadError, struct.error) as error:
            self._break(error)

    def _break(self, error: BaseException) -> None:
        if self._broken is None:
            self._broken = error
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(Disconnected(f"{self.host}:{self.port}: {error or type(error).__name__}"))
        self._writer.close()
