"""Coordinator records on disk: one record per engine batch, and the registry of kinds.

Each record is appended to its shard's log as one batch in the v2 batch layout
(martlet.records.header): the 61-byte header with magic 2, attributes 0, last_offset_delta 0,
record_count 1, producer_id -1 (producer_epoch and base_sequence -1, leader_epoch -1), both
timestamps = the time of the write, and a correct CRC32C. What follows the header is NOT a
Kafka record: these logs are never served to clients, so the payload is our own format,
compact UTF-8 JSON, an object {"v":1,"type":T, ...} whose other fields are kind T's
(machine.py; each machine's records module documents its kinds).

A record is checked when it is encoded (ValueError) and again when it is read back
(CorruptBatch: a payload that passed its CRC yet breaks the invariants was written by a bug,
and the open stops rather than rebuild a wrong state).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ...records.header import (
    HEADER_BYTES,
    LENGTH_FIELD_END,
    MAGIC,
    BatchHeader,
    crc_ok,
    pack_header,
    parse_header,
    set_crc,
)
from ..errors import CorruptBatch
from .checks import require
from .machine import FORMAT_VERSION, Json, Kind, Machine, State

PAYLOAD_BYTES_MAX = 2**31 - 1 - HEADER_BYTES  # batch_length is an i32


class Registry:
    """Every record kind of the machines a runtime serves, by name and by type."""

    def __init__(self, machines: Iterable[Machine[State]]) -> None:
        self.machines = tuple(machines)
        self._by_name: dict[str, Kind[Json]] = {}
        self._by_type: dict[type, tuple[str, Kind[Json]]] = {}
        for machine in self.machines:
            for kind in machine.kinds:
                if kind.name in self._by_name or kind.type in self._by_type:
                    raise ValueError(f"record kind {kind.name!r} is registered twice")
                self._by_name[kind.name] = kind
                self._by_type[kind.type] = (machine.name, kind)

    def owner(self, record: object) -> tuple[str, str]:
        """(machine name, key): whose record it is."""
        machine, kind = self._entry(record)
        return machine, kind.key(record)

    def machine_of(self, record: object) -> str:
        return self._entry(record)[0]

    def encode(self, record: object) -> bytes:
        return self._entry(record)[1].payload(record)

    def decode(self, payload: bytes) -> object:
        """Parse and check a payload; anything unexpected is CorruptBatch."""
        try:
            body = json.loads(payload)
            require(isinstance(body, dict) and body.get("v") == FORMAT_VERSION, "not a version 1 record")
            kind = self._by_name.get(body["type"])
            if kind is None:
                raise ValueError(f"unknown record type {body['type']!r}")
            record: object = kind.parse(body)
            kind.check(record)
        except (ValueError, TypeError, KeyError, RecursionError) as error:  # UnicodeError is a ValueError
            raise CorruptBatch(f"bad coordinator record: {error}") from None
        return record

    def to_batch(self, record: object, now_ms: int) -> tuple[bytearray, BatchHeader]:
        """The batch (and its header) that holds `record`, ready for PartitionLog.append."""
        payload = self.encode(record)
        require(len(payload) <= PAYLOAD_BYTES_MAX, "coordinator record too large for one batch")
        length = HEADER_BYTES - LENGTH_FIELD_END + len(payload)
        header = BatchHeader(0, length, -1, MAGIC, 0, 0, 0, now_ms, now_ms, -1, -1, -1, 1)
        batch = bytearray(pack_header(header)) + payload
        set_crc(batch)
        return batch, parse_header(batch)

    def from_batch(self, batch: bytes | memoryview, header: BatchHeader) -> object:
        """The record a stored batch holds; CorruptBatch if it is not one of ours."""
        shape = (header.magic, header.attributes, header.last_offset_delta, header.record_count, header.producer_id)
        if shape != (MAGIC, 0, 0, 1, -1):
            raise CorruptBatch(f"not a coordinator batch: {header}")
        if len(batch) != header.size or not crc_ok(batch, 0, header):
            raise CorruptBatch(f"coordinator batch at {header.base_offset} fails its checksum")
        return self.decode(bytes(batch[HEADER_BYTES:]))

    def _entry(self, record: object) -> tuple[str, Kind[Json]]:
        entry = self._by_type.get(type(record))
        if entry is None:
            raise ValueError(f"not a record of a registered kind: {record!r}")
        return entry
