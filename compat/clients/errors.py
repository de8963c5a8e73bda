"""Error names as the driver interface reports them (see base.py): Kafka's own upper-snake
names, taken from kio's table of Kafka error codes, so every client reports code 10 as
"MESSAGE_TOO_LARGE" whatever its own spelling ("MSG_SIZE_TOO_LARGE" in librdkafka,
"MESSAGE_SIZE_TOO_LARGE" in kafka-python)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

NONE = "NONE"


def kafka_error_name(code: int) -> str:
    """Kafka's name for a broker error code; unknown codes keep their number."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_CODE_{code}"


def client_error(what: str) -> str:
    """An error the client raised without a Kafka error code. `what` should be stable across
    brokers (an exception class or a client's error name, not a message naming a topic)."""
    return f"CLIENT_ERROR: {what}"


def errno_name(exc: BaseException) -> str:
    """kafka-python and aiokafka exceptions carry the Kafka code as `errno`, and local
    errors share the generic codes -1 or None; those become client errors."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        return kafka_error_name(code)
    return client_error(type(exc).__name__)
