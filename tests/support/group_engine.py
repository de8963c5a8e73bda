"""The engine's consumer groups in unit tests: a topic catalog, a KIP-848 join of group G, and
the Groups facade over a memory store."""

from __future__ import annotations

from martlet.engine.groups.types import HeartbeatRequest, TopicLookup

G = "g"
REBALANCE = 30_000


class Catalog:
    def __init__(self, **counts: int) -> None:
        self.counts = dict(counts)

    def lookup(self) -> TopicLookup:
        return TopicLookup(self.counts.get, lambda name: f"id-{name}" if name in self.counts else None,
                           lambda: list(self.counts))


def join(member_id: str = "a", topics: tuple[str, ...] = ("t",), **extra: object) -> HeartbeatRequest:
    fields: dict[str, object] = {"rebalance_timeout_ms": REBALANCE, "subscribed_topic_names": topics,
                                 "owned": frozenset(), "member_id_required": True}
    fields.update(extra)
    return HeartbeatRequest(G, member_id, 0, **fields)  # type: ignore[arg-type]


def facade():
    from martlet.engine.groups.classic import GroupLimits
    from martlet.engine.store import MemoryStore

    from .coordinator import open_groups

    return open_groups(MemoryStore(), GroupLimits(initial_rebalance_delay_ms=0), lambda: 0, 1_000)
