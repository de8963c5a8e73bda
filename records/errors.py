"""Why a batch is refused: one exception type carrying a Reason.

The reasons are the format's own words; gateway/mapping.py turns each into the Kafka error
code a broker answers (CORRUPT_MESSAGE for a checksum, INVALID_RECORD for a batch that is
not one whole v2 batch, MESSAGE_TOO_LARGE for size). Nothing here knows those codes.
"""

from __future__ import annotations

import enum


class Reason(enum.Enum):
    SHORT = "shorter than a batch header"
    NOT_V2 = "magic is not 2"
    TRUNCATED = "ends before its batch_length says"
    NOT_ONE_BATCH = "more than one batch"
    TOO_LARGE = "larger than the size limit"
    CHECKSUM = "CRC32C does not match"
    RECORD_COUNT = "record count does not match the last offset delta"
    CONTROL_FROM_CLIENT = "a control batch from a client"
    NO_SEQUENCE = "an idempotent batch without a base sequence"
    MALFORMED_RECORDS = "records that do not decode"


class InvalidBatch(ValueError):
    """Bytes that are not an acceptable v2 batch; `reason` says which rule they break."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
