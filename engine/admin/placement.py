"""Placement: which live broker serves each unit, decided from measured load (issue 11, point 2).

A *unit* is what a broker loads and serves as a whole: a physical partition of a user topic
(the admin names it `TopicPartition(topic, index)`) or an internal one (`("__offsets", n)`, an
coordinator shard). `place` is a pure function: cluster state in (live brokers, each unit's load,
where each unit is now, operator requests), the new assignment and the moves out. The elected
admin calls it every few seconds and on every broker join or death, and writes the result to
ZooKeeper; nothing here does I/O or reads a clock.

Weight. A unit weighs `bytes_in + bytes_out + idle_weight` (bytes/s; a negative, NaN or infinite
rate counts as 0). The idle weight makes idle units spread by count too: a partition costs memory,
file handles and flushes even when nobody writes to it. A broker's weight is the sum of its units'.

Band. Let `open` be the live brokers that are not leaving, `mean` the total weight of all units
over len(open), `heaviest` the weight of the heaviest unit, and `slack = max(mean * tolerance,
heaviest)`. The band is [mean - slack, mean + slack]; its top is the issue's bound
max(mean * (1 + tolerance), mean + heaviest). A greedy placement (each unit to the lightest broker)
always lands inside the top of the band, and no finer bound can be promised in general: one
unit heavier than the tolerance allows cannot be split.

Rules (each is a property test in tests/property/test_placement.py):
 1. Every unit in `units` is assigned exactly once, to an open broker; units not in `units` are
    dropped. If no broker is open but some are live (all leaving), units stay on the live leaving
    broker they are on, and the rest go to the lightest live leaving broker: serving from a broker
    that is shutting down beats not serving at all. With no live broker the result is empty.
 2. Nothing is assigned to a dead broker (one not in `brokers`).
 3. Stability. A unit already on an open broker stays there unless it is moved for balance
    (reason "balance") or by an operator request ("requested"). Balance moves happen only while
    some open broker is outside the band, and each one takes a unit from the heaviest broker to
    the lightest. So the output of a call, given back with the same loads, moves nothing; and
    when the input is inside the band, a broker's death moves only that broker's units (the
    greedy placement of its units keeps every broker inside the wider band of the smaller
    cluster).
 4. Bound. After a call whose balance moves were not capped and without operator requests,
    every open broker's weight is <= mean + slack (the issue's bound) and >= mean - slack.
    Requests are honoured even when they break the band; balance never moves a unit a request
    placed in the same call.
 5. Deterministic: the result depends on the contents of the arguments only, not on the order of
    dicts or on hash salts (units are ordered by value, or by type name and repr when their
    values do not compare).
Also: new units, dead brokers' units and leaving brokers' units are placed heaviest first, each
on the broker that is lightest at that moment (ties: the lower broker id).

Beyond the issue's wording: the bottom of the band. Moves are triggered by a broker under the band
too, which is how a broker that joins gets a share (issue 11, point 5): an empty broker is under
the band as soon as the heaviest unit weighs less than mean * (1 - tolerance). A move for an
underloaded broker takes a unit of weight <= slack from the heaviest broker (>= mean), so that
broker stays >= mean - slack and the light one stays < mean: a balance move never pushes another
broker out of the band, and every move makes the sum of squared weights smaller, so balancing
ends even without a cap.

Known limit: the slack is set by the heaviest unit of the whole cluster. Once one unit outweighs
tolerance * mean, the band widens for every broker: a broker may then carry mean + that unit in
small units, and a joining broker is filled only up to mean - that unit (nothing at all once a
unit outweighs the mean). A per-broker band (mean +- max(mean * tolerance, the heaviest unit on
that broker)) keeps the greedy guarantees on the top side; its bottom side is not worked out yet.

The broker's `host` is carried for later (spreading a topic's partitions over machines) and is not
used yet.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeAlias

Unit: TypeAlias = Hashable

# Weights are sums of floats, added up in different orders by different calls; a broker that is on
# the band's edge in exact arithmetic must not flip between "inside" and "outside" by a rounding.
_EDGE_RELATIVE = 1e-9


@dataclass(frozen=True, slots=True)
class BrokerState:
    """A live broker as the admin sees it in ZooKeeper."""

    id: int
    host: str  # machine name: several brokers may share one machine
    leaving: bool = False  # draining: take nothing new, give everything away (planned shutdown)


@dataclass(frozen=True, slots=True)
class Load:
    """A unit's measured traffic, bytes/s over the last load reports."""

    bytes_in: float = 0.0
    bytes_out: float = 0.0


