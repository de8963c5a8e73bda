"""Property tests for the gateway codec on kio's types.

Requests: any field values a client may send, written by kio's writer, come back equal from
`decode_request`. Responses: any plain mapping a handler may return goes through `build_response`
and `encode_response` and kio's reader gives back the same values.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader

from martlet.protocol.codec import RequestHeader, build_response, decode_request, encode_response, request_type
from tests.support.strategies import ERROR_CODES, I32, I64, MILLIS, SETTINGS, TEXT, encode_request, entities

# -- requests: any kio entity (tests/support/strategies.py) comes back equal


def check_request_round_trip(body: Any, correlation_id: int, client_id: str | None) -> None:
    cls = type(body)
    header, decoded = decode_request(encode_request(body, correlation_id, client_id), cls.__api_key__,
                                     cls.__version__)
    assert header == RequestHeader(cls.__api_key__, cls.__version__, correlation_id, client_id)
    assert decoded == body


@SETTINGS
@given(entities(request_type(3, 12)), I32, st.none() | TEXT)
def test_metadata_v12_request_round_trip(body: Any, correlation_id: int, client_id: str | None) -> None:
    check_request_round_trip(body, correlation_id, client_id)


@SETTINGS
@given(entities(request_type(2, 7)), I32, st.none() | TEXT)
def test_list_offsets_v7_request_round_trip(body: Any, correlation_id: int, client_id: str | None) -> None:
    check_request_round_trip(body, correlation_id, client_id)


@SETTINGS
@given(entities(request_type(19, 7)), I32, st.none() | TEXT)
def test_create_topics_v7_request_round_trip(body: Any, correlation_id: int, client_id: str | None) -> None:
    check_request_round_trip(body, correlation_id, client_id)


@SETTINGS
@given(entities(request_type(1, 12)), I32, st.none() | TEXT)
def test_fetch_v12_request_round_trip(body: Any, correlation_id: int, client_id: str | None) -> None:
    check_request_round_trip(body, correlation_id, client_id)


# -- responses: plain mappings as handlers write them (ints for codes and durations, str ids)

UUID_TEXT = st.uuids().map(str)


def mappings(required: dict[str, Any], optional: dict[str, Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(required, optional=optional or {})


def lists(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(strategy, max_size=3)


LIST_OFFSETS_V7 = mappings({"throttle_time": MILLIS, "topics": lists(mappings({
    "name": TEXT, "partitions": lists(mappings({
        "partition_index": I32, "error_code": ERROR_CODES, "timestamp": I64, "offset": I64,
        "leader_epoch": I32}))}))})

METADATA_V12 = mappings(
    {"throttle_time": MILLIS,
     "brokers": lists(mappings({"node_id": I32, "host": TEXT, "port": I32, "rack": st.none() | TEXT})),
     "topics": lists(mappings(
         {"error_code": ERROR_CODES, "name": st.none() | TEXT, "partitions": lists(mappings(
             {"error_code": ERROR_CODES, "partition_index": I32, "leader_id": I32, "leader_epoch": I32,
              "replica_nodes": lists(I32), "isr_nodes": lists(I32), "offline_replicas": lists(I32)}))},
         {"topic_id": UUID_TEXT, "is_internal": st.booleans(), "topic_authorized_operations": I32}))},
    {"cluster_id": st.none() | TEXT, "controller_id": I32})

FETCH_V12 = mappings({"throttle_time": MILLIS, "error_code": ERROR_CODES, "session_id": I32, "responses": lists(
    mappings({"topic": TEXT, "partitions": lists(mappings(
        {"partition_index": I32, "error_code": ERROR_CODES, "high_watermark": I64, "last_stable_offset": I64,
         "log_start_offset": I64, "preferred_read_replica": I32, "records": st.none() | st.binary(max_size=64)},
        {"aborted_transactions": st.none() | lists(mappings({"producer_id": I64, "first_offset": I64}))}))}))})


def decoded_response(api_key: int, version: int, data: dict[str, Any]) -> Any:
    header = RequestHeader(api_key, version, 77, None)
    body = build_response(header, data)
    frame = encode_response(header, body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 77
    start = 9 if type(body).__header_schema__.__flexible__ else 8
    decoded, used = entity_reader(type(body))(frame, start)
    assert start + used == len(frame)
    return decoded


def assert_carries(decoded: Any, expected: Any, path: str = "") -> None:
    """`decoded` (a kio value) holds what the plain `expected` said, key by key."""
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert_carries(getattr(decoded, key), value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert len(decoded) == len(expected), path
        for index, (got, want) in enumerate(zip(decoded, expected, strict=True)):
            assert_carries(got, want, f"{path}[{index}]")
    elif isinstance(decoded, datetime.timedelta):
        assert decoded == datetime.timedelta(milliseconds=expected), path
    elif isinstance(decoded, uuid.UUID):
        assert decoded == uuid.UUID(expected), path
    else:
        assert decoded == expected, path


@SETTINGS
@given(LIST_OFFSETS_V7)
def test_list_offsets_v7_response_carries_the_mapping(data: dict[str, Any]) -> None:
    assert_carries(decoded_response(2, 7, data), data)


@SETTINGS
@given(METADATA_V12)
def test_metadata_v12_response_carries_the_mapping(data: dict[str, Any]) -> None:
    assert_carries(decoded_response(3, 12, data), data)


@SETTINGS
@given(FETCH_V12)
def test_fetch_v12_response_carries_the_mapping(data: dict[str, Any]) -> None:
    assert_carries(decoded_response(1, 12, data), data)


def named(data: dict[str, Any]) -> dict[str, Any]:
    """Before v10 topics are only asked for, and answered, by name."""
    return data | {"topics": [t | {"name": t["name"] or "t"} for t in data["topics"]]}


@SETTINGS
@given(METADATA_V12.map(named))
def test_older_versions_drop_what_they_lack(data: dict[str, Any]) -> None:
    decoded = decoded_response(3, 1, data)
    assert [b.node_id for b in decoded.brokers] == [b["node_id"] for b in data["brokers"]]
    assert [t.name for t in decoded.topics] == [t["name"] for t in data["topics"]]
