"""ApiVersions advertises exactly the Kafka APIs the registry serves (never Martlet's own, the
native SDK's: protocol/native.py), and kio knows every advertised version."""

import struct

import pytest
from kio.index import load_request_schema, load_response_schema

from martlet.gateway.registry import apis
from martlet.protocol.apis import KAFKA_KEYS_END, ApiKey
from martlet.protocol.codec import ProtocolError
from tests.integration.raw_client import decode_response

from .harness import API_VERSIONS, Broker


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_lists_exactly_the_registry(broker: Broker, version: int) -> None:
    answer = broker.call(API_VERSIONS, version, {"client_software_name": "unit", "client_software_version": "1"})
    assert answer.error_code == 0
    advertised = [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys]
    registry = sorted((api.key, api.min_version, api.max_version) for api in apis().values())
    assert advertised == [entry for entry in registry if entry[0] < KAFKA_KEYS_END]
    assert {entry[0] for entry in registry if entry[0] >= KAFKA_KEYS_END} == {ApiKey.NATIVE_LAYOUT, ApiKey.NATIVE_WRITE}


def test_every_advertised_version_has_a_kio_schema() -> None:
    for api in (api for api in apis().values() if api.key < KAFKA_KEYS_END):
        for version in range(api.min_version, api.max_version + 1):
            assert load_request_schema(api.key, version).__version__ == version
            assert load_response_schema(api.key, version).__api_key__ == api.key


def test_unknown_api_versions_version_is_answered_in_the_v0_layout(broker: Broker) -> None:
    # request header v2 (ApiVersions is flexible from v3): key, version, correlation id, null
    # client id, no tagged fields; then a body no version defines
    frame = struct.pack(">hhih", API_VERSIONS, 99, 5, -1) + b"\x00" + b"\x05 junk \xff"
    answer = broker.run(frame)
    assert answer is not None
    header, body = decode_response(answer[4:], API_VERSIONS, 0)
    assert header.correlation_id == 5
    assert body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


def test_unserved_version_of_a_known_api_is_a_protocol_error(broker: Broker) -> None:
    with pytest.raises(ProtocolError):
        broker.run(b"\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff")  # Produce v0
    with pytest.raises(ProtocolError):
        broker.run(b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff")  # api key 999
