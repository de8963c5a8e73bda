"""Log lines: the json format is one parseable object per line with the caller's fields."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from martlet.broker.logs import JsonFormatter, configure


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("martlet.engine.topics", logging.WARNING, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_json_line_has_time_level_logger_message_and_extra_fields() -> None:
    line = JsonFormatter().format(_record("topic %s created", "t1", client_id="cli", peer="127.0.0.1:5"))
    entry = json.loads(line)
    assert entry["level"] == "warning"
    assert entry["logger"] == "martlet.engine.topics"
    assert entry["message"] == "topic t1 created"
    assert entry["client_id"] == "cli" and entry["peer"] == "127.0.0.1:5"
    assert entry["time"].endswith("Z") and "T" in entry["time"]
    assert "\n" not in line


def test_json_line_carries_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    entry = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in entry["error"]


def test_configure_json_writes_to_standard_error(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure("json", "warning")
        logging.getLogger("martlet.test").info("not shown")
        logging.getLogger("martlet.test").warning("shown %d", 1)
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    lines = err.getvalue().splitlines()
    assert [json.loads(line)["message"] for line in lines] == ["shown 1"]


@pytest.mark.parametrize("log_format, level", [("xml", "info"), ("text", "loud")])
def test_configure_refuses_unknown_values(log_format: str, level: str) -> None:
    with pytest.raises(ValueError):
        configure(log_format, level)
