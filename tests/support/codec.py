"""A request frame (header and body) written by kio, named by api key and version."""

import io

from kio.index import load_request_schema
from kio.serial import entity_writer


def encode_request(api_key, version, body, correlation_id=7, client_id="t"):
    cls = load_request_schema(api_key, version)
    out = io.BytesIO()
    header = cls.__header_schema__(request_api_key=api_key, request_api_version=version,
                                   correlation_id=correlation_id, client_id=client_id)
    entity_writer(cls.__header_schema__)(out, header)
    entity_writer(cls)(out, body)
    return out.getvalue()
