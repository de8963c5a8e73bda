"""The engine's async facade: the one place in the engine that knows asyncio.

The gateway calls it; it owns the catalog and the open partitions, wakes long-polling
readers when data arrives, and runs retention in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from .catalog.catalog import Catalog, topic_dir
from .catalog.config import TopicConfig
from .catalog.topic import Topic
from .clock import SystemClock
from .errors import UnknownPartition
from .groups.service import Groups
from .log.batch import BatchHeader
from .log.config import LogConfig
from .partition.partition import Partition
from .producer_ids import ProducerIds
from .settings import EngineSettings
from .store.base import Store

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]


class Engine:
    def __init__(self, store: Store, settings: EngineSettings, clock: Any = None) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock or SystemClock()
        self.catalog = Catalog(store, settings.owner, settings.topic_partitions_max)
        self.producer_ids = ProducerIds(store)
        self._partitions: dict[PartitionKey, Partition] = {}
        self._waiters: dict[PartitionKey, set[asyncio.Future[None]]] = {}
        self._retention_task: asyncio.Task[None] | None = None
        self.groups: Groups = None  # type: ignore[assignment]  # set by open()

    # -- lifecycle

    def open(self) -> None:
        self.catalog.load()
        for topic in self.catalog:
            self._open_partitions(topic, range(topic.partition_count))
        settings = self.settings
        self.groups = Groups(self.store, settings.groups, self.clock.now_ms, settings.offsets_retention_ms)

    def start_background(self) -> None:
        """Start the timers; needs a running event loop."""
        assert self.groups is not None, "open() first"
        self.groups.start()
        self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop())

    async def close(self) -> None:
        if self._retention_task:
            self._retention_task.cancel()
        if self.groups:
            self.groups.close()
        for partition in self._partitions.values():
            partition.close()
        self._partitions.clear()

    # -- topics

    def topics(self) -> list[Topic]:
        return list(self.catalog)

    def topic(self, name: str) -> Topic:
        return self.catalog.get(name)

    def create_topic(self, name: str, partitions: int, overrides: dict[str, Any]) -> Topic:
        config = self.settings.topic_defaults.updated(overrides)
        topic = self.catalog.create(name, partitions, config, frozenset(overrides), self.clock.now_ms())
        self._open_partitions(topic, range(partitions))
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.catalog.get(name)
        for index in range(topic.partition_count):
            self._partitions.pop((name, index)).close()
            self._wake((name, index))
        return self.catalog.delete(name)

    def grow_topic(self, name: str, count: int) -> Topic:
        old = self.catalog.get(name).partition_count
        topic = self.catalog.grow(name, count)
        self._open_partitions(topic, range(old, count))
        return topic

    def reconfigure_topic(self, name: str, overrides: dict[str, Any]) -> Topic:
        """Replace the topic's overrides: names not in `overrides` go back to defaults."""
        config = self.settings.topic_defaults.updated(overrides)
        topic = self.catalog.reconfigure(name, config, frozenset(overrides))
        for index in range(topic.partition_count):
            self._partitions[(name, index)].log.config = self._log_config(topic)
        return topic

    # -- partitions

    def partition(self, name: str, index: int) -> Partition:
        try:
            return self._partitions[(name, index)]
        except KeyError:
            self.catalog.get(name)
            raise UnknownPartition(f"topic {name!r} has no partition {index}") from None

    def append(self, name: str, index: int, batch: bytearray, header: BatchHeader) -> int:
        offset = self.partition(name, index).append(batch, header)
        self._wake((name, index))
        return offset

    async def wait_for_data(self, watched: Iterable[tuple[PartitionKey, int]], timeout_ms: int) -> None:
        """Return once any watched partition's end offset passes its offset, or on timeout."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = []
        for key, offset in watched:
            partition = self._partitions.get(key)
            if partition is None or partition.end_offset > offset:
                return
            keys.append(key)
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                self._waiters.get(key, set()).discard(future)

    def _wake(self, key: PartitionKey) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)

    def _open_partitions(self, topic: Topic, indexes: range) -> None:
        config = self._log_config(topic)
        for index in indexes:
            path = f"{topic_dir(topic)}/{index}"
            self._partitions[(topic.name, index)] = Partition.open(self.store, path, config, self.clock.now_ms)

    def _log_config(self, topic: Topic) -> LogConfig:
        config: TopicConfig = topic.config
        return LogConfig(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            index_interval_bytes=self.settings.index_interval_bytes,
            sync_every_append=config.flush_mode == "sync",
        )

    def apply_retention(self) -> int:
        self.groups.expire_offsets()
        return sum(partition.log.apply_retention() for partition in self._partitions.values())

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.retention_check_ms / 1000)
            deleted = self.apply_retention()
            if deleted:
                log.info("retention deleted %d segments", deleted)
