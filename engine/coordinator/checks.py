"""Checks a record's fields must pass, on both sides of the disk: when a machine makes the
record (ValueError, a bug in the caller) and when a shard replays it (the registry turns the
ValueError into CorruptBatch). Explicit checks rather than asserts: replay relies on them even
under python -O."""

from __future__ import annotations

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def require(condition: bool, problem: str) -> None:
    if not condition:
        raise ValueError(problem)


def is_text(value: object) -> bool:
    """A str that UTF-8 can encode (json.loads lets lone surrogates such as "\\ud800" through)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def is_int(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_key(topic: object, partition: object) -> None:
    """A (topic, partition) pair: a str and a partition index in [0, 2**31)."""
    require(is_text(topic), "topic must be a str")
    require(is_int(partition, 0, I32_MAX), f"bad partition {partition!r}")
