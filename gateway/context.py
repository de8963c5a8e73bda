"""What a handler sees: the engine's services, the cluster view, this node, the served APIs,
gateway settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..engine.api import (
    EMBEDDED_NODE_ID,
    Clock,
    ClusterView,
    Engine,
    EngineSettings,
    GroupsFace,
    NodeIdentity,
    PartitionsFace,
    ProducerIdsFace,
    TopicsFace,
    TransactionsFace,
    store_location,
)
from ..protocol.apis import ApiKey, Served
from .settings import GatewaySettings


@dataclass(slots=True)
class Context:
    topics: TopicsFace  # the services as a front end sees them (engine/faces.py)
    partitions: PartitionsFace
    groups: GroupsFace
    producer_ids: ProducerIdsFace
    transactions: TransactionsFace
    clock: Clock
    settings: GatewaySettings
    cluster_id: str
    apis: Mapping[ApiKey, Served]  # what ApiVersions advertises
    cluster: ClusterView  # membership and placement: who is alive, who leads what (engine/cluster.py)
    engine_settings: EngineSettings  # what DescribeConfigs shows of a broker
    log_dir: str  # where the store keeps the logs: Kafka's log.dirs
    node_id: int = EMBEDDED_NODE_ID  # the engine's cluster view names this node (engine/cluster.py)
    coordinator_of: Callable[[str], NodeIdentity | None] = lambda _group_id: None  # Engine.coordinator_of

    @classmethod
    def of(cls, engine: Engine, settings: GatewaySettings, cluster_id: str, apis: Mapping[ApiKey, Served]) -> Context:
        """The context of a broker serving `engine` (opened already: its groups exist). The topic
        defaults are derived here from the dynamic broker configs (broker_dynamic.py, given to
        the engine as `Hooks.dynamic_changes`); a node that learns its id later (a cluster) calls
        `Topics.rebase_defaults` again."""
        ctx = cls(engine.topics, engine.partitions, engine.groups, engine.producer_ids, engine.transactions,
                  engine.clock, settings,
                  cluster_id, apis, engine.cluster, engine.settings, store_location(engine.store),
                  engine.cluster.local().node_id, engine.coordinator_of)
        engine.topics.rebase_defaults()
        return ctx
