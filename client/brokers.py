"""The brokers a client talks to: one connection per address, opened on first use and again
after it broke; the bootstrap addresses tried in turn for requests any broker answers."""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from typing import Any

from ..protocol.native import TopicLayout, decode_layout_answer, layout_request
from ..protocol.sasl_client import Login
from .connection import Connection
from .errors import Disconnected

RETRY_PAUSE_S = 0.1


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    """"host:port,host:port" as pairs; ValueError for a malformed one."""
    found = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap address {item!r} is not host:port")
        found.append((host, int(port)))
    return found


class Brokers:
    def __init__(self, bootstrap: str, client_id: str, timeout_s: float, tls: ssl.SSLContext | None = None,
                 sasl: Login | None = None) -> None:
        self.bootstrap = addresses(bootstrap)
        self.client_id = client_id
        self.tls = tls  # every connection uses TLS with it (a broker's SSL listener)
        self.sasl = sasl  # every connection authenticates so (a broker's SASL listener)
        self.timeout_s = timeout_s  # how long a call may look for a broker that answers
        self._connections: dict[tuple[str, int], Connection] = {}
        self._opening: dict[tuple[str, int], asyncio.Task[Connection]] = {}
        self._closed = False

    async def at(self, host: str, port: int) -> Connection:
        """The connection to host:port, opened (once, however many ask at the same time) if needed."""
        address = (host, port)
        connection = self._connections.get(address)
        if connection is not None and connection.usable:
            return connection
        task = self._opening.get(address)
        if task is None:
            task = self._opening[address] = asyncio.ensure_future(
                Connection.open(host, port, self.client_id, tls=self.tls, sasl=self.sasl))
            task.add_done_callback(functools.partial(self._opened, address))
        return await asyncio.shield(task)

    def _opened(self, address: tuple[str, int], task: asyncio.Task[Connection]) -> None:
        """An opening ended. Its connection is kept here even when every caller waiting for it
        was cancelled meanwhile (a writer stopped mid-retry): nobody else would ever close it,
        and its socket would outlive the loop. Once these brokers are closed it is closed too."""
        self._opening.pop(address, None)
        if task.cancelled() or task.exception() is not None:
            return
        connection = task.result()
        if self._closed:
            asyncio.ensure_future(connection.close())
            return
        replaced = self._connections.get(address)
        self._connections[address] = connection
        if replaced is not None and replaced is not connection:
            asyncio.ensure_future(replaced.close())  # broken already; this releases its socket now

    async def any(self) -> Connection:
        """A connection to the first bootstrap address that takes one, retried until timeout_s."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            for host, port in self.bootstrap:
                try:
                    return await self.at(host, port)
                except Disconnected as error:
                    last = error
            if time.monotonic() >= deadline:
                raise last
            await asyncio.sleep(RETRY_PAUSE_S)

    async def kafka(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """A Kafka request any broker answers (admin, metadata), sent to the first that takes it."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return await (await self.any()).kafka(api_key, version, body)
            except Disconnected:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(RETRY_PAUSE_S)

    async def layout(self, topics: list[str], connection: Connection | None = None) -> list[TopicLayout]:
        """LAYOUT of these topics (names or resource names)."""
        connection = connection or await self.any()
        correlation_id = connection.next_id()
        answer = await connection.call([layout_request(topics, correlation_id, self.client_id)], correlation_id)
        return decode_layout_answer(answer)[1]

    async def close(self) -> None:
        """Close every connection, and any still being opened."""
        self._closed = True
        opening = list(self._opening.values())
        for task in opening:
            task.cancel()
        opened = await asyncio.gather(*opening, return_exceptions=True)
        connections, self._connections = self._connections, {}
        for connection in [*connections.values(), *(c for c in opened if isinstance(c, Connection))]:
            await connection.close()
