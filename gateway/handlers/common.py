"""Small helpers shared by handler modules."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode


def millis(value: Any) -> int:
    """kio hands durations over as timedelta; Kafka speaks milliseconds."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)  # exact: floats turned 1001 ms into 1000
    return int(value)


def epoch_error(requested: int, session: int) -> ErrorCode:
    """KIP-320: a reader names the leader epoch it believes current (-1: no opinion)."""
    if requested < 0 or requested == session:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if requested < session else ErrorCode.unknown_leader_epoch
