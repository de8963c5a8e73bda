"""From one request frame to one response frame (or none, for acks=0). No sockets here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .protocol.codec import (
    API_VERSIONS_KEY,
    ProtocolError,
    build,
    build_response,
    decode_request,
    encode_response,
    peek_header,
    response_type,
    RequestHeader,
)
from .protocol.produce_wire import decode_produce, encode_produce_response
from .handlers.registry import Api

# APIs read and written by hand instead of through kio, for speed (held to kio by tests)
HAND_WRITTEN: dict[int, tuple[Callable[..., tuple[RequestHeader, Any]], Callable[[RequestHeader, Any], bytes]]] = {
    0: (decode_produce, encode_produce_response),
}
from .handlers.versions import unsupported_version_body


class Dispatcher:
    def __init__(self, ctx: Any, apis: dict[int, Api]) -> None:
        self.ctx = ctx
        self.apis = apis

    async def handle(self, frame: bytes | memoryview, client_host: str = "") -> bytes | None:
        peeked = peek_header(frame)
        api = self.apis.get(peeked.api_key)
        if api is None:
            raise ProtocolError(f"unknown api key {peeked.api_key}")
        if not api.serves(peeked.api_version):
            if peeked.api_key == API_VERSIONS_KEY:
                return encode_response(peeked, build(response_type(API_VERSIONS_KEY, 0), unsupported_version_body()))
            raise ProtocolError(f"api {peeked.api_key} version {peeked.api_version} is not supported")
        wire = HAND_WRITTEN.get(peeked.api_key)
        if wire is not None:
            header, body = wire[0](frame, peeked.api_version, client_host)
        else:
            header, body = decode_request(frame, peeked.api_key, peeked.api_version, client_host)
        answer = await api.handler(self.ctx, header, body)
        if answer is None:
            return None
        if wire is not None:
            return wire[1](header, answer)
        return encode_response(header, build_response(header, answer))
