"""The HTTP port put together: its routes, and binding it as the config says."""

from __future__ import annotations

import logging

from ..config import HTTP_DEFAULT, parse_address
from . import api, groups, messages, metrics, static
from .routes import Router
from .server import HttpServer
from .state import HttpState

logger = logging.getLogger(__name__)


def router_for(state: HttpState, history: groups.LagHistory) -> Router:
    router = Router()
    api.add_routes(router, state)
    groups.add_routes(router, state, history)
    messages.add_routes(router, state)
    metrics.add_routes(router, state)
    static.add_routes(router)
    return router


class HttpPort:
    """The served port and what runs with it (the group lag sampler)."""

    def __init__(self, server: HttpServer, history: groups.LagHistory) -> None:
        self.server = server
        self.history = history

    async def stop(self) -> None:
        await self.history.stop()
        await self.server.stop()


async def start_http(state: HttpState, listen: str) -> HttpPort | None:
    """Serve the HTTP port at `listen` ("HOST:PORT"); None when it is off, or when the default
    address is taken (a warning: another broker on this machine has it). Any other address
    that cannot be bound raises OSError with the reason."""
    if not listen:
        return None
    host, port = parse_address(listen)
    history = groups.LagHistory(state)
    server = HttpServer(router_for(state, history))
    try:
        bound = await server.start(host, port)
    except OSError as error:
        if listen != HTTP_DEFAULT:
            raise OSError(f"cannot serve HTTP on {listen}: {error.strerror or error}") from None
        logger.warning("running without the HTTP port: the default %s is taken (%s); set [http] listen or --http",
                       listen, error.strerror or error)
        return None
    state.http = f"{bound[0]}:{bound[1]}"
    state.http_connections = lambda: (server.connections, server.accepted)
    history.start()
    return HttpPort(server, history)
