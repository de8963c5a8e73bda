"""GET /api/v1/brokers/<id>/status: another broker's own /api/v1/status, fetched by this one.

The console's overview shows every broker's load, which only that broker knows. The page asks
the broker it came from, which asks the other over HTTP at the address that broker published
with its cluster registration (`NodeIdentity.http`). So the browser talks to one origin (no
cross-origin answers to allow) and the overview works where the browser reaches only this
broker's port (a tunnel, a proxy), as the brokers reach each other anyway.

The fetch is one HTTP/1.1 GET on asyncio streams, bounded by PEER_TIMEOUT_S as a whole and by
PEER_BODY_BYTES_MAX; nothing blocks the event loop. With [http] tls it goes over TLS (the peer's
certificate checked against [tls] ca, else the system's CAs, for the host it published), and
with [http] login it carries Basic credentials of the brokers' own user ([sasl]
inter_broker_user and inter_broker_password; without them the peer answers 401, shown as 502).
The answer is the peer's document as it sent it, once it parses as a status of the node
asked for. Errors: 404 a node that is not a live broker; 502 a broker that publishes no HTTP
address, cannot be reached, or answers something else; 504 one that does not answer within the
bound.
"""

from __future__ import annotations

import asyncio
import json
import ssl

from .parser import HEAD_BYTES_MAX
from .response import HttpError, Json
from .state import HttpState

PEER_TIMEOUT_S = 2.0  # the console refreshes every 3 s: a silent broker must not hold it longer
PEER_BODY_BYTES_MAX = 1 << 20  # a status is under a kilobyte
END = b"\r\n\r\n"


class PeerError(Exception):
    """A broker that did not answer as a Martlet HTTP port does."""


async def peer_status(state: HttpState, node_id: int) -> Json:
    """Another live broker's /api/v1/status (HttpError 404, 502 or 504 as above)."""
    node = next((node for node in state.ctx.cluster.alive() if node.node_id == node_id), None)
    if node is None:
        raise HttpError(404, f"no live broker with node id {node_id}")
    if not node.http:
        raise HttpError(502, f"broker {node_id} publishes no HTTP address")
    try:
        async with asyncio.timeout(PEER_TIMEOUT_S):
            doc = await fetch_json(node.http, "/api/v1/status", state.peers.tls, state.peers.authorization)
    except TimeoutError:
        raise HttpError(504, f"broker {node_id} at {node.http} did not answer within {PEER_TIMEOUT_S:g} s") from None
    except (OSError, PeerError) as error:
        raise HttpError(502, f"broker {node_id} at {node.http}: {error}") from None
    if doc.get("node_id") != node_id:
        raise HttpError(502, f"{node.http} answers as node {doc.get('node_id')}, not {node_id}")
    return doc


async def fetch_json(address: str, path: str, tls: ssl.SSLContext | None = None, authorization: str = "") -> Json:
    """GET `path` of the HTTP port at `address` ("host:port"), over TLS with `tls`, with an
    Authorization field if given: its JSON object (PeerError else)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise PeerError(f"{address!r} is not HOST:PORT")
    reader, writer = await asyncio.open_connection(host.strip("[]"), int(port), limit=HEAD_BYTES_MAX + len(END),
                                                   ssl=tls, server_hostname=host.strip("[]") if tls else None)
    try:
        writer.write(_request(path, _host_field(host, port), authorization))
        await writer.drain()
        status, length = _read_head(await _head(reader))
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise PeerError("the connection ended inside the answer") from None
    finally:
        writer.close()
    return _json_object(status, body)


def _request(path: str, host_field: str, authorization: str) -> bytes:
    credentials = f"Authorization: {authorization}\r\n" if authorization else ""
    return (f"GET {path} HTTP/1.1\r\nHost: {host_field}\r\nAccept: application/json\r\n{credentials}"
            "Connection: close\r\n\r\n").encode("latin-1")


def _host_field(host: str, port: str) -> str:
    """The Host field naming the peer at the address it published (an IPv6 address in brackets,
    RFC 9110 7.2: the peer's Host check, guard.py, reads it so)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


async def _head(reader: asyncio.StreamReader) -> bytes:
    try:
        return (await reader.readuntil(END))[:-len(END)]
    except asyncio.LimitOverrunError:
        raise PeerError("the answer's head is too large") from None


def _read_head(head: bytes) -> tuple[int, int]:
    """(status, Content-Length) of an answer's head."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise PeerError(f"not an HTTP answer: {lines[0][:80]!r}")
    fields = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    length = fields.get("content-length", "")
    if not length.isdigit():
        raise PeerError("the answer has no Content-Length")
    if int(length) > PEER_BODY_BYTES_MAX:
        raise PeerError(f"the answer's body ({length} bytes) is over {PEER_BODY_BYTES_MAX}")
    return int(parts[1]), int(length)


def _json_object(status: int, body: bytes) -> Json:
    try:
        doc: object = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise PeerError(f"answered {status} with a body that is not JSON") from None
    if status != 200:
        message = doc.get("error") if isinstance(doc, dict) else None
        hint = " (brokers log in to each other as [sasl] inter_broker_user)" if status == 401 else ""
        raise PeerError(f"answered {status}" + (f": {message}" if message else "") + hint)
    if not isinstance(doc, dict):
        raise PeerError("answered something other than a JSON object")
    return doc
