"""Segmented, append-only partition logs with sparse indexes and crash recovery.

Batch headers are Kafka's v2 layout, read and written with martlet.records.header."""

from .config import LogConfig
from .log import PartitionLog
from .producers import ProducerState
from .reader import LogReader, open_readonly

__all__ = [
    "LogConfig",
    "LogReader",
    "PartitionLog",
    "ProducerState",
    "open_readonly",
]
