"""The topics service: look topics up, and create, delete, grow and reconfigure them.

Lookups answer from the catalog's memory on the event loop. Every change writes to the store
(topic.json, partition directories, log recovery when a partition opens), so it runs on one
admin worker thread; one thread also keeps changes in the order they were asked for. The
loop then starts or stops serving the partitions involved (`Partitions.add` / `remove`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from concurrent.futures import wait
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .catalog.catalog import Catalog, CatalogChanges, Dynamic, topic_dir
from .catalog.config import Overrides, TopicConfig
from .catalog.names import RESERVED, check_name
from .catalog.topic import Topic
from .cluster import ClusterView
from .errors import EngineError, InvalidPartitionCount, TopicExists
from .groups.types import TopicLookup
from .log.config import LogConfig
from .partition.memory import MemoryPool
from .partition.partition import Partition, close_logs
from .partitions import Partitions
from .store.base import Store
from .store.workers import Workers
from .types import TopicPartition

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PartitionOpener:
    """Opens a topic's partitions on the store (worker thread: recovery reads and writes)."""

    store: Store
    pool: MemoryPool
    index_interval_bytes: int
    now_ms: Callable[[], int]
    shared: bool = False  # other nodes write this store (a cluster): each opening starts its own segment

    def open(self, topic: Topic, index: int) -> Partition:
        partition = Partition.open(self.store, f"{topic_dir(topic)}/{index}", self.log_config(topic), self.now_ms,
                                   self.pool, topic.config.flush_mode == "sync", own_segment=self.shared)
        partition.visibility = topic.config.visibility
        return partition

    def log_config(self, topic: Topic) -> LogConfig:
        config = topic.config
        return LogConfig(segment_bytes=config.segment_bytes, segment_ms=config.segment_ms,
                         segment_jitter_ms=config.segment_jitter_ms,
                         retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
                         index_interval_bytes=self.index_interval_bytes, deletes=config.deletes,
                         compacted=config.compacted, delete_retention_ms=config.delete_retention_ms,
                         min_compaction_lag_ms=config.min_compaction_lag_ms,
                         max_compaction_lag_ms=config.max_compaction_lag_ms,
                         min_cleanable_ratio=config.min_cleanable_ratio)


logger = logging.getLogger(__name__)
# (the dynamic settings, this node's id) -> how they change the topic defaults here
DynamicChanges = Callable[[Dynamic, int], Overrides]
LOADERS = 64  # partitions opened at once (created, grown, or moved here): each mostly waits for the store
TOPIC_LOCK_S = 30.0  # longest a topic change waits for another node's
# Deadlines of the store work (engine/store/workers.py): opening one partition (lease
# recovery on HDFS waits up to 120 s), and one catalog change, which opens its new partitions
# (10,000 at most, LOADERS at a time: 5,000 took 34 s on the reference HDFS).
LOAD_S = 300.0
ADMIN_S = 600.0


class SharedCatalog(Protocol):
    """Other nodes change the same catalog (a cluster: engine/zookeeper/member.py)."""

    def lock_topics(self, timeout_s: float) -> None:
        """Blocking: take the cluster-wide lock held around every topic change; raises
        TimeoutError if another node holds it longer than `timeout_s`."""
        ...

    def unlock_topics(self) -> None:
        ...

    def topics_changed(self) -> None:
        """Blocking: tell the other nodes to re-read the catalog."""
        ...


