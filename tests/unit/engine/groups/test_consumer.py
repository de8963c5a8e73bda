"""The KIP-848 consumer-protocol state machine, one short scenario per test: member ids of v0
joins come from a counter and every call names its `now_ms`, so each run is repeatable."""

from __future__ import annotations

import itertools

from martlet.engine.groups.consumer import ConsumerCoordinator, ConsumerGroupLimits
from martlet.engine.groups.types import (
    Assignment,
    ConsumerGroupState,
    GroupError,
    HeartbeatRequest,
    HeartbeatResult,
)
from tests.support.coordinator import close_groups
from tests.support.group_engine import Catalog, G, facade, join

E = GroupError
SESSION = 45_000


def coordinator(**limits: object) -> ConsumerCoordinator:
    ids = itertools.count()
    return ConsumerCoordinator(ConsumerGroupLimits(**limits), lambda: f"m{next(ids)}")  # type: ignore[arg-type]


def tps(topic: str, *partitions: int) -> Assignment:
    return frozenset((f"id-{topic}", p) for p in partitions)


def beat(member_id: str, epoch: int, owned: Assignment | None = None, **extra: object) -> HeartbeatRequest:
    return HeartbeatRequest(G, member_id, epoch, owned=owned, member_id_required=True, **extra)  # type: ignore[arg-type]


def settle(machine: ConsumerCoordinator, catalog: Catalog, owned: dict[str, tuple[int, Assignment]],
           now_ms: int = 0, rounds: int = 10) -> dict[str, tuple[int, Assignment]]:
    """Heartbeat every member in turn, each reporting what it was last given, until quiet."""
    for _ in range(rounds):
        for member_id, (epoch, have) in list(owned.items()):
            result = machine.heartbeat(beat(member_id, epoch, have), catalog.lookup(), now_ms)
            assert result.error is E.NONE, result
            owned[member_id] = (result.member_epoch, have if result.assignment is None else result.assignment)
    return owned


def test_first_member_gets_every_partition_at_epoch_one():
    machine, catalog = coordinator(), Catalog(t=6)
    result = machine.heartbeat(join("a"), catalog.lookup(), 0)
    assert result == HeartbeatResult(E.NONE, "a", 1, 5_000, tps("t", *range(6)))
    view = machine.describe(G)
    assert view is not None and view.state is ConsumerGroupState.STABLE and view.group_epoch == 1


def test_v0_join_without_member_id_gets_a_generated_one():
    machine = coordinator()
    result = machine.heartbeat(join("", member_id_required=False), Catalog(t=1).lookup(), 0)
    assert result.error is E.NONE and result.member_id == "m0"


def test_unchanged_heartbeat_carries_no_assignment():
    machine, catalog = coordinator(), Catalog(t=2)
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    assert machine.heartbeat(beat("a", 1, tps("t", 0, 1)), catalog.lookup(), 1).assignment is None
    assert machine.heartbeat(beat("a", 1), catalog.lookup(), 2).assignment is None


def test_second_member_waits_until_the_first_revokes():
    machine, catalog = coordinator(), Catalog(t=6)
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    b = machine.heartbeat(join("b"), catalog.lookup(), 1)
    assert b.member_epoch == 2 and b.assignment == frozenset()  # everything is still a's
    a = machine.heartbeat(beat("a", 1, tps("t", *range(6))), catalog.lookup(), 2)
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment) == 3  # revoke first
    assert machine.heartbeat(beat("b", 2, frozenset()), catalog.lookup(), 3).assignment is None
    a = machine.heartbeat(beat("a", 1, a.assignment), catalog.lookup(), 4)  # revoked
    assert a.member_epoch == 2
    b = machine.heartbeat(beat("b", 2, frozenset()), catalog.lookup(), 5)
    assert b.assignment is not None and len(b.assignment) == 3
    view = machine.describe(G)
    assert view is not None and view.state is ConsumerGroupState.STABLE


