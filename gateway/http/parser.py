"""HTTP/1.1 requests from bytes (RFC 9112), with a limit on everything. No sockets here.

Only what the broker's API needs: a request line, header fields, and a body whose length
Content-Length gives (chunked bodies are refused with 411: no client of this API sends one).
Anything malformed raises `BadRequest` with the status to answer; the caller answers it and
closes the connection, and the server goes on serving others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

HEAD_BYTES_MAX = 16 << 10  # request line and header fields
BODY_BYTES_MAX = 1 << 20  # the largest request body (a topic's JSON is a few hundred bytes)
HEADERS_MAX = 100
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class BadRequest(Exception):
    """A request that cannot be served as sent; `status` is the answer's status code."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Head:
    """A request's line and header fields (names lower-cased; a repeated field keeps its last value)."""

    method: str
    target: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # percent-decoded
    query: dict[str, str]  # a repeated parameter keeps its last value
    headers: dict[str, str]
    body: bytes = b""


def parse_head(data: bytes) -> Head:
    """The head up to (not including) its blank line."""
    if len(data) > HEAD_BYTES_MAX:
        raise BadRequest("request head too large", 431)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("request head is not ASCII") from None
    lines = text.split("\r\n")
    method, target, version = _request_line(lines[0])
    if len(lines) - 1 > HEADERS_MAX:
        raise BadRequest("too many header fields", 431)
    headers = dict(_header_field(line) for line in lines[1:])
    if version == "HTTP/1.1" and "host" not in headers:
        raise BadRequest("HTTP/1.1 request without a Host header field")
    return Head(method, target, version, headers)


def _request_line(line: str) -> tuple[str, str, str]:
    parts = line.split(" ")
    if len(parts) != 3 or not all(parts):
        raise BadRequest(f"malformed request line {line[:80]!r}")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(f"unsupported protocol {version[:20]!r}", 505 if version.startswith("HTTP/") else 400)
    if not set(method) <= _TOKEN:
        raise BadRequest("malformed method")
    if method not in METHODS:
        raise BadRequest(f"method {method[:20]} not implemented", 501)
    if not target.startswith("/"):
        raise BadRequest("request target must be a path")
    return method, target, version


def _header_field(line: str) -> tuple[str, str]:
    name, colon, value = line.partition(":")
    if not colon or not name or not set(name) <= _TOKEN:
        raise BadRequest(f"malformed header field {line[:80]!r}")
    return name.lower(), value.strip(" \t")


def body_length(head: Head) -> int:
    """How many body bytes follow the head."""
    if "transfer-encoding" in head.headers:
        raise BadRequest("chunked request bodies are not supported: send Content-Length", 411)
    text = head.headers.get("content-length", "0")
    if not text.isdigit():
        raise BadRequest("malformed Content-Length")
    length = int(text)
    if length > BODY_BYTES_MAX:
        raise BadRequest(f"request body over {BODY_BYTES_MAX} bytes", 413)
    return length


def request_of(head: Head, body: bytes = b"") -> Request:
    parts = urlsplit(head.target)
    try:
        query = dict(parse_qsl(parts.query, keep_blank_values=True, errors="strict", max_num_fields=HEADERS_MAX))
        path = unquote(parts.path, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("request target is not UTF-8") from None
    return Request(head.method, path, query, head.headers, body)


def parse(data: bytes) -> Request:
    """A whole request (head, blank line, body) at once: what tests and the server share."""
    head_bytes, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise BadRequest("request head does not end")
    head = parse_head(head_bytes)
    length = body_length(head)
    if len(rest) < length:
        raise BadRequest("request body shorter than its Content-Length")
    return request_of(head, rest[:length])
