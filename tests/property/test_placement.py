"""Property tests of the placement rules (engine/admin/placement.py's docstring numbers them):
whatever the cluster looks like, every unit lands exactly once on a live broker, dead brokers get
nothing, a balanced cluster loses only the dead broker's units, every broker ends inside the band
around the mean, and the answer does not depend on the order the inputs were built in."""

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.admin.placement import BrokerState, Load, Placement, Policy, place
from martlet.engine.types import TopicPartition

BROKER_IDS = range(10)  # current may name ids that are not live brokers: dead ones

rates = st.one_of(
    st.just(0.0),
    st.floats(0, 10_000, allow_nan=False),
    st.floats(0, 1e7, allow_nan=False),  # hot units
)
loads = st.builds(Load, rates, rates)
units = st.one_of(
    st.builds(TopicPartition, st.sampled_from(["a", "b", "orders"]), st.integers(0, 30)),
    st.tuples(st.just("__offsets"), st.integers(0, 9)),
)
policies = st.builds(
    Policy,
    tolerance=st.sampled_from([0.0, 0.05, 0.1, 0.5]),
    idle_weight=st.sampled_from([0.0, 1.0, 1024.0]),
    balance_moves_max=st.none(),
)


@st.composite
def clusters(draw, *, with_requests=True, policy=policies, loads=loads, units_min=0):
    ids = draw(st.lists(st.sampled_from(BROKER_IDS), unique=True, max_size=7))
    brokers = [BrokerState(i, f"host{i % 3}", leaving=draw(st.booleans().map(lambda b: b and draw(st.booleans())))) for i in ids]
    unit_loads = draw(st.dictionaries(units, loads, min_size=units_min, max_size=80))
    # where units are now: any broker id (dead ones too), shrinking towards all on one broker
    placed = draw(st.lists(st.sampled_from(BROKER_IDS), min_size=len(unit_loads), max_size=len(unit_loads)))
    unplaced = draw(st.sets(st.sampled_from(sorted(unit_loads)))) if unit_loads else set()
    current = {unit: broker for unit, broker in zip(sorted(unit_loads), placed) if unit not in unplaced}
    requested = {}
    if with_requests and unit_loads:
        requested = draw(st.dictionaries(st.sampled_from(sorted(unit_loads)), st.sampled_from(BROKER_IDS), max_size=4))
    return brokers, unit_loads, current, requested, draw(policy)


def open_ids(brokers):
    return {b.id for b in brokers if not b.leaving}


def weight_of(load, policy):
    return load.bytes_in + load.bytes_out + policy.idle_weight


def broker_weights(result, unit_loads, brokers, policy):
    weights = dict.fromkeys(open_ids(brokers), 0.0)
    for unit, broker in result.assignment.items():
        weights[broker] += weight_of(unit_loads[unit], policy)
    return weights


def band(unit_loads, brokers, policy):
    unit_weights = [weight_of(load, policy) for load in unit_loads.values()]
    mean = math.fsum(unit_weights) / len(open_ids(brokers))
    slack = max(mean * policy.tolerance, max(unit_weights))
    edge = 1e-6 * (mean + slack) + 1e-9
    return mean - slack - edge, mean + slack + edge


def replay(current, result: Placement, unit_loads):
    """Apply the moves to where units were: it must give the assignment."""
    where = {unit: broker for unit, broker in current.items() if unit in unit_loads}
    for move in result.moves:
        assert move.source is None or where.get(move.unit) == move.source
        where[move.unit] = move.target
    return where


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_every_unit_is_placed_exactly_once_on_a_live_broker(cluster):
    brokers, unit_loads, current, requested, policy = cluster
    result = place(brokers, unit_loads, current, requested, policy=policy)
    live = {b.id for b in brokers}
    if not live:
        assert result == Placement({}, [])
        return
    assert set(result.assignment) == set(unit_loads)  # units not in `units` are dropped
    hosts = open_ids(brokers) or live
    assert set(result.assignment.values()) <= hosts  # rules 1 and 2: open brokers, else live leaving ones
    if not open_ids(brokers):  # all leaving: units on a live broker stay where they are
        assert all(result.assignment[u] == b for u, b in current.items() if u in unit_loads and b in live)
    assert replay(current, result, unit_loads) == result.assignment
    moved = [move.unit for move in result.moves]
    assert len(moved) == len(set(moved))  # one move per unit at most
    for move in result.moves:
        assert move.target in hosts and move.source != move.target
        assert move.reason == expected_reason(move, current, requested, brokers)


