
import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from martlet.protocol.codec import (
    ProtocolError,
    RequestHeader,
    build,
    build_response,
    decode_request,
    encode_response,
    peek_header,
    response_type,
)
from tests.support.codec import encode_request


def test_request_round_trip_through_kio():
    cls = load_request_schema(3, 12)
    body = build(cls, {"topics": [{"name": "t1"}], "allow_auto_topic_creation": False})
    frame = encode_request(3, 12, body, correlation_id=42)
    header, decoded = decode_request(frame, 3, 12)
    assert header == RequestHeader(3, 12, 42, "t")
    assert decoded.topics[0].name == "t1"
    assert peek_header(frame).correlation_id == 42


def test_build_drops_keys_the_version_lacks_and_zero_fills_missing():
    old = build(response_type(3, 1), {"brokers": [], "topics": [], "cluster_id": "c", "throttle_time": 5})
    assert not hasattr(old, "cluster_id")
    new = build(response_type(3, 12), {"brokers": [], "topics": []})
    assert new.controller_id == -1  # kio's schema default is kept
    assert new.throttle_time.total_seconds() == 0  # a required field the mapping omitted


def test_response_decodes_with_kio_reader():
    header = RequestHeader(2, 7, 9, None)
    body = build_response(header, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 3, "timestamp": -1, "offset": 12, "leader_epoch": 1}]}]})
    frame = encode_response(header, body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert int.from_bytes(frame[4:8], "big") == 9
    decoded, _ = entity_reader(type(body))(frame, 9)  # size, correlation id, tagged fields
    partition = decoded.topics[0].partitions[0]
    assert partition.offset == 12 and partition.error_code == ErrorCode.unknown_topic_or_partition


def test_api_versions_response_header_has_no_tagged_fields():
    header = RequestHeader(18, 3, 1, None)
    frame = encode_response(header, build_response(header, {"api_keys": []}))
    decoded, _ = entity_reader(response_type(18, 3))(frame, 8)
    assert decoded.api_keys == ()


def test_truncated_request_is_a_protocol_error():
    frame = encode_request(3, 12, build(load_request_schema(3, 12), {"topics": [{"name": "abc"}]}))
    with pytest.raises(ProtocolError):
        decode_request(frame[:-3], 3, 12)
    with pytest.raises(ProtocolError):
        peek_header(frame[:5])