@dataclass(frozen=True, slots=True)
class Move:
    """One unit changing broker. `source` is None when the unit was unplaced (new, or its broker
    is dead); reason is "new" | "dead" | "leaving" | "balance" | "requested"."""

    unit: Unit
    source: int | None
    target: int
    reason: str


@dataclass(frozen=True)
class Placement:
    """The whole new assignment (unit -> broker id) and the moves that lead to it from `current`."""

    assignment: dict[Unit, int]
    moves: list[Move]


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs of `place`.

    tolerance          0.10: a broker may be 10 % off the mean before load alone moves anything
                       (measured rates are noisy; a move costs its clients a few seconds).
    idle_weight        1024.0 bytes/s: what a unit weighs with no traffic, so that idle units spread
                       by count, and a unit at 1 KiB/s counts twice an idle one.
    balance_moves_max  64 per call: a rebalance is gradual (at one call every few seconds, a broker
                       joining a 1,000-broker cluster gets its ~100 units within a few calls). None:
                       no cap. New, dead and leaving brokers' units are never capped.
    """

    tolerance: float = 0.10
    idle_weight: float = 1024.0
    balance_moves_max: int | None = 64

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tolerance) and self.tolerance >= 0):
            raise ValueError(f"tolerance must be a finite number >= 0, not {self.tolerance}")
        if not (math.isfinite(self.idle_weight) and self.idle_weight >= 0):
            raise ValueError(f"idle_weight must be a finite number >= 0, not {self.idle_weight}")
        if self.balance_moves_max is not None and self.balance_moves_max < 0:
            raise ValueError(f"balance_moves_max must be >= 0 or None, not {self.balance_moves_max}")

    def weight(self, load: Load) -> float:
        """What a unit with this load weighs (bytes/s)."""
        return _rate(load.bytes_in) + _rate(load.bytes_out) + self.idle_weight

    def slack(self, mean: float, heaviest_unit: float) -> float:
        """How far from the mean a broker may be: the band is mean +- slack."""
        return max(mean * self.tolerance, heaviest_unit)


NO_REQUESTS: Mapping[Unit, int] = MappingProxyType({})
DEFAULT_POLICY = Policy()


def place(
    brokers: Sequence[BrokerState],
    units: Mapping[Unit, Load],
    current: Mapping[Unit, int],
    requested: Mapping[Unit, int] = NO_REQUESTS,
    *,
    policy: Policy = DEFAULT_POLICY,
) -> Placement:
    """Place every unit of `units` on a live broker (see the module docstring for the rules).

    `current` may name dead brokers or miss units (new ones); `requested` are operator moves
    (AlterPartitionReassignments), honoured when the target is live and not leaving."""
    live = {broker.id: broker for broker in brokers}
    assert len(live) == len(brokers), "broker ids must be unique"
    if not live:
        return Placement({}, [])
    order = _canonical_order(units)
    weights = [policy.weight(units[unit]) for unit in order]
    open_ids = sorted(broker_id for broker_id, broker in live.items() if not broker.leaving)
    plan = _Plan(order, weights, open_ids or sorted(live))
    orphans = plan.settle(current, requested, live, set(open_ids))
    plan.place_heaviest_first(orphans)
    if open_ids and weights:
        mean = math.fsum(weights) / len(open_ids)
        slack = policy.slack(mean, max(weights))
        plan.balance(mean - slack, mean + slack, policy.balance_moves_max)
    return plan.result()


def _rate(bytes_per_s: float) -> float:
    """A reported rate as a weight: a broker's bad report (negative, NaN, infinite) counts as idle."""
    return bytes_per_s if math.isfinite(bytes_per_s) and bytes_per_s > 0 else 0.0


def _canonical_order(units: Iterable[Unit]) -> list[Unit]:
    """Units in an order that depends on their values only (not on dict order or hash salts)."""
    try:
        return sorted(units)  # type: ignore[type-var]  # TopicPartition and ("__offsets", n) compare
    except TypeError:
        return sorted(units, key=lambda unit: (type(unit).__qualname__, repr(unit)))


