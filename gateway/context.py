"""What a handler sees: the engine, this broker's identity, and gateway settings."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.cluster import EMBEDDED_NODE_ID
from ..engine.service import Engine
from .settings import GatewaySettings


@dataclass(slots=True)
class Context:
    engine: Engine
    settings: GatewaySettings
    cluster_id: str
    node_id: int = EMBEDDED_NODE_ID  # the engine's cluster view names this node (engine/cluster.py)
