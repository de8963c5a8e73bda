"""Answers: a status, a body and its type, as bytes on the wire."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus

JSON_TYPE = "application/json"
Json = dict[str, object]


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self, keep_alive: bool, head_only: bool = False) -> bytes:
        reason = HTTPStatus(self.status).phrase if self.status in HTTPStatus._value2member_map_ else ""
        lines = [f"HTTP/1.1 {self.status} {reason}", f"Content-Type: {self.content_type}",
                 f"Content-Length: {len(self.body)}", "Connection: " + ("keep-alive" if keep_alive else "close"),
                 *(f"{name}: {value}" for name, value in self.headers.items())]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + self.body


def json_response(doc: Json, status: int = 200) -> Response:
    return Response(status, json.dumps(doc, ensure_ascii=False).encode())


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


class HttpError(Exception):
    """Raised by an endpoint: answered as {"error": message} with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
