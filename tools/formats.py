"""Record formats of `martlet produce` (lines in) and `martlet consume` (lines out).

In, one record per line:
- raw: the line is the value. With a key separator, the part before the first separator is the
  key and the rest the value; a line without the separator is a value without a key.
- json: one object per line, {"key": K, "value": V, "headers": H, "partition": N}, every field
  optional. K and V are strings (written as their UTF-8 bytes), null (no key, or a tombstone), or
  any other JSON value (written as its compact JSON text). H is {"name": value, ...} or
  [["name", value], ...] (a name may repeat), each value a string, null or JSON as above.
  "key_encoding", "value_encoding" or "headers_encoding": "base64" say that those strings are
  base64 (what `consume --format json` writes for bytes that are not UTF-8). Other fields (topic,
  offset, timestamp) are ignored, so consume's JSON lines can be produced again.

Out, one line per record:
- raw: the value (null as an empty line); with the key: key, separator, value.
- json: {"topic", "partition", "offset", "timestamp" (ms or null), "key", "value", "headers"
  ([[name, value], ...])}; bytes decoded as UTF-8, or base64 with "key_encoding",
  "value_encoding" or "headers_encoding": "base64" when they are not UTF-8.
- a kcat-like format string: %t topic, %p partition, %o offset, %T timestamp (ms, -1 if none),
  %k key, %s value, %K key size and %S value size (-1 if null), %h headers (name=value, comma
  separated; a null value gives the name alone), %% a percent sign; escapes \\n \\t \\r \\\\. No
  newline is added: end the string with \\n.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Headers = tuple[tuple[str, bytes | None], ...]
BASE64 = "base64"
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}


class FormatError(ValueError):
    """Input that does not match its format, or a format that means nothing."""


@dataclass(frozen=True)
class Record:
    """One record to produce; `partition` None lets the producer's partitioner choose."""

    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()
    partition: int | None = None


@dataclass(frozen=True)
class Message:
    """One consumed record, as printed."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def unescape(text: str) -> str:
    """`text` with \\n, \\t, \\r, \\0 and \\\\ turned into their characters (others kept as written)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in ESCAPES:
            out.append(ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


# ---- in: produce ----

def split_key(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    """(key, value) of a raw line: the key ends at the first separator; no separator, no key."""
    if not separator:
        return None, line
    key, found, value = line.partition(separator)
    return (key, value) if found else (None, line)


def parse_header(text: str) -> tuple[str, bytes]:
    """A --header argument, NAME=VALUE (the value may contain '=')."""
    name, found, value = text.partition("=")
    if not found or not name:
        raise FormatError(f"header {text!r} is not NAME=VALUE")
    return name, value.encode()


def raw_record(line: bytes, separator: bytes | None, headers: Headers = (), partition: int | None = None) -> Record:
    key, value = split_key(line, separator)
    return Record(value=value, key=key, headers=headers, partition=partition)


def json_record(line: bytes | str) -> Record:
    """The record of one JSON line (see the module's header)."""
    try:
        obj = json.loads(line)
    except ValueError as error:
        raise FormatError(f"not JSON: {error}") from None
    if not isinstance(obj, dict):
        raise FormatError("not a JSON object")
    partition = obj.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int) or partition < 0):
        raise FormatError(f"partition {partition!r} is not a partition number")
    return Record(value=_json_bytes(obj.get("value"), obj.get("value_encoding"), "value"),
                  key=_json_bytes(obj.get("key"), obj.get("key_encoding"), "key"),
                  headers=_json_headers(obj.get("headers"), obj.get("headers_encoding")),
                  partition=partition)


