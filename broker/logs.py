"""How a broker's log lines look: `text` (one readable line per event) or `json` (one JSON object
per line, for log shippers), at a chosen level, always on standard error (standard output carries
only the start-up lines tools parse)."""

from __future__ import annotations

import json
import logging
import sys
import time

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# LogRecord attributes that are not a caller's `extra=` fields.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """{"time": ISO-8601 UTC with milliseconds, "level", "logger", "message", extra fields...,
    "error": the traceback when there is one}."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry |= {key: value for key, value in vars(record).items() if key not in _STANDARD}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(log_format: str = "text", level: str = "info") -> None:
    """Replaces the root logger's handlers with one on standard error."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The Kafka-facing libraries some processes load log at INFO about their own plumbing.
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, root.level))