def expected_reason(move, current, requested, brokers):
    live = {b.id: b for b in brokers}
    where = current.get(move.unit)
    if requested.get(move.unit) == move.target and move.target in open_ids(brokers):
        return "requested"
    if where is None:
        return "new"
    if where not in live:
        return "dead"
    return "leaving" if live[where].leaving else "balance"


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_units_on_open_brokers_move_only_for_balance_or_request_and_leaving_brokers_empty(cluster):
    brokers, unit_loads, current, requested, policy = cluster
    result = place(brokers, unit_loads, current, requested, policy=policy)
    for move in result.moves:
        if move.source in open_ids(brokers):
            assert move.reason in ("balance", "requested")
    if open_ids(brokers):
        leaving = {b.id for b in brokers if b.leaving}
        assert not leaving & set(result.assignment.values())


@settings(max_examples=300, deadline=None)
@given(clusters(with_requests=False))
def test_every_open_broker_ends_inside_the_band_when_balance_is_not_capped(cluster):
    brokers, unit_loads, current, _, policy = cluster
    if not open_ids(brokers) or not unit_loads:
        return
    result = place(brokers, unit_loads, current, policy=policy)
    low, high = band(unit_loads, brokers, policy)
    for weight in broker_weights(result, unit_loads, brokers, policy).values():
        assert low <= weight <= high  # high is the max(mean * (1 + tol), mean + heaviest)


# Loads of one order of magnitude and many units: a tight band, which a skewed `current` leaves.
even_loads = st.builds(Load, st.integers(0, 3000).map(float), st.integers(0, 3000).map(float))
tight = st.builds(Policy, tolerance=st.sampled_from([0.0, 0.1]), balance_moves_max=st.none())


@settings(max_examples=100, deadline=None)
@given(clusters(with_requests=False, policy=tight, loads=even_loads, units_min=30))
def test_balance_brings_a_skewed_cluster_with_even_loads_into_the_band(cluster):
    test_every_open_broker_ends_inside_the_band_when_balance_is_not_capped.hypothesis.inner_test(cluster)


@settings(max_examples=300, deadline=None)
@given(clusters(with_requests=False), st.data())
def test_a_balanced_cluster_moves_nothing_and_a_death_moves_only_the_dead_brokers_units(cluster, data):
    brokers, unit_loads, current, _, policy = cluster
    balanced = place(brokers, unit_loads, current, policy=policy).assignment
    assert place(brokers, unit_loads, balanced, policy=policy).moves == []
    if not brokers:
        return
    dead = data.draw(st.sampled_from(brokers))
    survivors = [b for b in brokers if b != dead]
    after = place(survivors, unit_loads, balanced, policy=policy)
    if not survivors:
        assert after == Placement({}, [])
        return
    assert {move.unit for move in after.moves} == {u for u, b in balanced.items() if b == dead.id}
    assert all(move.source is None and move.reason == "dead" for move in after.moves)


@settings(max_examples=200, deadline=None)
@given(clusters(policy=st.builds(Policy, balance_moves_max=st.integers(0, 3))))
def test_balance_moves_per_call_are_capped(cluster):
    brokers, unit_loads, current, requested, policy = cluster
    result = place(brokers, unit_loads, current, requested, policy=policy)
    assert sum(move.reason == "balance" for move in result.moves) <= policy.balance_moves_max


@settings(max_examples=200, deadline=None)
@given(clusters(), st.randoms(use_true_random=False))
def test_the_answer_does_not_depend_on_the_order_of_the_inputs(cluster, rng: random.Random):
    brokers, unit_loads, current, requested, policy = cluster
    expected = place(brokers, unit_loads, current, requested, policy=policy)
    again = place(shuffled(brokers, rng), shuffled_dict(unit_loads, rng), shuffled_dict(current, rng),
                  shuffled_dict(requested, rng), policy=policy)
    assert again == expected
    assert list(again.assignment) == list(expected.assignment)


def shuffled(items, rng):
    items = list(items)
    rng.shuffle(items)
    return items


def shuffled_dict(mapping, rng):
    return dict(shuffled(mapping.items(), rng))


@settings(max_examples=100, deadline=None)
@given(clusters(with_requests=False, policy=tight, loads=even_loads, units_min=30))
def test_a_broker_that_joins_a_balanced_cluster_takes_a_share_by_balance_moves_only(cluster):
    brokers, unit_loads, current, _, policy = cluster
    if not open_ids(brokers):
        return  # then the units are unplaced or on leaving brokers, and move for that reason
    balanced = place(brokers, unit_loads, current, policy=policy).assignment
    newcomer = BrokerState(max(BROKER_IDS) + 1, "new-host")
    after = place([*brokers, newcomer], unit_loads, balanced, policy=policy)
    assert all(move.reason == "balance" for move in after.moves)
    low, high = band(unit_loads, [*brokers, newcomer], policy)
    assert low <= broker_weights(after, unit_loads, [*brokers, newcomer], policy)[newcomer.id] <= high
