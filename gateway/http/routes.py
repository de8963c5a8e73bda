"""Requests to endpoints: a method and a path pattern each; unknown paths 404, known paths
with another method 405, an endpoint's HttpError its status, anything else 500 (logged)."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from .parser import Request
from .response import HttpError, Response, error_response

logger = logging.getLogger(__name__)
Endpoint = Callable[[Request, tuple[str, ...]], Awaitable[Response]]


class Router:
    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Endpoint]] = []

    def add(self, method: str, pattern: str, endpoint: Endpoint) -> None:
        """`pattern` is a regular expression for the whole path; its groups are the endpoint's arguments."""
        self._routes.append((method, re.compile(pattern), endpoint))

    def methods(self, path: str) -> list[str]:
        return [method for method, pattern, _ in self._routes if pattern.fullmatch(path)]

    async def handle(self, request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        for wanted, pattern, endpoint in self._routes:
            match = pattern.fullmatch(request.path)
            if match is not None and wanted == method:
                return await _call(endpoint, request, match.groups())
        allowed = self.methods(request.path)
        if allowed:
            return _with(error_response(405, f"{request.method} is not allowed here"), "Allow", ", ".join(allowed))
        return error_response(404, f"no such path: {request.path}")


async def _call(endpoint: Endpoint, request: Request, args: tuple[str, ...]) -> Response:
    try:
        return await endpoint(request, args)
    except HttpError as error:
        return error_response(error.status, str(error))
    except Exception:
        logger.exception("HTTP %s %s failed", request.method, request.path)
        return error_response(500, "internal error (see the broker's log)")


def _with(response: Response, name: str, value: str) -> Response:
    response.headers[name] = value
    return response
