"""The server-side assignors on small hand-checked cases."""

from martlet.engine.groups.assignors import AssignmentSpec, MemberSpec, range_assign, uniform_assign


def spec(members: dict[str, tuple[set[str], set[tuple[str, int]]]], **partitions: int) -> AssignmentSpec:
    return AssignmentSpec({m: MemberSpec(frozenset(t), frozenset(c)) for m, (t, c) in members.items()}, partitions)


def counts(assignment):
    return {m: len(tps) for m, tps in assignment.items()}


def test_range_cuts_contiguous_ranges_per_topic_in_member_id_order():
    result = range_assign(spec({"b": ({"t", "u"}, set()), "a": ({"t"}, set())}, t=5, u=2))
    assert result["a"] == {("t", 0), ("t", 1), ("t", 2)}
    assert result["b"] == {("t", 3), ("t", 4), ("u", 0), ("u", 1)}


def test_uniform_balances_a_fresh_group():
    result = uniform_assign(spec({m: ({"t"}, set()) for m in "abc"}, t=7))
    assert sorted(counts(result).values()) == [2, 2, 3]
    assert set().union(*result.values()) == {("t", p) for p in range(7)}


def test_uniform_is_sticky_when_a_member_joins():
    before = {("t", p) for p in range(6)}
    result = uniform_assign(spec({"a": ({"t"}, before), "b": ({"t"}, set())}, t=6))
    assert result["a"] < before and len(result["a"]) == 3 and len(result["b"]) == 3


def test_uniform_keeps_everything_when_a_member_leaves():
    a, b = {("t", 0), ("t", 1)}, {("t", 2), ("t", 3)}
    result = uniform_assign(spec({"a": ({"t"}, a), "b": ({"t"}, b)}, t=6))
    assert result["a"] >= a and result["b"] >= b
    result = uniform_assign(spec({"b": ({"t"}, b)}, t=6))
    assert result["b"] == {("t", p) for p in range(6)}


def test_uniform_only_gives_subscribed_topics_and_drops_vanished_partitions():
    current = {("t", 5), ("gone", 0)}
    result = uniform_assign(spec({"a": ({"t"}, current), "b": ({"t", "u"}, set())}, t=2, u=2))
    assert all(topic == "t" for topic, _ in result["a"])
    assert {("u", 0), ("u", 1)} <= result["b"]
    assert set().union(*result.values()) == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}


def test_empty_inputs():
    assert uniform_assign(spec({}, t=3)) == {}
    assert range_assign(spec({"a": (set(), set())}, t=3)) == {"a": frozenset()}
