"""Checks of replica lists an operator names (CreateTopics assignments, reassignments).

A Martlet partition has one copy, in the store; its "replicas" are the nodes Metadata lists
(gateway/handlers/metadata.py). An operator's list still means something: its first node is
where the partition should be served, and its length is the replication factor tools show.
The checks and their messages are Kafka's (KRaft's ReplicationControlManager), so scripts
that match on them keep working.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..context import Context


def alive_ids(ctx: Context) -> set[int]:
    return {node.node_id for node in ctx.cluster.alive()}


def replica_list_error(replicas: Sequence[int], alive: Collection[int]) -> str | None:
    """Why Kafka refuses this replica list (INVALID_REPLICA_ASSIGNMENT), or None."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for node_id in replicas:
        if node_id not in alive:
            return f"The manual partition assignment includes broker {node_id}, but no such broker is registered."
        if node_id in seen:
            return f"The manual partition assignment includes the broker {node_id} more than once."
        seen.add(node_id)
    return None


def replication_factor_error(factor: int, alive_count: int) -> str | None:
    """Why Kafka refuses this replication factor (INVALID_REPLICATION_FACTOR), or None.
    -1 means the default, 1."""
    if factor == 0 or factor < -1:
        return "Replication factor must be larger than 0, or -1 to use the default value."
    if factor > alive_count:
        return (f"Unable to replicate the partition {factor} time(s): The target replication factor of {factor}"
                f" cannot be reached because only {alive_count} broker(s) are registered or some brokers have"
                " all their log directories cordoned.")
    return None