def test_member_that_still_owns_revoked_partitions_keeps_its_epoch():
    machine, catalog = coordinator(), Catalog(t=4)
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    machine.heartbeat(join("b"), catalog.lookup(), 0)
    everything = tps("t", *range(4))
    first = machine.heartbeat(beat("a", 1, everything), catalog.lookup(), 1)
    again = machine.heartbeat(beat("a", 1, everything), catalog.lookup(), 2)
    assert again.member_epoch == 1 and again.assignment == first.assignment


def test_leave_hands_partitions_to_the_survivor():
    machine, catalog = coordinator(), Catalog(t=6)
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    machine.heartbeat(join("b"), catalog.lookup(), 0)
    owned = settle(machine, catalog, {"a": (1, tps("t", *range(6))), "b": (2, frozenset())})
    assert sorted(len(a) for _, a in owned.values()) == [3, 3]
    left = machine.heartbeat(HeartbeatRequest(G, "b", -1), catalog.lookup(), 10)
    assert left.error is E.NONE and left.member_epoch == -1
    result = machine.heartbeat(beat("a", owned["a"][0], owned["a"][1]), catalog.lookup(), 11)
    assert result.assignment == tps("t", *range(6))


def test_heartbeat_errors():
    machine, catalog = coordinator(), Catalog(t=1)
    assert machine.heartbeat(beat("x", 3), catalog.lookup(), 0).error is E.GROUP_NOT_FOUND  # as Kafka 4.4
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    assert machine.heartbeat(beat("x", 1), catalog.lookup(), 0).error is E.UNKNOWN_MEMBER
    assert machine.heartbeat(beat("a", 7), catalog.lookup(), 0).error is E.FENCED_MEMBER_EPOCH
    assert machine.heartbeat(join("b", server_assignor="magic"), catalog.lookup(), 0).error is E.UNSUPPORTED_ASSIGNOR
    assert machine.heartbeat(join("b", rebalance_timeout_ms=-1), catalog.lookup(), 0).error is E.INVALID_REQUEST
    assert machine.heartbeat(join("b", owned=None), catalog.lookup(), 0).error is E.INVALID_REQUEST
    assert machine.heartbeat(join("b", subscribed_topic_names=None), catalog.lookup(), 0).error is E.INVALID_REQUEST
    assert machine.heartbeat(join(""), catalog.lookup(), 0).error is E.INVALID_REQUEST  # v1 needs an id
    bad = join("b", subscribed_topic_names=None, subscribed_topic_regex="(")
    assert machine.heartbeat(bad, catalog.lookup(), 0).error is E.INVALID_REGULAR_EXPRESSION
    assert machine.heartbeat(HeartbeatRequest(G, "a", -3), catalog.lookup(), 0).error is E.INVALID_REQUEST


def test_previous_epoch_is_accepted_when_owning_a_subset():
    machine, catalog = coordinator(), Catalog(t=2)
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    catalog.counts["t"] = 3  # grown: the group epoch moves, a is told epoch 2
    assert machine.heartbeat(beat("a", 1, tps("t", 0, 1)), catalog.lookup(), 1).member_epoch == 2
    assert machine.heartbeat(beat("a", 1, tps("t", 0, 1)), catalog.lookup(), 2).error is E.NONE
    assert machine.heartbeat(beat("a", 1, tps("t", 0, 7)), catalog.lookup(), 2).error is E.FENCED_MEMBER_EPOCH


def test_regex_subscription_follows_new_topics():
    machine, catalog = coordinator(), Catalog(orders=1, other=1)
    request = join("a", subscribed_topic_names=None, subscribed_topic_regex="ord.*")
    assert machine.heartbeat(request, catalog.lookup(), 0).assignment == tps("orders", 0)
    catalog.counts["ordinals"] = 2
    result = machine.heartbeat(beat("a", 1, tps("orders", 0)), catalog.lookup(), 1)
    assert result.member_epoch == 2 and result.assignment == tps("orders", 0) | tps("ordinals", 0, 1)


