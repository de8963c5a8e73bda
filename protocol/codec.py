"""Requests from bytes and responses to bytes, on kio's generated types. No I/O.

Handlers answer with plain mappings (one shape for every version of an API, typed by
answers.py); `build` fills the kio dataclass of the version the client asked for, dropping
keys that version lacks and zero-filling fields the mapping omits. That keeps one handler
per API family instead of one per version (kio's classes are per version). A key that no
version of the API has is a bug, refused with an error instead of silently becoming a zero
on the wire.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static.protocol import RequestPayload

HEADER_PEEK = struct.Struct(">hhi")
CLIENT_ID_LENGTH = struct.Struct(">h")
CORRELATION = struct.Struct(">i")
KIO_VERSIONS_MAX = 20  # above every version of every API kio knows


class ProtocolError(Exception):
    """A frame that does not decode as the request it claims to be. `client_id` is the
    header's client id when it could be read (for the log line that names the client)."""

    client_id: str | None = None


ANONYMOUS = "User:ANONYMOUS"  # Kafka's principal of a client that proved nothing


class Peer(NamedTuple):
    """Who a request came from, as its connection knows it."""

    host: str = ""  # the client's address as Kafka shows it: "/127.0.0.1"
    listener: str = ""  # the name of the listener it came in on (gateway/listeners.py)
    principal: str = ANONYMOUS  # who it proved to be (a TLS client certificate: gateway/tls.py)


NO_PEER = Peer()  # a request not from a connection (tests, tools calling the dispatcher)


class RequestHeader(NamedTuple):  # a tuple: every request builds two, and a frozen dataclass is slow to build
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: Peer = NO_PEER


def peek_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """The fixed part of any request header; readable for every version, even unknown ones."""
    if len(frame) < HEADER_PEEK.size:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = HEADER_PEEK.unpack_from(frame, 0)
    return RequestHeader(api_key, api_version, correlation_id, None)


def peek_client_id(frame: bytes | bytearray | memoryview) -> str | None:
    """The client id after the fixed header fields (every header version but v0 has it), or
    None where the frame is too short or it is null."""
    start = HEADER_PEEK.size + CLIENT_ID_LENGTH.size
    if len(frame) < start:
        return None
    (length,) = CLIENT_ID_LENGTH.unpack_from(frame, HEADER_PEEK.size)
    if length < 0 or len(frame) < start + length:
        return None
    return bytes(frame[start:start + length]).decode("utf-8", "replace")


@cache
def request_type(api_key: int, api_version: int) -> type[RequestPayload]:
    return load_request_schema(api_key, api_version)


@cache
def response_type(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


@cache
def _reader(cls: type) -> Callable[..., Any]:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Callable[..., Any]:
    return entity_writer(cls)


def decode_request(frame: bytes | bytearray | memoryview, api_key: int, api_version: int,
                   peer: Peer = NO_PEER) -> tuple[RequestHeader, Any]:
    """Header and body of a request whose (key, version) the caller knows it serves."""
    payload = request_type(api_key, api_version)
    # Held as plain `type` for the @cache'd readers: mypy finds a narrower class object unhashable.
    cls: type = payload
    header_cls: type = payload.__header_schema__
    frame = memoryview(frame).toreadonly()  # kio refuses writable buffers; this copies nothing
    try:
        header, used = _reader(header_cls)(frame, 0)
        body, _ = _reader(cls)(frame, used)
    except Exception as error:  # kio raises many types on malformed input; all mean "bad peer"
        raise ProtocolError(f"cannot decode api {api_key} v{api_version}: {error!r}") from error
    _check_no_null_arrays(body)
    return RequestHeader(api_key, api_version, header.correlation_id, header.client_id, peer), body


def _check_no_null_arrays(entity: Any) -> None:
    """kio reads a null (-1 length) array even where the schema forbids it; Kafka refuses."""
    cls: type = type(entity)
    for name, nullable, nested in _array_fields(cls):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                raise ProtocolError(f"field {name!r} may not be null")
        elif nested:
            for item in value:
                _check_no_null_arrays(item)


@cache
def _array_fields(cls: type) -> tuple[tuple[str, bool, bool], ...]:
    result = []
    for field in fields(cls):
        kind = classify_field(field)
        if isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
            result.append((field.name, is_optional(field), isinstance(kind, EntityTupleField)))
    return tuple(result)


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """A whole response frame (size prefix included) for `body`, a kio response entity."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(CORRELATION.pack(header.correlation_id))
    if type(body).__header_schema__.__flexible__:
        out.write(b"\0")  # response header v1: empty tagged fields
    cls: type = type(body)
    _writer(cls)(out, body)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def encode_request(body: object, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame (size prefix included) for `body`, a kio request entity: what a
    broker sends another broker."""
    cls: Any = type(body)
    header_cls = cls.__header_schema__
    header = header_cls(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                        correlation_id=correlation_id, client_id=client_id)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    entity_writer(header_cls)(out, header)
    _writer(cls)(out, body)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, object]:
    """(correlation id, body) of a response frame without its size prefix."""
    cls: Any = response_type(api_key, api_version)
    header, used = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = _reader(cls)(frame, used)
    return header.correlation_id, body


