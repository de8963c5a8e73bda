"""A physical partition: its log, its session S and the session history.

Today writes go straight to the log (handed to the OS on append); the memory tail and
checkpoint C of the Swift write path come in with the store work and keep this interface.
"""

from __future__ import annotations

from collections.abc import Callable

from ..log.batch import BatchHeader, set_leader_epoch
from ..log.config import LogConfig
from ..log.log import PartitionLog
from ..store.base import Store
from .epochs import EpochHistory


class Partition:
    def __init__(self, path: str, log: PartitionLog, history: EpochHistory) -> None:
        self.path = path
        self.log = log
        self.history = history
        self.session = history.latest

    @classmethod
    def open(cls, store: Store, path: str, config: LogConfig, now_ms: Callable[[], int]) -> Partition:
        store.mkdir(path)
        log = PartitionLog.open(store, path, config, now_ms)
        history = EpochHistory.load(store, f"{path}/epochs")
        history.begin(log.end_offset)
        history.save(store, f"{path}/epochs")
        return cls(path, log, history)

    @property
    def start_offset(self) -> int:
        return self.log.start_offset

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.end_offset

    def append(self, batch: bytearray, header: BatchHeader) -> int:
        set_leader_epoch(batch, self.session)
        return self.log.append(batch, header)

    def read(self, offset: int, max_bytes: int) -> bytes:
        return self.log.read(offset, max_bytes)

    def end_offset_for(self, session: int) -> tuple[int, int]:
        return self.history.end_offset_for(session, self.log.end_offset)

    def close(self) -> None:
        self.log.close()