class _Plan:
    """The assignment being built. Units are named by their rank in the canonical order, so every
    tie is broken by (weight, rank) or broker id and the result is deterministic."""

    def __init__(self, order: list[Unit], weights: list[float], hosts: list[int]) -> None:
        self.order = order
        self.weights = weights
        self.broker_of: list[int] = [-1] * len(order)
        self.load = dict.fromkeys(hosts, 0.0)
        # per broker, the units balance may take away: (weight, rank), sorted when first needed
        self.movable: dict[int, list[tuple[float, int]]] = {broker: [] for broker in hosts}
        self.sorted: set[int] = set()  # brokers whose `movable` list is sorted
        self.moves: list[Move] = []

    def settle(
        self, current: Mapping[Unit, int], requested: Mapping[Unit, int], live: Mapping[int, BrokerState], open_ids: set[int]
    ) -> list[tuple[int, int | None, str]]:
        """Keep units where they may stay, apply requests; returns the rest: (rank, source, reason)."""
        orphans: list[tuple[int, int | None, str]] = []
        for rank, unit in enumerate(self.order):
            where = current.get(unit)
            wanted = requested.get(unit)
            if wanted is not None and wanted in open_ids:
                self.assign(rank, wanted)
                if wanted != where:
                    self.moves.append(Move(unit, where if where in live else None, wanted, "requested"))
            elif where is not None and where in self.load:
                self.assign(rank, where)
                self.movable[where].append((self.weights[rank], rank))
            else:
                orphans.append((rank, *_why_unplaced(where, live)))
        return orphans

    def assign(self, rank: int, broker: int) -> None:
        self.broker_of[rank] = broker
        self.load[broker] += self.weights[rank]

    def place_heaviest_first(self, orphans: list[tuple[int, int | None, str]]) -> None:
        """Each orphan, heaviest first, on the broker lightest at that moment (lower id on ties)."""
        orphans.sort(key=lambda orphan: (-self.weights[orphan[0]], orphan[0]))
        lightest = [(weight, broker) for broker, weight in self.load.items()]
        heapq.heapify(lightest)
        for rank, source, reason in orphans:
            _, broker = lightest[0]
            self.assign(rank, broker)
            heapq.heapreplace(lightest, (self.load[broker], broker))
            self.moves.append(Move(self.order[rank], source, broker, reason))

    def balance(self, low: float, high: float, moves_max: int | None) -> None:
        """Move units from the heaviest broker to the lightest while one is outside [low, high]."""
        edge = _EDGE_RELATIVE * max(abs(low), abs(high))
        low, high = low - edge, high + edge
        heaviest = _Extremes(self.load, heaviest=True)
        lightest = _Extremes(self.load, heaviest=False)
        made = 0
        while moves_max is None or made < moves_max:
            heavy, light = heaviest.top(), lightest.top()
            excess = max(self.load[heavy] - high, low - self.load[light])
            if excess <= 0 or not self.move_for_balance(heavy, light, excess):
                return
            heaviest.changed(heavy, light)
            lightest.changed(heavy, light)
            made += 1

    def move_for_balance(self, heavy: int, light: int, excess: float) -> bool:
        """Move the lightest unit of `heavy` that weighs >= `excess` (or its heaviest) to `light`."""
        candidates = self.movable[heavy]
        if not candidates:
            return False  # only requested units left there: nothing balance may take
        if heavy not in self.sorted:
            candidates.sort()
            self.sorted.add(heavy)
        index = min(bisect_left(candidates, (excess, -1)), len(candidates) - 1)
        weight, rank = candidates[index]
        if weight <= 0 or weight >= self.load[heavy] - self.load[light]:
            return False  # a move that would not bring the two closer together
        del candidates[index]
        self.load[heavy] -= weight
        self.assign(rank, light)
        self.moves.append(Move(self.order[rank], heavy, light, "balance"))
        return True

    def result(self) -> Placement:
        return Placement(dict(zip(self.order, self.broker_of)), self.moves)


def _why_unplaced(where: int | None, live: Mapping[int, BrokerState]) -> tuple[int | None, str]:
    """(source, reason) of a unit that must move: new, on a dead broker, or on a leaving one."""
    if where is None:
        return None, "new"
    if where not in live:
        return None, "dead"
    return where, "leaving"


class _Extremes:
    """The heaviest (or lightest) broker by current load; ties go to the lower id. A heap with
    stale entries skipped: an entry counts only while it matches the broker's load."""

    def __init__(self, load: dict[int, float], *, heaviest: bool) -> None:
        self.load = load
        self.sign = -1.0 if heaviest else 1.0
        self.heap = [(self.sign * weight, broker) for broker, weight in load.items()]
        heapq.heapify(self.heap)

    def top(self) -> int:
        while True:
            key, broker = self.heap[0]
            if key == self.sign * self.load[broker]:
                return broker
            heapq.heappop(self.heap)

    def changed(self, *brokers: int) -> None:
        for broker in brokers:
            heapq.heappush(self.heap, (self.sign * self.load[broker], broker))
