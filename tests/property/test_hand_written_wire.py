"""The hand-written Produce codec, Fetch and Metadata writers against kio: for any request kio writes,
both readers give the same fields; for any answer a handler returns, both writers give the
same bytes."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.produce.v9 import request as v9

from martlet.gateway.handlers.common import millis
from martlet.protocol.codec import (
    Peer,
    ProtocolError,
    RequestHeader,
    build_response,
    decode_request,
    encode_response,
    request_type,
)
from martlet.protocol.fetch_wire import encode_fetch_response
from martlet.protocol.metadata_wire import encode_metadata_response
from martlet.protocol.produce_wire import decode_produce, encode_produce_response
from tests.support.strategies import ERROR_CODES, I32, I64, MILLIS, SETTINGS, TEXT, encode_request, entities

VERSIONS = [3, 5, 7, 8, 9, 10, 11, 12, 13]


@pytest.mark.parametrize("version", VERSIONS)
def test_requests_decode_as_kio_decodes_them(version: int) -> None:
    @SETTINGS
    @given(entities(request_type(0, version)), I32, st.none() | TEXT)
    def check(body: Any, correlation_id: int, client_id: str | None) -> None:
        frame = encode_request(body, correlation_id, client_id)
        kio_header, kio_body = decode_request(frame, 0, version, Peer("/h"))
        header, request = decode_produce(bytearray(frame), version, Peer("/h"))
        assert header == kio_header
        assert (request.transactional_id, request.acks, millis(request.timeout)) == (
            kio_body.transactional_id, kio_body.acks, millis(kio_body.timeout))
        assert [(t.topic_id or t.name, [(p.index, None if p.records is None else bytes(p.records))
                                        for p in t.partition_data])
                for t in request.topic_data] == [
            (t.topic_id or uuid.UUID(int=0) if version >= 13 else t.name, [(p.index, p.records) for p in t.partition_data])
            for t in kio_body.topic_data]

    check()


def test_a_truncated_request_is_a_protocol_error() -> None:
    body = v9.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30), topic_data=(
        v9.TopicProduceData(name="t", partition_data=(v9.PartitionProduceData(index=0, records=b"x" * 70),)),))
    frame = encode_request(body, 1, "c")
    assert decode_produce(frame, 9)[1].topic_data[0].partition_data[0].records == b"x" * 70
    for cut in (3, 10, len(frame) - 1):
        with pytest.raises(ProtocolError):
            decode_produce(frame[:cut], 9)


LEADER = st.fixed_dictionaries({"leader_id": I32 | st.just(-1), "leader_epoch": I32 | st.just(-1)})
NODE_ENDPOINTS = st.lists(st.fixed_dictionaries({"node_id": I32, "host": TEXT, "port": I32, "rack": st.none() | TEXT}),
                          max_size=3)
PARTITION = st.fixed_dictionaries({
    "index": I32, "error_code": ERROR_CODES, "base_offset": I64,
    "log_append_time": st.integers(-3, 4_102_444_800_000),  # kio's writer takes dates up to year 9999
    "log_start_offset": I64}, optional={
        "error_message": st.none() | TEXT,
        "record_errors": st.lists(st.fixed_dictionaries({"batch_index": I32,
                                                         "batch_index_error_message": st.none() | TEXT}), max_size=3),
        "current_leader": LEADER})
ANSWER = st.fixed_dictionaries({
    "responses": st.lists(st.fixed_dictionaries({"name": TEXT, "topic_id": st.uuids(),
                                                 "partition_responses": st.lists(PARTITION, max_size=3)}),
                          max_size=3),
    "throttle_time": MILLIS}, optional={"node_endpoints": NODE_ENDPOINTS})


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_encode_to_kios_bytes(version: int) -> None:
    @SETTINGS
    @given(ANSWER, I32)
    def check(answer: dict[str, Any], correlation_id: int) -> None:
        header = RequestHeader(0, version, correlation_id, "c")
        assert encode_produce_response(header, answer) == encode_response(header, build_response(header, answer))

    check()


# -- Fetch answers (written by hand; requests still go through kio)

FETCH_PARTITION = st.fixed_dictionaries({
    "partition_index": I32, "error_code": ERROR_CODES, "high_watermark": I64, "last_stable_offset": I64,
    "log_start_offset": I64, "preferred_read_replica": I32,
    "aborted_transactions": st.none() | st.lists(st.fixed_dictionaries({"producer_id": I64, "first_offset": I64}),
                                                 max_size=2),
    "records": st.none() | st.binary(max_size=40)}, optional={"current_leader": LEADER})
FETCH_ANSWER = st.fixed_dictionaries({
    "throttle_time": MILLIS, "error_code": ERROR_CODES, "session_id": I32,
    "responses": st.lists(st.fixed_dictionaries({"topic": TEXT, "topic_id": st.uuids(),
                                                 "partitions": st.lists(FETCH_PARTITION, max_size=3)}),
                          max_size=3)}, optional={"node_endpoints": NODE_ENDPOINTS})


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12, 13, 15, 16, 17, 18])
def test_fetch_answers_encode_to_kios_bytes(version: int) -> None:
    @SETTINGS
    @given(FETCH_ANSWER, I32)
    def check(answer: dict[str, Any], correlation_id: int) -> None:
        header = RequestHeader(1, version, correlation_id, "c")
        parts = encode_fetch_response(header, answer)
        assert b"".join(parts) == encode_response(header, build_response(header, answer))
        records = [p["records"] for t in answer["responses"] for p in t["partitions"] if p["records"]]
        assert [part for part in parts if any(part is r for r in records)] == records  # passed on, not copied

    check()


# -- Metadata answers (written by hand; requests still go through kio)

NODE_IDS = st.lists(I32, max_size=3)
METADATA_PARTITION = st.fixed_dictionaries({
    "error_code": ERROR_CODES, "partition_index": I32, "leader_id": I32}, optional={
        "leader_epoch": I32, "replica_nodes": NODE_IDS, "isr_nodes": NODE_IDS, "offline_replicas": NODE_IDS})


def metadata_answers(version: int) -> st.SearchStrategy[dict[str, Any]]:
    """Answers as the handler builds them: fields left out are kio's defaults."""
    names = (st.none() | TEXT) if version >= 12 else TEXT  # a null name only where the schema allows one
    topic = st.fixed_dictionaries({"error_code": ERROR_CODES, "name": names,
                                   "partitions": st.lists(METADATA_PARTITION, max_size=3)},
                                  optional={"topic_id": st.uuids(), "is_internal": st.booleans(),
                                            "topic_authorized_operations": I32})
    broker = st.fixed_dictionaries({"node_id": I32, "host": TEXT, "port": I32}, optional={"rack": st.none() | TEXT})
    return st.fixed_dictionaries({"brokers": st.lists(broker, max_size=3), "topics": st.lists(topic, max_size=3)},
                                 optional={"throttle_time": MILLIS, "cluster_id": st.none() | TEXT,
                                           "controller_id": I32, "cluster_authorized_operations": I32,
                                           "error_code": ERROR_CODES})


@pytest.mark.parametrize("version", range(14))
def test_metadata_answers_encode_to_kios_bytes(version: int) -> None:
    @SETTINGS
    @given(metadata_answers(version), I32)
    def check(answer: dict[str, Any], correlation_id: int) -> None:
        header = RequestHeader(3, version, correlation_id, "c")
        assert encode_metadata_response(header, answer) == encode_response(header, build_response(header, answer))

    check()


def test_metadata_partitions_sharing_a_node_list_write_it_each_time() -> None:
    nodes = [1, 2]
    answer = {"brokers": [], "topics": [{"error_code": 0, "name": "t", "partitions": [
        {"error_code": 0, "partition_index": index, "leader_id": 1, "leader_epoch": 0, "replica_nodes": nodes,
         "isr_nodes": nodes} for index in range(3)]}]}
    header = RequestHeader(3, 12, 7, "c")
    assert encode_metadata_response(header, answer) == encode_response(header, build_response(header, answer))
