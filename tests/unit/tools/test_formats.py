"""Record formats of `martlet produce` and `martlet consume` (martlet.tools.formats): key
separators, JSON lines both ways, kcat-like format strings."""

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from martlet.tools.formats import (
    FormatError,
    Message,
    Record,
    compile_format,
    json_record,
    parse_header,
    raw_record,
    render_json,
    render_raw,
    renderer,
    split_key,
    unescape,
)

MESSAGE = Message(topic="t", partition=2, offset=41, timestamp=1_700_000_000_123, key=b"k1", value=b"hello",
                  headers=(("a", b"1"), ("b", None)))

names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
data = st.none() | st.binary(max_size=16)
messages = st.builds(Message, topic=st.just("t"), partition=st.integers(0, 99), offset=st.integers(0, 2**40),
                     timestamp=st.none() | st.integers(0, 2**42), key=data, value=data,
                     headers=st.lists(st.tuples(names, data), max_size=3).map(tuple))


# ---- in: key separators, headers, JSON lines ----

def test_the_key_ends_at_the_first_separator():
    assert split_key(b"k:v:w", b":") == (b"k", b"v:w")
    assert split_key(b":v", b":") == (b"", b"v")
    assert split_key(b"k:", b":") == (b"k", b"")
    assert split_key(b"k::v", b"::") == (b"k", b"v")


def test_a_line_without_the_separator_or_without_one_given_has_no_key():
    assert split_key(b"just a value", b":") == (None, b"just a value")
    assert split_key(b"k:v", None) == (None, b"k:v")
    assert raw_record(b"k\tv", unescape("\\t").encode(), (("h", b"x"),), 3) == Record(b"v", b"k", (("h", b"x"),), 3)


def test_escapes_in_separators_and_format_strings():
    assert unescape("\\t|\\n|\\\\|\\q") == "\t|\n|\\|\\q"
    assert unescape("trailing\\") == "trailing\\"


def test_headers_are_name_equals_value():
    assert parse_header("trace=a=b") == ("trace", b"a=b")
    assert parse_header("empty=") == ("empty", b"")
    for bad in ("novalue", "=v"):
        with pytest.raises(FormatError):
            parse_header(bad)


def test_json_lines_strings_are_their_bytes_and_other_values_their_json_text():
    record = json_record(b'{"key": "k\\u00e9", "value": {"a": [1, 2]}, "headers": {"h": "x", "n": null}, "partition": 2}')
    assert record == Record(value=b'{"a":[1,2]}', key="ké".encode(), headers=(("h", b"x"), ("n", None)), partition=2)
    assert json_record('{"value": 7}') == Record(value=b"7")
    assert json_record('{"key": "k"}') == Record(value=None, key=b"k")  # no value: a tombstone
    assert json_record('{"value": "v", "headers": [["h", "1"], ["h", "2"]]}').headers == (("h", b"1"), ("h", b"2"))


def test_json_lines_base64_fields():
    line = json.dumps({"key": base64.b64encode(b"\xff").decode(), "key_encoding": "base64", "value": "plain",
                       "headers": [["h", base64.b64encode(b"\x00\x01").decode()]], "headers_encoding": "base64"})
    assert json_record(line) == Record(value=b"plain", key=b"\xff", headers=(("h", b"\x00\x01"),))


@pytest.mark.parametrize("line", [
    "not json", "[1, 2]", '{"partition": -1}', '{"partition": "0"}', '{"partition": true}',
    '{"headers": "h=1"}', '{"headers": [["h"]]}', '{"headers": [[1, "v"]]}',
    '{"value": "!!", "value_encoding": "base64"}', '{"value": 5, "value_encoding": "base64"}',
    '{"value": "v", "value_encoding": "hex"}',
])
def test_bad_json_lines_are_refused(line):
    with pytest.raises(FormatError):
        json_record(line)


# ---- out: raw, JSON, format strings ----

def test_raw_is_the_value_with_the_key_in_front_when_asked():
    assert render_raw(MESSAGE) == b"hello\n"
    assert render_raw(MESSAGE, b"\t") == b"k1\thello\n"
    assert render_raw(Message("t", 0, 0, None, None, None)) == b"\n"
    assert renderer("raw")(MESSAGE) == b"hello\n"
    assert renderer("raw", key=True, key_separator=b"=")(MESSAGE) == b"k1=hello\n"


def test_json_output_fields_and_base64_for_bytes_that_are_not_utf8():
    assert json.loads(render_json(MESSAGE)) == {"topic": "t", "partition": 2, "offset": 41, "timestamp": 1_700_000_000_123,
                                                "key": "k1", "value": "hello", "headers": [["a", "1"], ["b", None]]}
    binary = json.loads(render_json(Message("t", 0, 5, None, b"\xfe", b"\xff\x00", (("h", b"\x80"), ("g", b"ok")))))
    assert binary["key"] == "/g==" and binary["key_encoding"] == "base64"
    assert binary["value"] == "/wA=" and binary["value_encoding"] == "base64"
    assert binary["headers"] == [["h", "gA=="], ["g", "b2s="]] and binary["headers_encoding"] == "base64"
    assert "key" not in json.loads(renderer("json", key=False)(MESSAGE))
    assert render_json(MESSAGE).endswith(b"}\n") and render_json(MESSAGE).count(b"\n") == 1


def test_format_strings_are_kcat_like():
    render = compile_format("%t/%p@%o %T [%k]=%s (%K, %S) {%h} 100%%\\n")
    assert render(MESSAGE) == b"t/2@41 1700000000123 [k1]=hello (2, 5) {a=1,b} 100%\n"
    assert compile_format("%k|%s|%K|%S|%T|%h\t")(Message("t", 0, 0, None, None, None)) == b"||-1|-1|-1|\t"
    assert renderer("%s\\n")(MESSAGE) == b"hello\n"


@pytest.mark.parametrize("bad", ["%x", "trailing %", "%"])
def test_unknown_format_fields_are_refused(bad):
    with pytest.raises(FormatError):
        compile_format(bad)


def test_a_format_name_that_is_neither_raw_json_nor_a_format_string_is_refused():
    with pytest.raises(FormatError, match="jsno"):
        renderer("jsno")


# ---- round trips: what consume prints, produce reads back ----

@given(messages)
def test_json_lines_round_trip(message):
    record = json_record(render_json(message))
    assert (record.key, record.value, record.headers, record.partition) == (
        message.key, message.value, message.headers, message.partition)


@given(st.binary(max_size=16).filter(lambda b: b"\t" not in b and b"\n" not in b), st.binary(max_size=16).filter(
    lambda b: b"\n" not in b))
def test_raw_lines_with_a_key_round_trip(key, value):
    line = renderer("raw", key=True)(Message("t", 0, 0, None, key, value))
    assert line.endswith(b"\n")
    assert raw_record(line[:-1], b"\t") == Record(value=value, key=key)
    assert raw_record(compile_format("%k\t%s")(Message("t", 0, 0, None, key, value)), b"\t") == Record(value, key)