class Topics:
    def __init__(self, catalog: Catalog, partitions: Partitions, defaults: TopicConfig, opener: PartitionOpener,
                 cluster: ClusterView, dynamic_changes: DynamicChanges | None = None) -> None:
        self._catalog = catalog
        self._partitions = partitions
        self.static_defaults = defaults  # what the settings give
        self.defaults = defaults  # the static ones with the dynamic settings' changes (see `dynamic_changes`)
        # How the dynamic settings change the defaults on this node (the gateway's dynamic
        # broker configs define them); None: they change nothing.
        self._dynamic_changes = dynamic_changes
        self._opener = opener
        self._cluster = cluster
        self._admin = Workers(1, "martlet-admin", deadline_s=ADMIN_S)
        self._loaders = Workers(LOADERS, "martlet-load", deadline_s=LOAD_S)  # partitions created, grown or moved here
        self.shared: SharedCatalog | None = None  # set in a cluster: changes then take its lock
        self._node_change = asyncio.Lock()  # one change at a time here: the cluster's lock is one object per node
        self._recording: dict[str, asyncio.Task[None]] = {}  # topic -> its split points being recorded

    # -- lookups (event loop, memory only)

    def __iter__(self) -> Iterator[Topic]:
        return iter(self._catalog)

    def lookup(self) -> TopicLookup:
        """The catalog as the consumer-group machine reads it (partition counts, ids, names)."""
        def partitions_of(name: str) -> int | None:
            topic = self._catalog.find(name)
            return None if topic is None else topic.partition_count

        def topic_id_of(name: str) -> str | None:
            topic = self._catalog.find(name)
            return None if topic is None else topic.resource.uid.hex

        return TopicLookup(partitions_of, topic_id_of, lambda: [topic.name for topic in self._catalog])

    def find(self, name: str) -> Topic | None:
        return self._catalog.find(name)

    def get(self, name: str) -> Topic:
        """UnknownTopic if there is none."""
        return self._catalog.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((topic for topic in self._catalog if topic.resource.uid == topic_id), None)

    def config_for(self, overrides: Overrides) -> TopicConfig:
        """The configuration these overrides give a topic; InvalidConfig if they are bad."""
        return self.defaults.updated(overrides)

    # -- changes (store work on the admin thread)

    @property
    def dynamic(self) -> Dynamic:
        """The dynamic settings by scope ("" for the cluster, a node id for one node)."""
        return self._catalog.dynamic

    async def set_dynamic(self, scope: str, values: Mapping[str, str]) -> None:
        """Replace the dynamic settings of `scope`; InvalidConfig if the defaults they give are bad."""
        async with self._changing():
            dynamic = {key: dict(found) for key, found in self._catalog.dynamic.items() if key != scope}
            if values:
                dynamic[scope] = dict(values)
            self._defaults_for(dynamic)  # checked before anything is written
            await self._off_loop(self._catalog.save_dynamic, dynamic)
        self.rebase_defaults()

    def _defaults_for(self, dynamic: Dynamic) -> TopicConfig:
        if self._dynamic_changes is None:
            return self.static_defaults
        return self.static_defaults.updated(self._dynamic_changes(dynamic, self._cluster.local().node_id))

    def rebase_defaults(self) -> None:
        """Event loop: derive the defaults from the dynamic settings again, and every topic's
        configuration from them."""
        self.defaults = self._defaults_for(self._catalog.dynamic)
        for topic in self._catalog.rebase(self.defaults):
            self._apply_config(topic)

    def open_all(self) -> None:
        """At start-up, before anything is served: load the catalog and open every partition."""
        self._catalog.load()
        self.rebase_defaults()  # nothing is open yet: only the catalog changes
        topics, opened = 0, 0
        for topic in self._catalog:
            topics += 1
            for tp, partition in self._open_partitions(topic, range(topic.partition_count)):
                self._partitions.add(tp, partition)
                opened += 1
        logger.info("opened %d partitions of %d topics", opened, topics)

    def check_new(self, name: str, count: int, overrides: Overrides) -> None:
        """CreateTopics with validate_only: the checks a creation makes, and nothing else."""
        check_name(name)
        if self._catalog.find(name) or name in RESERVED:
            raise TopicExists(f"topic {name!r} already exists")
        if count < 1:
            raise InvalidPartitionCount(f"partition count must be at least 1, not {count}")
        self.config_for(overrides)

    async def create(self, name: str, count: int, overrides: Overrides, replication_factor: int = 1) -> Topic:
        """A new topic; `replication_factor` is only recorded (see catalog/topic.py)."""
        config = self.config_for(overrides)
        async with self._changing():
            topic, opened = await self._off_loop(self._create_now, name, count, config, frozenset(overrides),
                                                 replication_factor)
        self._serve(opened)
        logger.info("topic %s created: %d partitions, resource name %s", name, count, topic.resource)
        return topic

    async def delete(self, name: str) -> Topic:
        async with self._changing():
            topic = self._catalog.get(name)
            keys = [TopicPartition(name, index) for index in range(topic.partition_count)]
            closing = [self._partitions.remove(tp) for tp in keys if self._partitions.get_open(tp) is not None]
            for partition in closing:
                partition.close()
            deleted = await self._off_loop(self._delete_now, name, closing)
        logger.info("topic %s deleted (%d partitions)", name, deleted.partition_count)
        return deleted

    async def grow(self, name: str, count: int, validate_only: bool = False) -> Topic:
        async with self._changing():
            return await self._grow(name, count, validate_only)

    async def _grow(self, name: str, count: int, validate_only: bool) -> Topic:
        topic = self._catalog.get(name)
        if count <= topic.partition_count:
            raise InvalidPartitionCount(
                f"topic {name!r} has {topic.partition_count} partitions; it cannot go to {count}")
        if validate_only:
            return topic
        old = topic.partition_count
        topic, opened = await self._off_loop(self._grow_now, name, old, count)
        self._serve(opened)
        topic = await self._off_loop(self._catalog.record_splits, name, self._split_points(topic, old))
        logger.info("topic %s grew from %d to %d partitions (topic version %d)", name, old, count, topic.version)
        return topic

    async def reconfigure(self, name: str, overrides: Overrides, validate_only: bool = False) -> Topic:
        """Replace the topic's overrides: names not in `overrides` go back to defaults."""
        topic = self._catalog.get(name)
        config = self.config_for(overrides)
        if validate_only:
            return topic
        async with self._changing():
            topic = await self._off_loop(self._catalog.reconfigure, name, config, frozenset(overrides))
        self._apply_config(topic)
        return topic

    @contextlib.asynccontextmanager
    async def _changing(self) -> AsyncIterator[None]:
        """Around a topic change: in a cluster, hold the cluster's topic lock, start from the
        catalog as the store has it now, and tell the other nodes once done."""
        if self.shared is None:
            yield
            return
        shared, loop = self.shared, asyncio.get_running_loop()
        async with self._node_change:
            # Changes sent to one node at once (clients send CreateTopics to the controller)
            # would otherwise use the node's one ZooKeeper lock from several threads at once,
            # which leaves a lock node behind that nobody releases: every later change then
            # times out. A change cancelled while it waits for the lock releases it once taken.
            taking = loop.run_in_executor(None, shared.lock_topics, TOPIC_LOCK_S)
            try:
                await asyncio.shield(taking)
            except asyncio.CancelledError:
                taking.add_done_callback(lambda done: None if done.cancelled() or done.exception() is not None
                                         else loop.run_in_executor(None, shared.unlock_topics))
                raise
            try:
                await self.refresh()
                yield
                await loop.run_in_executor(None, shared.topics_changed)
            finally:
                await loop.run_in_executor(None, shared.unlock_topics)

    async def refresh(self) -> CatalogChanges:
        """Pick up topic changes another process made on the store: serve the partitions of
        topics created or grown there (those this node owns), stop serving those of deleted
        topics, apply new configurations."""
        changes = await self._off_loop(self._catalog.reload)
        closing = []
        for topic in changes.deleted:
            for index in range(topic.partition_count):
                if self._partitions.get_open(TopicPartition(topic.name, index)) is not None:
                    closing.append(self._partitions.remove(TopicPartition(topic.name, index)))
        for partition in closing:
            partition.close()
        opened = await self._off_loop(self._open_changed, changes, closing)
        self._serve(opened)
        for _, after in changes.reconfigured:
            self._apply_config(after)
        self.rebase_defaults()  # another node may have changed the dynamic settings
        for topic in self._catalog:  # a grown topic read between its two writes has its splits only now
            self._record_split_points_later(topic)
        return changes

    def expect(self, tp: TopicPartition) -> None:
        """Event loop: this node is about to open `tp` (the cluster gave it here); until it is
        open, or `stop_expecting`, produce requests for it wait instead of being refused."""
        self._partitions.expect(tp)

    def stop_expecting(self, tp: TopicPartition) -> None:
        self._partitions.stop_expecting(tp)

    async def load(self, tp: TopicPartition) -> bool:
        """Start serving one partition the cluster gave this node: open it from the store (a
        new session S) and serve it. False if the catalog has no such partition (yet)."""
        topic = self._catalog.find(tp.topic)
        if topic is None or tp.partition >= topic.partition_count:
            await self.refresh()
            topic = self._catalog.find(tp.topic)
            if topic is None or tp.partition >= topic.partition_count:
                return False
        if self._partitions.get_open(tp) is None:
            loop = asyncio.get_running_loop()  # loads run side by side: each touches only its own directory
            began = loop.time()
            partition = await loop.run_in_executor(self._loaders, self._opener.open, topic, tp.partition)
            self._partitions.add(tp, partition)
            logger.info("%s/%d opened in %.2f s: session %d, end offset %d", tp.topic, tp.partition,
                        loop.time() - began, partition.session, partition.end_offset)
            self._record_split_points_later(topic)
        return True

    async def unload(self, tp: TopicPartition, drain_s: float) -> bool:
        """Stop serving one partition: refuse new writes at once, wait up to `drain_s` for
        what it holds to be persisted, then close its files (which lets the next owner open
        them). False if something taken in was not persisted in time (it is dropped)."""
        partition = self._partitions.get_open(tp)
        if partition is None:
            return True
        self._partitions.remove(tp)
        persisted = await self._partitions.persist_now(partition, drain_s)
        partition.close()
        await self._off_loop(partition.close_log)
        logger.info("%s/%d unloaded%s", tp.topic, tp.partition, "" if persisted else " with unpersisted data dropped")
        return persisted

    def _apply_config(self, topic: Topic) -> None:
        log_config = self._opener.log_config(topic)
        for index in range(topic.partition_count):
            partition = self._partitions.get_open(TopicPartition(topic.name, index))
            if partition is not None:
                partition.log.config = log_config
                partition.sync_flush = topic.config.flush_mode == "sync"
                partition.visibility = topic.config.visibility

    def close(self) -> None:
        self._admin.shutdown()
        self._loaders.shutdown()

    # -- on the admin thread

    def _create_now(self, name: str, count: int, config: TopicConfig, overrides: frozenset[str],
                    replication_factor: int) -> tuple[Topic, list[tuple[TopicPartition, Partition]]]:
        topic = self._catalog.create(name, count, config, overrides, self._opener.now_ms(), replication_factor)
        return topic, self._open_partitions(topic, range(count))

    def _grow_now(self, name: str, old: int, count: int) -> tuple[Topic, list[tuple[TopicPartition, Partition]]]:
        topic = self._catalog.grow(name, count)
        return topic, self._open_partitions(topic, range(old, count))

    def _delete_now(self, name: str, closing: list[Partition]) -> Topic:
        for error in close_logs(closing, discard=True):
            if error is not None:
                raise error
        return self._catalog.delete(name)

    def _open_changed(self, changes: CatalogChanges, closing: list[Partition]) -> list[tuple[TopicPartition, Partition]]:
        for error in close_logs(closing, discard=True):  # a file already gone with its topic is logged there
            if error is not None:
                raise error
        opened = []
        for topic in changes.created:
            opened += self._open_partitions(topic, range(topic.partition_count))
        for before, after in changes.grown:
            opened += self._open_partitions(after, range(before.partition_count, after.partition_count))
        return opened

    def _open_partitions(self, topic: Topic, indexes: range) -> list[tuple[TopicPartition, Partition]]:
        """The partitions of `topic` at `indexes` that this node serves, opened LOADERS at a
        time (on HDFS a new partition's files cost about half a second, mostly waiting for
        the NameNode to complete its sessions file: 5,000 took about 350 s eight at a time,
        34 s at 64)."""
        served = [index for index in indexes if self._cluster.owns(topic.name, index)]
        opening = [self._loaders.submit(self._opener.open, topic, index) for index in served]
        wait(opening)
        return [(TopicPartition(topic.name, index), future.result()) for index, future in zip(served, opening, strict=True)]

    # -- helpers

    def _split_points(self, topic: Topic, old_count: int) -> list[tuple[int, int, int]]:
        """(child, parent, the parent's end now) for the partitions from `old_count` on: read
        on the event loop after the new V took effect here, so every write routed by the old
        ranges is below it (-1, pending: another node serves the parent and records it, see
        `_record_split_points`)."""
        found = []
        for child, parent in topic.parents(old_count):
            opened = self._partitions.get_open(TopicPartition(topic.name, parent))
            found.append((child, parent, -1 if opened is None else opened.tail.end))
        return found

    def _pending_here(self, topic: Topic) -> list[tuple[int, int, int]]:
        """The pending split points (offset -1) of `topic` whose parent this node serves,
        with the parent's end now."""
        found = []
        for child, parent, offset in topic.splits:
            opened = self._partitions.get_open(TopicPartition(topic.name, parent)) if offset < 0 else None
            if opened is not None:
                found.append((child, parent, opened.tail.end))
        return found

    def _record_split_points_later(self, topic: Topic) -> None:
        """In a cluster the node that grows a topic knows the split points only of the parents
        it serves; the others are recorded by their parent's owner once it has the new V (its
        catalog refreshed, or the parent loaded from a catalog that has it): from then on it
        refuses writes naming the old V, so the parent's end then bounds them all."""
        if self.shared is None or topic.name in self._recording or not self._pending_here(topic):
            return
        task = asyncio.get_running_loop().create_task(self._record_split_points(topic.name))
        self._recording[topic.name] = task
        task.add_done_callback(lambda _: self._recording.pop(topic.name, None))

    async def _record_split_points(self, name: str) -> None:
        try:
            async with self._changing():  # its refresh reads the catalog as the store has it now
                topic = self._catalog.find(name)
                found = [] if topic is None else self._pending_here(topic)
                if found:
                    await self._off_loop(self._catalog.record_splits, name, found)
                    logger.info("topic %s: split points recorded (child, parent, offset): %s", name, found)
        except (OSError, TimeoutError, EngineError) as error:
            # Native readers then hold the children back until a later owner records them.
            logger.warning("topic %s: split points not recorded: %s", name, error)

    def _serve(self, opened: list[tuple[TopicPartition, Partition]]) -> None:
        for tp, partition in opened:
            self._partitions.add(tp, partition)

    async def _off_loop(self, call: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._admin, call, *args)
