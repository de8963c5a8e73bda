"""Segmented, append-only partition logs with sparse indexes and crash recovery."""

from .batch import HEADER_BYTES, BatchHeader, crc_ok, iter_batches, parse_header, set_base_offset, set_leader_epoch
from .config import LogConfig
from .log import PartitionLog
from .producers import ProducerState
from .reader import LogReader, open_readonly

__all__ = [
    "HEADER_BYTES",
    "BatchHeader",
    "LogConfig",
    "LogReader",
    "PartitionLog",
    "ProducerState",
    "crc_ok",
    "iter_batches",
    "open_readonly",
    "parse_header",
    "set_base_offset",
    "set_leader_epoch",
]
