"""The HTTP request parser: well-formed requests become Requests, anything else BadRequest with
the status to answer, and every limit holds. Bytes in, no sockets."""

from __future__ import annotations

import pytest

from martlet.gateway.http.parser import (
    BODY_BYTES_MAX,
    HEAD_BYTES_MAX,
    BadRequest,
    Head,
    body_length,
    parse,
    parse_head,
)


def test_a_get_with_a_query() -> None:
    request = parse(b"GET /api/v1/messages?topic=t%20x&partition=2&key= HTTP/1.1\r\nHost: a\r\n\r\n")
    assert request.method == "GET"
    assert request.path == "/api/v1/messages"
    assert request.query == {"topic": "t x", "partition": "2", "key": ""}
    assert request.headers == {"host": "a"}
    assert request.body == b""


def test_a_post_with_a_body_and_case_insensitive_fields() -> None:
    body = b'{"name": "t"}'
    request = parse(b"POST /api/v1/topics HTTP/1.1\r\nHOST: a\r\nContent-Length: 13\r\n"
                    b"Content-Type:application/json\r\n\r\n" + body + b"extra")
    assert request.body == body
    assert request.headers["content-type"] == "application/json"


def test_the_path_is_percent_decoded() -> None:
    assert parse(b"GET /api/v1/topics/a%2Eb HTTP/1.1\r\nHost: a\r\n\r\n").path == "/api/v1/topics/a.b"


@pytest.mark.parametrize(("version", "connection", "keep"), [
    ("HTTP/1.1", None, True), ("HTTP/1.1", "close", False), ("HTTP/1.1", "Close", False),
    ("HTTP/1.0", None, False), ("HTTP/1.0", "keep-alive", True)])
def test_keep_alive(version: str, connection: str | None, keep: bool) -> None:
    headers = {"host": "a"} | ({"connection": connection} if connection else {})
    assert Head("GET", "/", version, headers).keep_alive is keep


@pytest.mark.parametrize(("data", "status"), [
    (b"", 400),
    (b"GET\r\nHost: a", 400),
    (b"GET / HTTP/1.1 extra\r\nHost: a", 400),
    (b"GET  / HTTP/1.1\r\nHost: a", 400),
    (b"GET / HTTP/2.0\r\nHost: a", 505),
    (b"GET / SPDY/1\r\nHost: a", 400),
    (b"BREW / HTTP/1.1\r\nHost: a", 501),
    (b"G(T / HTTP/1.1\r\nHost: a", 400),
    (b"GET http://x/ HTTP/1.1\r\nHost: a", 400),
    (b"GET / HTTP/1.1", 400),  # HTTP/1.1 needs Host
    (b"GET / HTTP/1.1\r\nHost a", 400),
    (b"GET / HTTP/1.1\r\nHo st: a", 400),
    (b"GET / HTTP/1.1\r\n: a", 400),
    (b"GET /\xff HTTP/1.1\r\nHost: a", 400),
])
def test_malformed_heads(data: bytes, status: int) -> None:
    with pytest.raises(BadRequest) as raised:
        parse_head(data)
    assert raised.value.status == status


def test_head_limits() -> None:
    with pytest.raises(BadRequest) as raised:
        parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"y" * HEAD_BYTES_MAX)
    assert raised.value.status == 431
    with pytest.raises(BadRequest) as raised:
        parse_head(b"GET / HTTP/1.1\r\nHost: a" + b"\r\nX: y" * 200)
    assert raised.value.status == 431


@pytest.mark.parametrize(("fields", "status"), [
    ({"content-length": "x"}, 400), ({"content-length": "-1"}, 400),
    ({"content-length": str(BODY_BYTES_MAX + 1)}, 413), ({"transfer-encoding": "chunked"}, 411)])
def test_bad_bodies(fields: dict[str, str], status: int) -> None:
    with pytest.raises(BadRequest) as raised:
        body_length(Head("POST", "/", "HTTP/1.1", {"host": "a"} | fields))
    assert raised.value.status == status


def test_a_body_shorter_than_announced() -> None:
    with pytest.raises(BadRequest):
        parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab")


def test_a_target_that_is_not_utf8() -> None:
    with pytest.raises(BadRequest):
        parse(b"GET /%ff HTTP/1.1\r\nHost: a\r\n\r\n")
    with pytest.raises(BadRequest):
        parse(b"GET /?a=%ff HTTP/1.1\r\nHost: a\r\n\r\n")
