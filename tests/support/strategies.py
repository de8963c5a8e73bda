"""Hypothesis strategies for the wire: any kio entity (a request or response with any field
values a client may send), field values by Kafka type, error codes; and a request frame written
by kio for an entity."""

from __future__ import annotations

import datetime
import io
from dataclasses import fields
from functools import cache
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

SETTINGS = settings(max_examples=50, deadline=None, database=None)

I8 = st.integers(-(2**7), 2**7 - 1)
I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=12)
MILLIS = st.integers(0, 2**31 - 1)

PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "int8": I8,
    "int16": I16,
    "int32": I32,
    "int64": I64,
    "string": TEXT,
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "float64": st.floats(allow_nan=False),
    "bytes": st.binary(max_size=16),
    "records": st.binary(max_size=16),
    "timedelta_i32": MILLIS.map(lambda ms: datetime.timedelta(milliseconds=ms)),
    "timedelta_i64": MILLIS.map(lambda ms: datetime.timedelta(milliseconds=ms)),
}

ERROR_CODES = st.sampled_from([int(code) for code in ErrorCode])


@cache
def entities(cls: type) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({field.name: _field(field) for field in fields(cls)}).map(lambda kw: cls(**kw))


def _field(field: Any) -> st.SearchStrategy[Any]:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        values = st.lists(st.deferred(lambda: entities(kind.type_)), max_size=3).map(tuple)
    elif isinstance(kind, EntityField):
        values = st.deferred(lambda: entities(kind.type_))
    elif isinstance(kind, PrimitiveTupleField):
        values = st.lists(PRIMITIVES[field.metadata["kafka_type"]], max_size=3).map(tuple)
    else:
        values = PRIMITIVES[field.metadata["kafka_type"]]
    return st.none() | values if is_optional(field) else values


def encode_request(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    cls = type(body)
    header = cls.__header_schema__(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                                   correlation_id=correlation_id, client_id=client_id)
    out = io.BytesIO()
    entity_writer(cls.__header_schema__)(out, header)
    entity_writer(cls)(out, body)
    return out.getvalue()
