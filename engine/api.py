"""The engine's public surface: everything outside the engine (the gateway, connectors,
tools) imports engine names from here and nowhere else (an import-linter contract holds it).

The services are the only doors in: `Topics` (the catalog), `Partitions` (reads and writes
of partitions, ownership, the durability rule), `Groups` (coordinators and committed
offsets), `Transactions` (the transaction coordinator) and `ProducerIds`. Nothing here
hands out a `Partition`, a `PartitionLog` or the `Catalog` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors
from .catalog.catalog import Dynamic
from .catalog.config import ConfigValue, Kept, Overrides, TopicConfig
from .catalog.topic import Topic
from .clock import Clock, ManualClock
from .cluster import EMBEDDED_NODE_ID, ClusterView, EmbeddedCluster, NodeIdentity
from .coordinator.shard import SEGMENT_BYTES as GROUP_SEGMENT_BYTES
from .faces import GroupsFace, PartitionsFace, ProducerIdsFace, TopicsFace, TransactionsFace
from .groups.classic import GroupLimits
from .groups.service import Groups
from .groups.types import (
    Assignment,
    ConsumerGroupView,
    GroupError,
    HeartbeatRequest,
    JoinRequest,
    SyncRequest,
    TopicLookup,
)
from .log.producers import ActiveProducer
from .partitions import Appended, Durability, Fetched, PartitionInfo, Partitions
from .producer_ids import ProducerIds
from .service import Engine, Hooks
from .settings import EngineSettings
from .stats import LatencyHistogram, StoreStats
from .store.base import Store, location
from .store.local import LocalStore
from .store.timed import TimedStore
from .store.workers import STUCK, StuckCalls
from .stored import partition_reader, stored_topic, stored_topics
from .topics import Topics
from .transactions.service import Answer as TxnAnswer
from .transactions.service import RemoteMarkers, Transactions
from .transactions.types import TxnError, TxnMetadata, TxnState
from .types import CommittedOffset, TopicPartition

if TYPE_CHECKING:
    from .admin.leader import Admin
    from .zookeeper.member import ZooKeeperCluster

def timed_store(store: Store, stats: StoreStats) -> Store:
    """`store` with every call's latency and failures counted in `stats` (engine/store/timed.py)."""
    return TimedStore(store, stats)


def stuck_calls() -> StuckCalls:
    """Store calls abandoned past their deadline, over the process (engine/store/workers.py)."""
    return STUCK


def memory_use(engine: Engine) -> tuple[int, int]:
    """(bytes of the memory pool in use, its budget): unpersisted tails, persisted tails, cached blocks."""
    return engine.pool.used_bytes, engine.pool.budget_bytes


def store_location(store: Store) -> str:
    """Where the store keeps its files ("hdfs://host:port/root", a directory): Kafka's log dir."""
    return location(store)


def hdfs_store(address: str, root: str, read_only: bool = False, settings: EngineSettings | None = None) -> Store:
    """A store on HDFS; the HDFS client is loaded only by the processes that use one."""
    from .store.hdfs import HdfsStore

    limits = settings or EngineSettings()
    return HdfsStore(address, root, read_only=read_only, writers_max=limits.hdfs_writers_max,
                     writer_idle_s=limits.hdfs_writer_idle_ms / 1000)


def cluster_member(zookeeper: str, session_ms: int) -> ZooKeeperCluster:
    """A broker's ClusterView in a ZooKeeper cluster (the ZooKeeper client loads only here)."""
    from .zookeeper.member import ZooKeeperCluster

    return ZooKeeperCluster(zookeeper, session_ms)


def admin(zookeeper: str, store: Store, session_ms: int) -> Admin:
    """The placing admin of a cluster (`martlet admin`)."""
    from .admin.leader import Admin

    return Admin(zookeeper, store, session_ms)


__all__ = [
    "GroupsFace", "PartitionsFace", "ProducerIdsFace", "TopicsFace", "TransactionsFace",
    "ActiveProducer",
    "EMBEDDED_NODE_ID", "ClusterView", "ConfigValue", "Dynamic", "EmbeddedCluster", "Kept", "NodeIdentity", "Overrides",
    "Appended", "Assignment", "Clock", "CommittedOffset", "ConsumerGroupView", "Durability",
    "Engine", "EngineSettings", "Hooks",
    "GROUP_SEGMENT_BYTES", "GroupError", "GroupLimits", "Groups", "HeartbeatRequest", "JoinRequest",
    "Fetched", "LocalStore", "ManualClock", "PartitionInfo", "Partitions", "ProducerIds", "Store", "SyncRequest",
    "Topic", "TopicConfig", "TopicLookup", "TopicPartition", "Topics", "RemoteMarkers", "Transactions", "TxnAnswer", "TxnError",
    "TxnMetadata", "TxnState", "admin", "cluster_member", "errors",
    "LatencyHistogram", "StoreStats", "StuckCalls", "stuck_calls", "timed_store",
    "hdfs_store", "memory_use", "partition_reader", "store_location", "stored_topic", "stored_topics",
]