def test_session_timeout_removes_member_and_frees_partitions():
    machine, catalog = coordinator(session_timeout_ms=1_000), Catalog(t=2)
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    machine.heartbeat(join("b"), catalog.lookup(), 500)
    assert machine.next_deadline_ms() == 1_000
    machine.tick(999)
    assert not machine.is_empty(G) and len(machine.describe(G).members) == 2
    machine.tick(1_000)
    assert [m.member_id for m in machine.describe(G).members] == ["b"]
    assert machine.heartbeat(beat("b", 2, frozenset()), catalog.lookup(), 1_100).assignment == tps("t", 0, 1)


def test_member_that_does_not_revoke_in_time_is_fenced():
    machine, catalog = coordinator(), Catalog(t=2)
    machine.heartbeat(join("a", rebalance_timeout_ms=5_000), catalog.lookup(), 0)
    machine.heartbeat(join("b"), catalog.lookup(), 0)
    machine.heartbeat(beat("a", 1, tps("t", 0, 1)), catalog.lookup(), 100)  # told to revoke one
    assert machine.next_deadline_ms() == 5_100
    machine.tick(5_100)
    assert [m.member_id for m in machine.describe(G).members] == ["b"]
    assert machine.heartbeat(beat("a", 1, tps("t", 0, 1)), catalog.lookup(), 5_200).error is E.UNKNOWN_MEMBER


def test_static_member_temporary_leave_keeps_assignment_for_its_successor():
    machine, catalog = coordinator(), Catalog(t=2)
    machine.heartbeat(join("a", instance_id="i"), catalog.lookup(), 0)
    assert machine.heartbeat(join("a2", instance_id="i"), catalog.lookup(), 1).error is E.UNRELEASED_INSTANCE_ID
    left = machine.heartbeat(HeartbeatRequest(G, "a", -2, instance_id="i"), catalog.lookup(), 2)
    assert left.error is E.NONE and left.member_epoch == -2
    back = machine.heartbeat(join("a2", instance_id="i"), catalog.lookup(), 3)
    assert back.error is E.NONE and back.member_epoch == 1 and back.assignment == tps("t", 0, 1)
    view = machine.describe(G)
    assert view is not None and view.group_epoch == 1 and [m.member_id for m in view.members] == ["a2"]
    assert machine.heartbeat(beat("a", 1, instance_id="i"), catalog.lookup(), 4).error is E.FENCED_INSTANCE_ID


def test_static_member_that_never_returns_expires():
    machine, catalog = coordinator(session_timeout_ms=1_000), Catalog(t=2)
    machine.heartbeat(join("a", instance_id="i"), catalog.lookup(), 0)
    machine.heartbeat(HeartbeatRequest(G, "a", -2, instance_id="i"), catalog.lookup(), 500)
    machine.tick(1_499)
    assert not machine.is_empty(G)
    machine.tick(1_500)
    assert machine.is_empty(G)
    assert machine.heartbeat(join("b", instance_id="i"), catalog.lookup(), 1_600).error is E.NONE


def test_range_assignor_and_assignor_choice():
    machine, catalog = coordinator(), Catalog(t=5)
    a = machine.heartbeat(join("a", server_assignor="range"), catalog.lookup(), 0)
    b = machine.heartbeat(join("b", server_assignor="range"), catalog.lookup(), 0)
    view = machine.describe(G)
    assert view is not None and view.assignor_name == "range"
    targets = {m.member_id: m.target_assignment for m in view.members}
    assert targets == {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4)}
    assert a.assignment is not None and b.assignment == frozenset()


