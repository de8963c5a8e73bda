"""How a broker reads another broker's HTTP answer (gateway/http/brokers.py): only a 200 with a
JSON object, a Content-Length and bounded sizes pass; everything else is a PeerError that says why."""

from __future__ import annotations

import pytest

from martlet.gateway.http.brokers import PEER_BODY_BYTES_MAX, PeerError, _host_field, _json_object, _read_head
from martlet.gateway.http.guard import Hosts, host_name


def test_a_status_answer_reads() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 12\r\nConnection: close"
    assert _read_head(head) == (200, 12)
    assert _json_object(200, b'{"node_id":2}') == {"node_id": 2}


@pytest.mark.parametrize(("head", "why"), [
    (b"SSH-2.0-OpenSSH_9.2", "not an HTTP answer"),
    (b"HTTP/1.1 OK", "not an HTTP answer"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "no Content-Length"),
    (f"HTTP/1.1 200 OK\r\nContent-Length: {PEER_BODY_BYTES_MAX + 1}".encode(), "is over"),
])
def test_other_heads_are_refused(head: bytes, why: str) -> None:
    with pytest.raises(PeerError, match=why):
        _read_head(head)


@pytest.mark.parametrize(("status", "body", "why"), [
    (404, b'{"error": "no such path: /api/v1/status"}', "answered 404: no such path"),
    (500, b"<html>", "not JSON"),
    (200, b"[1, 2]", "other than a JSON object"),
    (200, b"\xff", "not JSON"),
])
def test_other_bodies_are_refused(status: int, body: bytes, why: str) -> None:
    with pytest.raises(PeerError, match=why):
        _json_object(status, body)


@pytest.mark.parametrize(("host", "port", "field"), [
    ("10.0.0.2", "9644", "10.0.0.2:9644"), ("broker2.example", "9644", "broker2.example:9644"),
    ("2001:db8::2", "9644", "[2001:db8::2]:9644"), ("[2001:db8::2]", "9644", "[2001:db8::2]:9644"),
])
def test_the_host_field_names_the_peer_as_its_host_check_reads_it(host: str, port: str, field: str) -> None:
    """The peer's own Hosts (guard.py) include the address it published, a bound IPv6 one unbracketed."""
    assert _host_field(host, port) == field
    assert Hosts.of(host).allows(host_name(field) or "")
