"""What a broker asks other brokers: transaction markers (WriteTxnMarkers v1) for the
partitions and coordinator shards they serve (engine/transactions/service.py `send_markers`).

One short connection per call, bounded by CALL_TIMEOUT_S: markers are written once per
transaction and node, and the transaction stays prepared (the coordinator retries) if a
call fails, so there is nothing to gain from keeping connections open. Calls go to the
address each node registered, its inter-broker listener's; with TLS when that listener is an
SSL one (`tls`: the broker shows its own certificate and checks theirs), and authenticated
first (SaslHandshake v1, SaslAuthenticate v2, SCRAM) as the brokers' own user when it is a
SASL one (`login`).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import ssl
import struct
from collections.abc import Mapping

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse

from ..engine.api import NodeIdentity, RemoteMarkers, TopicPartition
from ..protocol.apis import ApiKey
from ..protocol.codec import build, decode_response, encode_request, request_type
from ..protocol.sasl_client import Login
from ..protocol.sasl_client import login as sasl_login
from .internal_topics import OFFSETS

CALL_TIMEOUT_S = 10.0
MARKERS_VERSION = 1
CLIENT_ID = "martlet-broker"
_SIZE = struct.Struct(">i")
_correlation = itertools.count(1)


# A marker answered with these was refused for good: that producer's transaction there was
# ended already (an admin's abort with a later epoch), as the local path treats it.
ENDED = frozenset({ErrorCode.none, ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})


async def send_markers(node: NodeIdentity, markers: RemoteMarkers, tls: ssl.SSLContext | None = None,
                       login: Login | None = None) -> list[str]:
    """Ask `node` to write these markers; what it could not mark, as "topic-partition: error"."""
    topics: dict[str, list[int]] = {}
    for tp in markers.partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    if markers.shards:
        topics[OFFSETS] = list(markers.shards)
    request = build(request_type(ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION), {"markers": [{
        "producer_id": markers.producer_id, "producer_epoch": markers.epoch,
        "transaction_result": markers.commit, "coordinator_epoch": 0,
        "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()]}]})
    answer = await asyncio.wait_for(_call(node, request, tls, login), CALL_TIMEOUT_S)
    return [f"{TopicPartition(topic.name, p.partition_index)}: {ErrorCode(p.error_code).name}"
            for result in answer.markers for topic in result.topics for p in topic.partitions
            if p.error_code not in ENDED]


async def _call(node: NodeIdentity, request: object, tls: ssl.SSLContext | None,
                login: Login | None) -> WriteTxnMarkersResponse:
    reader, writer = await asyncio.open_connection(node.host, node.port, ssl=tls,
                                                   server_hostname=node.host if tls is not None else None)
    try:
        if login is not None:
            await sasl_login(functools.partial(_kafka, reader, writer, node), login)
        body = await _ask(reader, writer, node, request, ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION)
    finally:
        writer.close()
    assert isinstance(body, WriteTxnMarkersResponse)
    return body


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, node: NodeIdentity, request: object,
               key: ApiKey, version: int) -> object:
    correlation_id = next(_correlation)
    writer.write(encode_request(request, correlation_id, CLIENT_ID))
    await writer.drain()
    try:
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        frame = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ConnectionError(f"node {node.node_id} closed the connection before it answered") from None
    answered, body = decode_response(frame, key, version)
    if answered != correlation_id:
        raise ConnectionError(f"node {node.node_id} answered correlation id {answered}, not {correlation_id}")
    return body


async def _kafka(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, node: NodeIdentity, key: int,
                 version: int, fields: Mapping[str, object]) -> object:
    return await _ask(reader, writer, node, build(request_type(key, version), fields), ApiKey(key), version)
