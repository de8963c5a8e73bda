"""What a handler sees: the engine's services, this node, the served APIs, gateway settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..engine.api import EMBEDDED_NODE_ID, Clock, Engine, Groups, NodeIdentity, Partitions, ProducerIds, Topics
from .protocol.apis import ApiKey, Served
from .settings import GatewaySettings


@dataclass(slots=True)
class Context:
    topics: Topics
    partitions: Partitions
    groups: Groups
    producer_ids: ProducerIds
    clock: Clock
    settings: GatewaySettings
    cluster_id: str
    apis: Mapping[ApiKey, Served]  # what ApiVersions advertises
    node_id: int = EMBEDDED_NODE_ID  # the engine's cluster view names this node (engine/cluster.py)
    coordinator_of: Callable[[str], NodeIdentity | None] = lambda _group_id: None  # Engine.coordinator_of

    @classmethod
    def of(cls, engine: Engine, settings: GatewaySettings, cluster_id: str, apis: Mapping[ApiKey, Served]) -> Context:
        """The context of a broker serving `engine` (opened already: its groups exist)."""
        return cls(engine.topics, engine.partitions, engine.groups, engine.producer_ids, engine.clock, settings,
                   cluster_id, apis, engine.cluster.local().node_id, engine.coordinator_of)