def test_commit_and_fetch_validation():
    machine, catalog = coordinator(), Catalog(t=1)
    assert machine.validate_commit(G, "", -1) is E.NONE  # unknown group: simple commit
    machine.heartbeat(join("a"), catalog.lookup(), 0)
    assert machine.validate_commit(G, "a", 1) is E.NONE
    assert machine.validate_commit(G, "a", 0) is E.STALE_MEMBER_EPOCH
    assert machine.validate_commit(G, "a", 2) is E.FENCED_MEMBER_EPOCH
    assert machine.validate_commit(G, "x", 1) is E.UNKNOWN_MEMBER
    assert machine.validate_commit(G, "", -1) is E.UNKNOWN_MEMBER  # the group has members
    assert machine.validate_fetch(G, None, -1) is E.NONE
    assert machine.validate_fetch(G, "a", 0) is E.STALE_MEMBER_EPOCH
    machine.heartbeat(HeartbeatRequest(G, "a", -1), catalog.lookup(), 1)
    assert machine.validate_commit(G, "", -1) is E.NONE
    assert machine.delete(G) is E.NONE and not machine.has(G)


def test_delete_refuses_a_group_with_members():
    machine = coordinator()
    machine.heartbeat(join("a"), Catalog(t=1).lookup(), 0)
    assert machine.delete(G) is E.NON_EMPTY_GROUP
    assert machine.delete("nope") is E.GROUP_NOT_FOUND


def test_refused_first_join_leaves_no_group_behind():
    machine = coordinator(group_size_max=0)
    assert machine.heartbeat(join("a"), Catalog(t=1).lookup(), 0).error is E.GROUP_MAX_SIZE_REACHED
    assert not machine.has(G)


# -- the Groups facade keeps a group id with one protocol at a time


def test_facade_routes_commits_and_listing_by_group_type():
    import asyncio

    from martlet.engine.types import CommittedOffset

    async def scenario():
        groups, catalog = facade(), Catalog(t=1)
        assert (await groups.consumer_heartbeat(join("a"), catalog.lookup())).error is E.NONE
        assert groups.validate_commit(G, "a", 1, None) is E.NONE
        assert groups.validate_commit(G, "a", 0, None) is E.STALE_MEMBER_EPOCH
        assert groups.validate_fetch(G, "zz", 1) is E.UNKNOWN_MEMBER
        await groups.commit(G, [("t", "id-t", 0, CommittedOffset(5, -1, None, 0, "id-t"))])
        [row] = groups.listing()
        assert (row.group_type, row.state, row.protocol_type) == ("consumer", "Stable", "consumer")
        assert groups.describe(G) is not None and await groups.delete(G) is E.NON_EMPTY_GROUP
        assert (await groups.consumer_heartbeat(HeartbeatRequest(G, "a", -1), catalog.lookup())).error is E.NONE
        assert groups.is_empty(G) and await groups.delete(G) is E.NONE
        assert groups.committed(G, "t", 0, "id-t") is None
        await close_groups(groups)

    asyncio.run(scenario())


def test_facade_refuses_the_other_protocol_while_a_group_has_members():
    import asyncio

    from martlet.engine.groups.types import JoinRequest

    async def scenario():
        groups, catalog = facade(), Catalog(t=1)
        await groups.consumer_heartbeat(join("a"), catalog.lookup())
        classic = JoinRequest(G, "", None, "consumer", (("range", b""),), 10_000, 10_000, False)
        assert (await groups.join(classic)).error is E.INCONSISTENT_PROTOCOL
        await groups.consumer_heartbeat(HeartbeatRequest(G, "a", -1), catalog.lookup())
        assert (await groups.join(classic)).error is E.NONE  # empty: the id becomes classic
        refused = await groups.consumer_heartbeat(join("b"), catalog.lookup())
        assert refused.error is E.GROUP_NOT_FOUND
        assert groups.describe_consumer(G, catalog.lookup()) is E.GROUP_NOT_FOUND
        await close_groups(groups)

    asyncio.run(scenario())