def build_response(header: RequestHeader, data: Mapping[str, Any]) -> Any:
    return build(response_type(header.api_key, header.api_version), data)


def build(cls: type, data: Mapping[str, Any]) -> Any:
    known = _names_in_any_version(cls)
    if not known.issuperset(data):  # no set is built on the usual path
        unknown = sorted(data.keys() - known)
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)} in any version")
    kwargs = {}
    for name, convert, zero in _plan(cls):
        if name in data:
            kwargs[name] = convert(data[name])
        elif zero is not MISSING:
            kwargs[name] = zero
    return cls(**kwargs)


@cache
def _names_in_any_version(cls: type) -> frozenset[str]:
    """Field names of `cls` in every version of its API (entities are matched by class name)."""
    names: set[str] = set()
    load = load_response_schema if cls.__module__.endswith(".response") else load_request_schema
    for version in range(KIO_VERSIONS_MAX + 1):
        try:
            top = load(getattr(cls, "__api_key__"), version)  # noqa: B009 - kio sets it on every entity
        except Exception:  # noqa: BLE001 - kio raises several types for a version it lacks
            continue
        for entity in _entities(top):
            if entity.__name__ == cls.__name__:
                names.update(field.name for field in fields(entity))
    return frozenset(names)


def _entities(cls: type) -> list[type]:
    found = [cls]
    for field in fields(cls):
        kind = classify_field(field)
        if isinstance(kind, (EntityField, EntityTupleField)):
            found += _entities(kind.type_)
    return found


@cache
def _plan(cls: type) -> tuple[tuple[str, Callable[[Any], Any], Any], ...]:
    plan = []
    for field in fields(cls):
        has_default = field.default is not MISSING or field.default_factory is not MISSING
        zero = MISSING if has_default else _zero(field)
        plan.append((field.name, _converter(field), zero))
    return tuple(plan)


def _converter(field: Any) -> Callable[[Any], Any]:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        sub = kind.type_
        return lambda items: None if items is None else tuple(_entity(sub, item) for item in items)
    if isinstance(kind, EntityField):
        sub = kind.type_
        return lambda item: None if item is None else _entity(sub, item)
    if isinstance(kind, PrimitiveTupleField):
        return lambda items: None if items is None else tuple(items)
    if field.metadata.get("kafka_type") == "datetime_i64" and not is_optional(field):
        return _datetime_ms_always
    return _PRIMITIVE.get(field.metadata.get("kafka_type", ""), _same)


def _entity(cls: type, item: Any) -> Any:
    return build(cls, item) if isinstance(item, Mapping) else item


def _same(value: Any) -> Any:
    return value


def _ms(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


def _datetime_ms(value: Any) -> Any:
    if not isinstance(value, int):
        return value
    return None if value < 0 else datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)


def _datetime_ms_always(value: object) -> object:
    """A time that cannot be null: Kafka's "none" (-1) is still sent as the number -1."""
    if not isinstance(value, int):
        return value
    return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)


def _uuid(value: Any) -> Any:
    return uuid.UUID(value) if isinstance(value, str) else value


_PRIMITIVE: dict[str, Callable[[Any], Any]] = {
    "error_code": lambda value: ErrorCode(int(value)),
    "timedelta_i32": _ms,
    "timedelta_i64": _ms,
    "uuid": _uuid,
    "datetime_i64": _datetime_ms,
}

_ZERO_BY_TYPE: dict[str, Any] = {
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "string": "",
    "bool": False,
    "bytes": b"",
    "records": None,
    "uuid": uuid.UUID(int=0),
    "float64": 0.0,
}


def _zero(field: Any) -> Any:
    if isinstance(classify_field(field), (EntityTupleField, PrimitiveTupleField)):
        return ()
    if isinstance(classify_field(field), EntityField):
        return None
    return _ZERO_BY_TYPE.get(field.metadata.get("kafka_type", ""), 0)
