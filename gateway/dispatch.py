"""From one request frame to one response frame, as buffers (or none, for acks=0). No sockets here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .handlers.registry import Api
from .handlers.versions import unsupported_version_body
from .protocol.codec import (
    API_VERSIONS_KEY,
    ProtocolError,
    RequestHeader,
    build,
    build_response,
    decode_request,
    encode_response,
    peek_header,
    response_type,
)
from .protocol.fetch_wire import Buffers, encode_fetch_response
from .protocol.produce_wire import decode_produce, encode_produce_response

# APIs read or written by hand instead of through kio, for speed (held to kio by tests)
Decoder = Callable[[bytes | bytearray | memoryview, int, str, int], tuple[RequestHeader, Any]]  # frame, version, host, key
HAND_DECODERS: dict[int, Decoder] = {0: decode_produce}
HAND_ENCODERS: dict[int, Callable[[RequestHeader, Any], bytes | Buffers]] = {
    0: encode_produce_response, 1: encode_fetch_response}


class Dispatcher:
    def __init__(self, ctx: Any, apis: dict[int, Api]) -> None:
        self.ctx = ctx
        self.apis = apis

    async def handle(self, frame: bytes | bytearray | memoryview, client_host: str = "") -> Buffers | None:
        """The response frame as buffers to write in order (None: no answer, acks=0)."""
        peeked = peek_header(frame)
        api = self.apis.get(peeked.api_key)
        if api is None:
            raise ProtocolError(f"unknown api key {peeked.api_key}")
        if not api.serves(peeked.api_version):
            if peeked.api_key == API_VERSIONS_KEY:
                return [encode_response(peeked, build(response_type(API_VERSIONS_KEY, 0), unsupported_version_body()))]
            raise ProtocolError(f"api {peeked.api_key} version {peeked.api_version} is not supported")
        decode = HAND_DECODERS.get(peeked.api_key, _kio_decode)
        header, body = decode(frame, peeked.api_version, client_host, peeked.api_key)
        answer = await api.handler(self.ctx, header, body)
        if answer is None:
            return None
        encode = HAND_ENCODERS.get(peeked.api_key)
        encoded = encode(header, answer) if encode else encode_response(header, build_response(header, answer))
        return encoded if isinstance(encoded, list) else [encoded]


def _kio_decode(frame: bytes | bytearray | memoryview, version: int, client_host: str,
                api_key: int) -> tuple[RequestHeader, Any]:
    return decode_request(frame, api_key, version, client_host)
