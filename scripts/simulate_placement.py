"""Simulate placement at 1,000 brokers and 100,000 units (issue 11, point 2) and print the figures.

    python scripts/simulate_placement.py [--brokers 1000] [--units 100000] [--seed 11] [--sigma 1.2] [--hot 10]

Builds a cluster of brokers (four per machine) and units with skewed loads: rates drawn from a
log-normal distribution (sigma 1.2: about 50 between the 5th and the 95th
percentile), and 2 % of the topics hot (10 times the rate). Then, one call of
`place` per step, each given the previous step's assignment:
    initial     every unit new
    steady      the same state again (a balanced input must move nothing)
    death x10   ten brokers killed one after another
    join        a new broker; repeated calls until balance stops (balance moves are capped per call)
    leaving     a broker draining for a planned shutdown
    hot shift   twenty units become 20 times hotter; repeated calls until balance stops
and prints, per step, the decision time, the moves by reason and the max/mean and min/mean
broker weight; then decision time (median, max) over all calls and moves per death against the
dead broker's unit count.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from martlet.engine.admin.placement import DEFAULT_POLICY, BrokerState, Load, Placement, Unit, place
from martlet.engine.types import TopicPartition

PARTITIONS_PER_TOPIC = 50
OFFSETS_SHARDS = 50
BROKERS_PER_MACHINE = 4


def build_units(count: int, rng: random.Random, sigma: float, hot: float) -> dict[Unit, Load]:
    """`count` units: offsets shards and topics of 50 partitions, 2 % of the topics `hot` times hotter."""
    units: dict[Unit, Load] = {("__offsets", n): Load(rng.lognormvariate(8, 1), rng.lognormvariate(8, 1))
                               for n in range(OFFSETS_SHARDS)}
    topic = 0
    while len(units) < count:
        heat = hot if rng.random() < 0.02 else 1.0
        for index in range(min(PARTITIONS_PER_TOPIC, count - len(units))):
            rate = heat * rng.lognormvariate(7, sigma)
            units[TopicPartition(f"topic-{topic}", index)] = Load(rate, rate * rng.choice((0.0, 1.0, 3.0)))
        topic += 1
    return units


class Simulation:
    """The cluster state carried from step to step, and the figures gathered."""

    def __init__(self, brokers: list[BrokerState], units: dict[Unit, Load]) -> None:
        self.brokers = brokers
        self.units = units
        self.assignment: Mapping[Unit, int] = {}
        self.times_s: list[float] = []
        self.deaths: list[tuple[int, int]] = []  # (moves, units the dead broker held)

    def step(self, label: str) -> Placement:
        started = time.perf_counter()
        result = place(self.brokers, self.units, self.assignment)
        elapsed = time.perf_counter() - started
        self.times_s.append(elapsed)
        self.assignment = result.assignment
        reasons = Counter(move.reason for move in result.moves)
        print(f"{label:<22} {elapsed * 1000:8.0f} ms  moves {len(result.moves):>6} {dict(sorted(reasons.items()))!s:<34} "
              f"{self.spread()}")
        return result

    def spread(self) -> str:
        weights = broker_weights(self.brokers, self.units, self.assignment)
        mean = statistics.fmean(weights.values())
        return f"max/mean {max(weights.values()) / mean:.3f}  min/mean {min(weights.values()) / mean:.3f}"

    def until_quiet(self, label: str, calls_max: int = 50) -> None:
        for call in range(1, calls_max + 1):
            if not self.step(f"{label} (call {call})").moves:
                return

    def kill(self, victim: BrokerState) -> None:
        held = sum(1 for broker in self.assignment.values() if broker == victim.id)
        self.brokers = [broker for broker in self.brokers if broker != victim]
        self.deaths.append((len(self.step(f"death of {victim.id}").moves), held))


def broker_weights(brokers: Sequence[BrokerState], units: Mapping[Unit, Load],
                   assignment: Mapping[Unit, int]) -> dict[int, float]:
    weights = {broker.id: 0.0 for broker in brokers if not broker.leaving}
    for unit, broker in assignment.items():
        if broker in weights:
            weights[broker] += DEFAULT_POLICY.weight(units[unit])
    return weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--sigma", type=float, default=1.2, help="spread of the log-normal unit rates")
    parser.add_argument("--hot", type=float, default=10.0, help="rate factor of the hot topics")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    brokers = [BrokerState(i, f"machine-{i // BROKERS_PER_MACHINE}") for i in range(args.brokers)]
    sim = Simulation(brokers, build_units(args.units, rng, args.sigma, args.hot))
    print(f"{args.brokers} brokers, {len(sim.units)} units, {DEFAULT_POLICY}")
    unit_weights = [DEFAULT_POLICY.weight(load) for load in sim.units.values()]
    mean = sum(unit_weights) / args.brokers
    print(f"mean broker weight {mean / 1e6:.2f} MB/s; heaviest unit {max(unit_weights) / mean:.2f} x that, "
          f"median unit {statistics.median(unit_weights) / mean:.4f} x")
    sim.step("initial")
    sim.step("steady")
    for victim in rng.sample(sim.brokers, 10):
        sim.kill(victim)
    sim.brokers.append(BrokerState(args.brokers, "machine-new"))
    sim.until_quiet("join")
    leaving = rng.choice(sim.brokers[:-1])
    sim.brokers[sim.brokers.index(leaving)] = BrokerState(leaving.id, leaving.host, leaving=True)
    sim.step(f"leaving {leaving.id}")
    for unit in rng.sample(sorted(sim.units), 20):  # type: ignore[type-var]  # units here are tuples
        load = sim.units[unit]
        sim.units[unit] = Load(load.bytes_in * 20 + 1e6, load.bytes_out * 20)
    sim.until_quiet("hot shift")
    report(sim)


def report(sim: Simulation) -> None:
    times_ms = [t * 1000 for t in sim.times_s]
    moves = [moved for moved, _ in sim.deaths]
    print(f"decision time over {len(times_ms)} calls: median {statistics.median(times_ms):.0f} ms, max {max(times_ms):.0f} ms")
    print(f"moves per broker death: median {statistics.median(moves):.0f}, max {max(moves)}; "
          f"equal to the dead broker's unit count in {sum(m == held for m, held in sim.deaths)} of {len(sim.deaths)}")


if __name__ == "__main__":
    main()
