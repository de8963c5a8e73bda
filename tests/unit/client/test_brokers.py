"""Brokers keeps every connection it opens until it closes them, even one whose callers all
went away while it was being opened."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Coroutine
from typing import Any

from martlet.client.brokers import Brokers

Accepted = list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
WAIT_S = 5.0


async def _server() -> tuple[asyncio.Server, int, Accepted]:
    accepted: Accepted = []

    async def take(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append((reader, writer))

    server = await asyncio.start_server(take, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], accepted


async def _all_closed(server: asyncio.Server, accepted: Accepted) -> None:
    """Every connection the client opened was closed: the server reads its end of each."""
    for reader, writer in accepted:
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
        writer.close()
    server.close()
    await server.wait_closed()


def _run(scenario: Coroutine[Any, Any, None]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        asyncio.run(scenario)
        gc.collect()  # an unclosed transport or socket would warn (an error here) when collected


def test_a_connection_whose_caller_was_cancelled_is_kept_and_closed_with_the_rest() -> None:
    async def scenario() -> None:
        server, port, accepted = await _server()
        brokers = Brokers(f"127.0.0.1:{port}", "test", 5.0)
        waiting = asyncio.ensure_future(brokers.at("127.0.0.1", port))
        await asyncio.sleep(0)  # the opening has started
        waiting.cancel()  # the only caller gives up while the connection is being opened
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not accepted:  # the opening goes on without it and connects
            assert asyncio.get_running_loop().time() < deadline, "never connected"
            await asyncio.sleep(0.01)
        again = await brokers.at("127.0.0.1", port)
        assert again.usable and (await brokers.at("127.0.0.1", port)) is again
        await brokers.close()
        assert not again.usable
        await _all_closed(server, accepted)

    _run(scenario())


def test_closing_while_a_connection_is_being_opened_closes_it_too() -> None:
    async def scenario() -> None:
        server, port, accepted = await _server()
        brokers = Brokers(f"127.0.0.1:{port}", "test", 5.0)
        waiting = asyncio.ensure_future(brokers.at("127.0.0.1", port))
        await asyncio.sleep(0)
        await brokers.close()
        try:
            connection = await waiting
        except asyncio.CancelledError:
            connection = None
        assert connection is None or not connection.usable
        await _all_closed(server, accepted)

    _run(scenario())
