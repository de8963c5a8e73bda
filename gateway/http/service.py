"""The HTTP port put together: its routes, and binding it as the config says."""

from __future__ import annotations

import logging

from ..config import HTTP_DEFAULT, parse_address
from . import api, static
from .routes import Router
from .server import HttpServer
from .state import HttpState

logger = logging.getLogger(__name__)


def router_for(state: HttpState) -> Router:
    router = Router()
    api.add_routes(router, state)
    static.add_routes(router)
    return router


async def start_http(state: HttpState, listen: str) -> HttpServer | None:
    """Serve the HTTP port at `listen` ("HOST:PORT"); None when it is off, or when the default
    address is taken (a warning: another broker on this machine has it). Any other address
    that cannot be bound raises OSError with the reason."""
    if not listen:
        return None
    host, port = parse_address(listen)
    server = HttpServer(router_for(state))
    try:
        bound = await server.start(host, port)
    except OSError as error:
        if listen != HTTP_DEFAULT:
            raise OSError(f"cannot serve HTTP on {listen}: {error.strerror or error}") from None
        logger.warning("running without the HTTP port: the default %s is taken (%s); set [http] listen or --http",
                       listen, error.strerror or error)
        return None
    state.http = f"{bound[0]}:{bound[1]}"
    return server