def _json_bytes(value: Any, encoding: Any, field: str) -> bytes | None:
    if value is None:
        return None
    if encoding not in (None, BASE64):
        raise FormatError(f"{field}_encoding {encoding!r} is not {BASE64!r}")
    if isinstance(value, str):
        return _base64(value, field) if encoding == BASE64 else value.encode()
    if encoding == BASE64:
        raise FormatError(f"{field} is not a base64 string")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _base64(text: str, field: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise FormatError(f"{field} is not base64") from None


def _json_headers(headers: Any, encoding: Any) -> Headers:
    if headers is None:
        return ()
    if isinstance(headers, dict):
        pairs = list(headers.items())
    elif isinstance(headers, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in headers):
        pairs = [(pair[0], pair[1]) for pair in headers]
    else:
        raise FormatError("headers is neither an object nor a list of [name, value] pairs")
    if not all(isinstance(name, str) for name, _ in pairs):
        raise FormatError("a header name is not a string")
    return tuple((name, _json_bytes(value, encoding, f"header {name!r}")) for name, value in pairs)


# ---- out: consume ----

Render = Callable[[Message], bytes]


def render_raw(message: Message, key_separator: bytes | None = None) -> bytes:
    """The value and a newline; with `key_separator`, the key (empty if none) and it first."""
    value = message.value or b""
    if key_separator is None:
        return value + b"\n"
    return (message.key or b"") + key_separator + value + b"\n"


def render_json(message: Message, with_key: bool = True) -> bytes:
    obj: dict[str, Any] = {"topic": message.topic, "partition": message.partition, "offset": message.offset,
                           "timestamp": message.timestamp}
    if with_key:
        _put_text(obj, "key", message.key)
    _put_text(obj, "value", message.value)
    texts = [_text(value) for _, value in message.headers]
    if all(text is not None or value is None for text, (_, value) in zip(texts, message.headers)):
        obj["headers"] = [[name, text] for text, (name, _) in zip(texts, message.headers)]
    else:
        obj["headers"] = [[name, _b64(value)] for name, value in message.headers]
        obj["headers_encoding"] = BASE64
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _put_text(obj: dict[str, Any], field: str, data: bytes | None) -> None:
    text = _text(data)
    if data is not None and text is None:
        obj[field], obj[f"{field}_encoding"] = _b64(data), BASE64
    else:
        obj[field] = text


def _size(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def _headers_text(headers: Headers) -> bytes:
    return b",".join(name.encode() if value is None else name.encode() + b"=" + value for name, value in headers)


FIELDS: dict[str, Render] = {
    "t": lambda m: m.topic.encode(),
    "p": lambda m: str(m.partition).encode(),
    "o": lambda m: str(m.offset).encode(),
    "T": lambda m: str(-1 if m.timestamp is None else m.timestamp).encode(),
    "k": lambda m: m.key or b"",
    "s": lambda m: m.value or b"",
    "K": lambda m: _size(m.key),
    "S": lambda m: _size(m.value),
    "h": lambda m: _headers_text(m.headers),
}


def compile_format(text: str) -> Render:
    """A kcat-like format string (see the module's header) as a function of a message."""
    pieces: list[bytes | Render] = []
    chars = unescape(text)
    i = 0
    while i < len(chars):
        if chars[i] != "%":
            end = chars.find("%", i)
            end = len(chars) if end < 0 else end
            pieces.append(chars[i:end].encode())
            i = end
            continue
        code = chars[i + 1:i + 2]
        if code == "%":
            pieces.append(b"%")
        elif code in FIELDS:
            pieces.append(FIELDS[code])
        else:
            raise FormatError(f"%{code} in the format string is none of %t %p %o %T %k %s %K %S %h %%")
        i += 2
    return lambda message: b"".join(piece if isinstance(piece, bytes) else piece(message) for piece in pieces)


def renderer(name: str, key: bool | None = None, key_separator: bytes = b"\t") -> Render:
    """The printer of --format `name` (raw, json or a format string); `key` None is each
    format's default: raw prints no key, json does."""
    if name == "raw":
        separator = key_separator if key else None
        return lambda message: render_raw(message, separator)
    if name == "json":
        with_key = key is not False
        return lambda message: render_json(message, with_key)
    if "%" not in name:
        raise FormatError(f"format {name!r} is not raw, json or a format string with % fields (such as '%k %s\\n')")
    return compile_format(name)
