"""The engine: wires the store, the memory pool, the persister and the services together.

The gateway reaches the engine through its services only (engine/api.py lists them):
`topics` (the catalog), `partitions` (reads and writes), `groups` (the group coordinator and
committed offsets) and `producer_ids`. `Engine` itself only opens and closes them, and runs
retention in the background.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .catalog.catalog import Catalog
from .clock import Clock, SystemClock
from .cluster import ClusterView, EmbeddedCluster, NodeIdentity, new_cluster_id
from .coordinator.runtime import Runtime
from .groups import records as membership
from .groups.service import Groups, MemberIds
from .ids import Ids, RandomIds
from .offsets import state as offsets
from .offsets.service import Offsets
from .ownership import Ownership
from .partition.memory import MemoryPool
from .partition.partition import close_logs
from .partition.persister import FlushLimits, Persister
from .partitions import Partitions
from .producer_ids import ProducerIds
from .settings import EngineSettings
from .store.atomic import read_whole, write_atomically
from .store.base import Store
from .store.cache import CachedStore
from .store.workers import Workers
from .topics import DynamicChanges, PartitionOpener, Topics
from .transactions import records as transactions
from .transactions.service import SendMarkers, Transactions
from .types import TopicPartition
from .zookeeper.layout import unit_key

if TYPE_CHECKING:
    from .partition.partition import Partition
    from .zookeeper.member import ZooKeeperCluster

logger = logging.getLogger(__name__)
MACHINES = (offsets.MACHINE, membership.MACHINE, transactions.MACHINE)  # the coordinator's kinds of state
CLUSTER_ID_PATH = "cluster-id"
READ_AHEAD_THREADS = 2  # runs read ahead at once (two 7 MiB reads nearly fill the reference HDFS, measured)
READ_AHEAD_SHARE = 4  # at most this fraction of the memory budget is read ahead and not read yet


@dataclass(frozen=True, slots=True)
class Hooks:
    """What the engine asks of the process around it, given at construction: how to send
    transaction markers to the node serving a partition (Kafka's WriteTxnMarkers, a cluster
    only), and how the dynamic broker settings change the topic defaults on a node."""

    send_markers: SendMarkers | None = None
    dynamic_changes: DynamicChanges | None = None


class Engine:
    def __init__(self, store: Store, settings: EngineSettings, clock: Clock | None = None,
                 cluster: ClusterView | None = None, ids: Ids | None = None, hooks: Hooks | None = None) -> None:
        self.store = store
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.ids: Ids = ids or RandomIds()
        self._hooks = hooks or Hooks()
        self.cluster: ClusterView = cluster or EmbeddedCluster()  # who serves what (engine/cluster.py)
        self.producer_ids = ProducerIds(store)
        self.pool = MemoryPool(settings.memory_bytes, self.clock.monotonic)
        # On a store reached over the network, a block cache and read-ahead for cold consumers
        # (engine/store/cache.py); the local disk is read directly, its page cache does both.
        self._read_ahead: Workers | None = None
        logs_store: Store = store
        if getattr(store, "slow_reads", True):
            self._read_ahead = Workers(READ_AHEAD_THREADS, "martlet-read-ahead")
            logs_store = cached = CachedStore(store, self.pool.reclaim_soon, monotonic=self.clock.monotonic,
                                              read_ahead=self._read_ahead,
                                              ahead_bytes_max=settings.memory_bytes // READ_AHEAD_SHARE)
            self.pool.attach_blocks(cached)
        limits = FlushLimits(flush_bytes=settings.flush_bytes, flush_ms=settings.flush_ms,
                             threads=settings.flush_threads, publish_ms=settings.checkpoint_publish_ms)
        self.persister = Persister(limits, self.clock, inline=not getattr(store, "slow_writes", True))
        self.partitions = Partitions(self.persister, self.pool, settings.read_threads,
                                     lambda tp: self.cluster.owns(tp.topic, tp.partition))
        opener = PartitionOpener(logs_store, self.pool, settings.index_interval_bytes, self.clock.now_ms,
                                 shared=not isinstance(self.cluster, EmbeddedCluster))
        self.topics = Topics(Catalog(store, settings.owner, settings.topic_partitions_max, self.ids.uuid), self.partitions,
                             settings.topic_defaults, opener, self.cluster, self._hooks.dynamic_changes)
        self._retention_task: asyncio.Task[None] | None = None
        self._compaction_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[object]] = set()
        self.ownership: Ownership | None = None  # in a cluster (follow_cluster)
        self.coordinator: Runtime = None  # type: ignore[assignment]  # set by open()
        self.offsets: Offsets = None  # type: ignore[assignment]  # set by open()
        self.groups: Groups = None  # type: ignore[assignment]  # set by open()
        self.transactions: Transactions = None  # type: ignore[assignment]  # set by open()
        self.cluster_id = ""  # set by open()

    # -- lifecycle

    def open(self) -> None:
        """Load topics and offsets and open every partition: start-up store work, done before
        anything is served."""
        self.cluster_id = self.cluster.cluster_id() or _cluster_id(self.store, self.ids)
        self.topics.open_all()
        settings = self.settings
        self.coordinator = Runtime.open(self.store, self.clock.now_ms, settings.offsets_shards, MACHINES,
                                        self.cluster.owns_shard)
        self.offsets = Offsets(self.coordinator)
        self.groups = Groups(self.coordinator, self.offsets, settings.groups, self.clock.now_ms,
                             settings.offsets_retention_ms, ids=MemberIds.drawn_from(self.ids))
        self.transactions = Transactions(self.coordinator, self.offsets.end_txn, self.partitions, self.producer_ids,
                                         self.cluster, self.clock.now_ms, self._hooks.send_markers)

    async def open_within(self, deadline_s: float) -> None:
        """`open` on a thread of its own, StoreTimeout past `deadline_s`: a store that does not
        answer at start-up ends the start with an error instead of holding it forever."""
        opener = Workers(1, "martlet-open")
        try:
            await asyncio.wrap_future(opener.call(self.open, "opening the topics, partitions and coordinator shards",
                                                  deadline_s))
        finally:
            opener.shutdown()

    def start_background(self) -> None:
        """Start the timers; needs a running event loop."""
        assert self.groups is not None, "open() first"
        self.pool.bind(asyncio.get_running_loop())
        self.groups.start()
        self.transactions.start()
        loop = asyncio.get_running_loop()
        self._retention_task = loop.create_task(self._retention_loop())
        self._compaction_task = loop.create_task(self._compaction_loop())

    async def close(self) -> None:
        for task in (self._retention_task, self._compaction_task):
            if task is not None:
                task.cancel()
        if self.ownership is not None:
            await self.ownership.close()
        if self.transactions is not None:
            await self.transactions.close()
        if self.groups:
            await self.groups.close()
        if self.coordinator is not None:
            await self.coordinator.close()
        partitions = list(self.partitions.opened())
        if not await self.persister.drain(partitions, self.settings.drain_ms / 1000):
            lost = sum(p.tail.unpersisted_bytes for p in partitions)
            logger.error("closing with %d bytes not persisted: the store did not take them in time", lost)
        for partition in partitions:
            partition.close()
        await _close_logs(partitions)
        self.persister.close()
        self.partitions.shutdown()
        if self._read_ahead is not None:
            self._read_ahead.shutdown()
        self.topics.close()

    def follow_cluster(self, member: ZooKeeperCluster) -> None:
        """In a cluster, after start_background: load and drop what the admin assigns this
        node (engine/ownership.py), re-read the catalog when another node changes a topic,
        and report traffic for placement by load."""
        self.ownership = Ownership(self.topics, lambda: self.coordinator, member.set_held)
        self.topics.shared = member
        member.on_assignment = self.ownership.follow
        member.on_fenced = self.ownership.fence
        member.on_topics_changed = self._refresh_topics
        member.traffic = self._traffic
        self.partitions.may_append = member.may_append

    def _refresh_topics(self) -> None:
        task = asyncio.get_running_loop().create_task(self.topics.refresh())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _traffic(self) -> tuple[dict[str, int], dict[str, int], int, dict[str, int]]:
        """Bytes in and out per partition since start (cumulative), memory in use, and the
        session S of every partition served here."""
        partitions = self.partitions
        sessions = {unit_key(TopicPartition(*tp)): partition.session for tp, partition in partitions.served()}
        return ({unit_key(TopicPartition(*tp)): count for tp, count in list(partitions.bytes_in.items())},
                {unit_key(TopicPartition(*tp)): count for tp, count in list(partitions.bytes_out.items())},
                self.pool.used_bytes, sessions)

    def coordinator_of(self, group_id: str) -> NodeIdentity | None:
        """The node coordinating a group: the owner of its coordinator shard."""
        return self.cluster.shard_owner(self.groups.shard_of(group_id))

    async def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything taken in is persisted; True unless the timeout ran out."""
        return await self.persister.drain(list(self.partitions.opened()), timeout_s)

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.retention_check_ms / 1000)
            try:
                await self.retain()
            except OSError as error:  # the store is down: the next round tries again
                logger.warning("retention and offset expiry failed, retrying in %d ms: %s",
                               self.settings.retention_check_ms, error)

    async def retain(self) -> None:
        """One round of offset expiry and segment retention."""
        await self.groups.expire_offsets()
        deleted = await self.partitions.apply_retention()
        if deleted:
            logger.info("retention deleted %d segments", deleted)

    async def _compaction_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.compaction_check_ms / 1000)
            try:
                cleaned = await self.partitions.compact(self.settings.compaction_map_bytes)
            except OSError as error:  # the store is down: the next round tries again
                logger.warning("log compaction failed, retrying in %d ms: %s", self.settings.compaction_check_ms, error)
                continue
            if cleaned:
                logger.info("compaction rewrote %d segments", cleaned)


def _cluster_id(store: Store, ids: Ids) -> str:
    """The store's cluster id (Kafka's), made on first start."""
    if store.exists(CLUSTER_ID_PATH):
        return read_whole(store, CLUSTER_ID_PATH).decode().strip()
    cluster_id = new_cluster_id(ids)
    write_atomically(store, CLUSTER_ID_PATH, cluster_id.encode())
    return cluster_id


async def _close_logs(partitions: list[Partition]) -> None:
    for error in await asyncio.to_thread(close_logs, partitions):
        if error is not None:
            raise error
