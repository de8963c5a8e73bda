"""The key and value of a control record: the one record of a control batch (KIP-98).

A transaction coordinator ends a transaction by writing, into every partition the producer
wrote to, a batch with the control and transactional bits set, the producer's id and epoch,
base_sequence -1, and one record whose (big-endian) key and value are:

    key    int16 version (0)   int16 type (0 ABORT, 1 COMMIT)      Kafka's ControlRecordType
    value  int16 version (0)   int32 coordinator_epoch            Kafka's EndTransactionMarker

Consumers read the key's type to drop aborted records (read_committed) and skip the batch.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from .errors import InvalidBatch, Reason

CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class Marker(NamedTuple):
    """An end-of-transaction marker as a control record carries it."""

    control_type: ControlType
    coordinator_epoch: int


def marker_key(control_type: ControlType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def parse_marker(key: bytes | None, value: bytes | None) -> Marker:
    """The marker of a control record; InvalidBatch if it is not a version-0 end marker."""
    if key is None or len(key) < _KEY.size or value is None or len(value) < _VALUE.size:
        raise InvalidBatch(Reason.MALFORMED_RECORDS, "a control record needs a 4-byte key and a 6-byte value")
    version, kind = _KEY.unpack_from(key)
    if version != CONTROL_KEY_VERSION or kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise InvalidBatch(Reason.MALFORMED_RECORDS, f"control key version {version} type {kind} is not a marker")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return Marker(ControlType(kind), coordinator_epoch)
