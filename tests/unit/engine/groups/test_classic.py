"""The classic group coordinator state machine, one short scenario per rule: member ids come
from a counter and every call names its `now_ms`, so each scenario is exactly repeatable."""

import itertools

from martlet.engine.groups.classic import ClassicCoordinator, GroupLimits
from martlet.engine.groups.types import (
    GroupError,
    GroupState,
    JoinMember,
    JoinRequest,
    JoinResult,
    Reply,
    SyncRequest,
    SyncResult,
)

E = GroupError
S = GroupState
G = "g"
SESSION = 10_000
REBALANCE = 30_000
RANGE = (("range", b"range-meta"),)


def coordinator(delay_ms: int = 0) -> ClassicCoordinator:
    ids = itertools.count()
    return ClassicCoordinator(GroupLimits(initial_rebalance_delay_ms=delay_ms),
                              lambda prefix: f"{prefix}-{next(ids)}")


def join_request(member_id: str = "", *, client: str = "c", instance: str | None = None,
                 protocols: tuple[tuple[str, bytes], ...] = RANGE, protocol_type: str = "consumer",
                 session_ms: int = SESSION, rebalance_ms: int = REBALANCE, require_known: bool = False,
                 group: str = G) -> JoinRequest:
    return JoinRequest(group, member_id, instance, protocol_type, protocols, session_ms, rebalance_ms,
                       require_known, client_id=client, client_host="/127.0.0.1")


def sync_request(member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
                 instance: str | None = None, protocol_name: str | None = None) -> SyncRequest:
    return SyncRequest(G, member_id, generation, instance, "consumer", protocol_name,
                       tuple((assignments or {}).items()))


def join_replies(replies: list[Reply]) -> dict[str, JoinResult]:
    out = {r.member_id: r.result for r in replies if r.kind == "join"}
    assert all(isinstance(result, JoinResult) for result in out.values())
    return out  # type: ignore[return-value]


def sync_replies(replies: list[Reply]) -> dict[str, SyncResult]:
    out = {r.member_id: r.result for r in replies if r.kind == "sync"}
    assert all(isinstance(result, SyncResult) for result in out.values())
    return out  # type: ignore[return-value]


def state(co: ClassicCoordinator) -> GroupState:
    view = co.describe(G)
    assert view is not None
    return view.state


def member_ids(co: ClassicCoordinator) -> list[str]:
    view = co.describe(G)
    return [] if view is None else [m.member_id for m in view.members]


def join_alone(co: ClassicCoordinator, now_ms: int = 0, client: str = "a") -> str:
    """A first member joins an empty group (no initial delay) and syncs: Stable, generation 1."""
    outcome = co.join(join_request(client=client), now_ms)
    member = outcome.waiting_as
    co.sync(sync_request(member, 1, {member: b"all"}), now_ms)
    assert state(co) is S.STABLE
    return member


def stable_pair(co: ClassicCoordinator) -> tuple[str, str, int]:
    """Members a (leader) and b, Stable in generation 2 at t=2000, b last seen at 2000."""
    a = join_alone(co)
    b = co.join(join_request(client="b"), 1_000).waiting_as
    replies = co.join(join_request(a, client="a"), 2_000).replies
    assert set(join_replies(replies)) == {a, b}
    co.sync(sync_request(b, 2), 2_000)
    co.sync(sync_request(a, 2, {a: b"p0", b: b"p1"}), 2_000)
    assert state(co) is S.STABLE
    return a, b, 2


# -- joining


def test_first_join_requiring_known_member_id_gets_an_id_then_joins():
    co = coordinator()
    first = co.join(join_request(client="c", require_known=True), 0)
    assert first.answer == JoinResult(E.MEMBER_ID_REQUIRED, member_id="c-0")
    assert first.replies == []
    assert member_ids(co) == []  # a pending id is not a member yet

    second = co.join(join_request("c-0", require_known=True), 100)
    assert second.answer is None and second.waiting_as == "c-0"
    [reply] = second.replies
    assert reply.member_id == "c-0" and reply.kind == "join"
    assert reply.result == JoinResult(E.NONE, 1, "consumer", "range", "c-0", "c-0", False,
                                      (JoinMember("c-0", None, b"range-meta"),))


def test_pending_member_id_expires_after_the_session_timeout():
    co = coordinator()
    pending = co.join(join_request(require_known=True), 0).answer
    assert isinstance(pending, JoinResult)
    assert co.next_deadline_ms() == SESSION
    co.tick(SESSION)
    late = co.join(join_request(pending.member_id), SESSION)
    assert late.answer == JoinResult(E.UNKNOWN_MEMBER, member_id=pending.member_id)


def test_single_member_without_initial_delay_completes_at_once_and_leads():
    co = coordinator(delay_ms=0)
    outcome = co.join(join_request(client="a"), 0)
    assert outcome.answer is None
    result = join_replies(outcome.replies)[outcome.waiting_as]
    assert result.error is E.NONE
    assert result.generation_id == 1 and result.leader_id == outcome.waiting_as == result.member_id
    assert result.members == (JoinMember(outcome.waiting_as, None, b"range-meta"),)
    assert state(co) is S.COMPLETING_REBALANCE


def test_initial_rebalance_delay_holds_joins_until_a_tick_past_it():
    co = coordinator(delay_ms=3_000)
    a = co.join(join_request(client="a"), 0)
    assert a.answer is None and a.replies == []
    assert co.next_deadline_ms() == 3_000
    assert co.tick(2_999) == []
    b = co.join(join_request(client="b"), 1_000)  # a later joiner extends the delay
    assert b.replies == []
    assert co.tick(3_000) == []
    assert co.next_deadline_ms() == 4_000
    results = join_replies(co.tick(4_000))
    assert set(results) == {a.waiting_as, b.waiting_as}
    assert {r.generation_id for r in results.values()} == {1}
    assert results[a.waiting_as].leader_id == a.waiting_as
    assert len(results[a.waiting_as].members) == 2 and results[b.waiting_as].members == ()


def test_leader_sync_completes_every_pending_sync_with_its_own_assignment():
    co = coordinator(delay_ms=3_000)
    a = co.join(join_request(client="a"), 0).waiting_as
    b = co.join(join_request(client="b"), 0).waiting_as
    co.tick(3_000)

    follower = co.sync(sync_request(b, 1), 3_100)
    assert follower.answer is None and follower.waiting_as == b and follower.replies == []
    assert co.heartbeat(G, b, 1, None, 3_150) is E.NONE  # CompletingRebalance: heartbeats are fine

    leader = co.sync(sync_request(a, 1, {a: b"to-a", b: b"to-b"}), 3_200)
    assert leader.answer is None and leader.waiting_as == a
    assert sync_replies(leader.replies) == {
        a: SyncResult(E.NONE, "consumer", "range", b"to-a"),
        b: SyncResult(E.NONE, "consumer", "range", b"to-b"),
    }
    assert state(co) is S.STABLE
    view = co.describe(G)
    assert view is not None and {m.member_id: m.assignment for m in view.members} == {a: b"to-a", b: b"to-b"}
    # a SyncGroup in Stable is answered at once with the member's assignment
    assert co.sync(sync_request(b, 1), 3_300).answer == SyncResult(E.NONE, "consumer", "range", b"to-b")


def test_new_member_in_stable_group_rebalances_into_the_next_generation():
    co = coordinator()
    a = join_alone(co)
    b = co.join(join_request(client="b"), 1_000)
    assert b.answer is None and b.replies == []
    assert state(co) is S.PREPARING_REBALANCE
    assert co.heartbeat(G, a, 1, None, 1_500) is E.REBALANCE_IN_PROGRESS

    rejoin = co.join(join_request(a, client="a"), 2_000)
    results = join_replies(rejoin.replies)
    assert set(results) == {a, b.waiting_as}
    assert {r.generation_id for r in results.values()} == {2}
    assert {r.leader_id for r in results.values()} == {a}
    assert state(co) is S.COMPLETING_REBALANCE


def test_member_that_does_not_rejoin_before_the_rebalance_deadline_is_removed():
    co = coordinator()
    a, b, generation = stable_pair(co)
    c = co.join(join_request(client="c"), 5_000).waiting_as  # deadline 5_000 + REBALANCE
    assert co.join(join_request(a, client="a"), 6_000).replies == []
    for now in (10_000, 18_000, 26_000, 34_000):  # b stays alive but never rejoins
        assert co.heartbeat(G, b, generation, None, now) is E.REBALANCE_IN_PROGRESS
    assert co.next_deadline_ms() == 35_000
    assert co.tick(34_999) == []

    results = join_replies(co.tick(35_000))
    assert set(results) == {a, c}
    assert {r.generation_id for r in results.values()} == {generation + 1}
    assert member_ids(co) == [a, c]
    assert co.heartbeat(G, b, generation, None, 35_001) is E.UNKNOWN_MEMBER


def test_session_expiry_removes_a_silent_member_and_rebalances():
    co = coordinator()
    a, b, generation = stable_pair(co)
    assert co.heartbeat(G, a, generation, None, 8_000) is E.NONE
    assert co.next_deadline_ms() == 2_000 + SESSION  # b, last seen at its sync
    assert co.tick(11_999) == []
    assert co.tick(12_000) == []
    assert member_ids(co) == [a]
    assert state(co) is S.PREPARING_REBALANCE
    assert co.heartbeat(G, a, generation, None, 12_500) is E.REBALANCE_IN_PROGRESS
    results = join_replies(co.join(join_request(a, client="a"), 13_000).replies)
    assert results[a].generation_id == generation + 1 and results[a].members == (JoinMember(a, None, b"range-meta"),)


def test_leave_removes_the_member_and_rebalances():
    co = coordinator()
    a, b, generation = stable_pair(co)
    errors, replies = co.leave(G, [(b, None)], 3_000)
    assert errors == [E.NONE] and replies == []
    assert member_ids(co) == [a] and state(co) is S.PREPARING_REBALANCE
    results = join_replies(co.join(join_request(a, client="a"), 3_100).replies)
    assert results[a].generation_id == generation + 1

    errors, replies = co.leave(G, [(a, None)], 4_000)  # the last member: the group empties
    assert errors == [E.NONE] and replies == []
    view = co.describe(G)
    assert view is not None and view.state is S.EMPTY and view.members == () and view.leader_id == ""


def test_an_emptied_group_keeps_its_protocol_type_until_a_new_first_member_names_another():
    # Kafka's ClassicGroup sets the protocol type when a member joins an empty group and never
    # clears it: DescribeGroups and ListGroups show "consumer" for an Empty former consumer group.
    co = coordinator()
    a = join_alone(co)
    co.leave(G, [(a, None)], 1_000)
    view = co.describe(G)
    assert view is not None and view.state is S.EMPTY
    assert (view.protocol_type, view.protocol_name) == ("consumer", "")
    co.join(join_request(client="c", protocol_type="connect"), 2_000)
    view = co.describe(G)
    assert view is not None and view.protocol_type == "connect"


def test_leave_of_a_waiting_member_answers_its_join_with_unknown_member():
    co = coordinator(delay_ms=3_000)
    a = co.join(join_request(client="a"), 0).waiting_as
    errors, replies = co.leave(G, [(a, None)], 100)
    assert errors == [E.NONE]
    assert replies == [Reply(G, a, "join", JoinResult(E.UNKNOWN_MEMBER, member_id=a))]
    assert member_ids(co) == []


def test_leave_of_an_unknown_member_or_group_is_unknown_member():
    co = coordinator()
    a = join_alone(co)
    assert co.leave(G, [("nobody", None), (a, None)], 1_000)[0] == [E.UNKNOWN_MEMBER, E.NONE]
    assert co.leave("other", [(a, None)], 1_000) == ([E.UNKNOWN_MEMBER], [])


def test_leave_of_a_static_member_by_instance_id_alone():
    co = coordinator()
    member = co.join(join_request(client="s", instance="i-1"), 0).waiting_as
    assert co.leave(G, [("", "i-1")], 100)[0] == [E.NONE]
    assert member not in member_ids(co)
    assert co.leave(G, [("", "i-1")], 200)[0] == [E.UNKNOWN_MEMBER]


# -- errors


def test_wrong_generation_is_illegal_on_sync_heartbeat_and_commit():
    co = coordinator()
    a, _, generation = stable_pair(co)
    for wrong in (generation - 1, generation + 1):
        assert co.sync(sync_request(a, wrong), 3_000).answer == SyncResult(E.ILLEGAL_GENERATION)
        assert co.heartbeat(G, a, wrong, None, 3_000) is E.ILLEGAL_GENERATION
        assert co.validate_commit(G, a, wrong, None, 3_000) is E.ILLEGAL_GENERATION
    assert co.heartbeat(G, a, generation, None, 3_000) is E.NONE


def test_inconsistent_protocol_type_or_no_common_protocol():
    co = coordinator()
    join_alone(co)  # "consumer" with range
    other_type = co.join(join_request(client="b", protocol_type="connect"), 1_000)
    assert other_type.answer == JoinResult(E.INCONSISTENT_PROTOCOL)
    no_common = co.join(join_request(client="b", protocols=(("roundrobin", b""),)), 1_000)
    assert no_common.answer == JoinResult(E.INCONSISTENT_PROTOCOL)
    assert co.join(join_request(client="b", protocols=()), 1_000).answer == JoinResult(E.INCONSISTENT_PROTOCOL)
    assert co.join(join_request(client="b", protocol_type=""), 1_000).answer == JoinResult(E.INCONSISTENT_PROTOCOL)
    assert state(co) is S.STABLE and len(member_ids(co)) == 1


def test_sync_with_another_protocol_name_is_inconsistent():
    co = coordinator()
    a = join_alone(co)
    wrong = co.sync(sync_request(a, 1, protocol_name="roundrobin"), 1_000)
    assert wrong.answer == SyncResult(E.INCONSISTENT_PROTOCOL)
    assert co.sync(sync_request(a, 1, protocol_name="range"), 1_000).answer == SyncResult(
        E.NONE, "consumer", "range", b"all")


def test_sole_member_rejoining_with_another_protocol_type_is_inconsistent():
    # Kafka checks a non-empty group's protocol type against every member's join, the
    # joining member's own included (ClassicGroup.supportsClassicProtocols).
    co = coordinator()
    a = join_alone(co)
    outcome = co.join(join_request(a, client="a", protocol_type="connect"), 1_000)
    assert outcome.answer == JoinResult(E.INCONSISTENT_PROTOCOL, member_id=a)


def test_session_timeout_out_of_bounds_is_invalid():
    co = coordinator()
    for timeout in (5_999, 1_800_001):
        outcome = co.join(join_request(session_ms=timeout), 0)
        assert outcome.answer == JoinResult(E.INVALID_SESSION_TIMEOUT)
    assert co.describe(G) is None
    for timeout in (6_000, 1_800_000):
        assert co.join(join_request(session_ms=timeout), 0).answer is None


def test_empty_group_id_is_invalid():
    co = coordinator()
    assert co.join(join_request(group=""), 0).answer == JoinResult(E.INVALID_GROUP_ID)
    assert co.list() == []


def test_known_member_id_in_an_unknown_group_is_unknown_member():
    co = coordinator()
    assert co.join(join_request("ghost"), 0).answer == JoinResult(E.UNKNOWN_MEMBER, member_id="ghost")
    assert co.sync(sync_request("ghost", 1), 0).answer == SyncResult(E.UNKNOWN_MEMBER)
    assert co.heartbeat(G, "ghost", 1, None, 0) is E.UNKNOWN_MEMBER


# -- static membership (KIP-345)


def static_pair(co: ClassicCoordinator) -> tuple[str, str]:
    """a (dynamic, leader) and static member s (instance i-1), Stable in generation 2."""
    a = join_alone(co)
    s = co.join(join_request(client="s", instance="i-1"), 1_000).waiting_as
    co.join(join_request(a, client="a"), 2_000)
    co.sync(sync_request(s, 2, instance="i-1"), 2_000)
    co.sync(sync_request(a, 2, {a: b"for-a", s: b"for-s"}), 2_000)
    assert state(co) is S.STABLE
    return a, s


def test_static_member_restart_keeps_its_assignment_without_a_rebalance():
    co = coordinator()
    a, s = static_pair(co)
    restart = co.join(join_request(client="s", instance="i-1"), 3_000)
    assert isinstance(restart.answer, JoinResult) and restart.replies == []
    new_id = restart.answer.member_id
    assert new_id not in (a, s)
    assert restart.answer.error is E.NONE and restart.answer.generation_id == 2
    assert restart.answer.leader_id == a and restart.answer.members == ()
    view = co.describe(G)
    assert view is not None and view.state is S.STABLE and view.generation_id == 2
    assert {m.member_id: m.assignment for m in view.members} == {a: b"for-a", new_id: b"for-s"}

    assert co.sync(sync_request(new_id, 2, instance="i-1"), 3_100).answer == SyncResult(
        E.NONE, "consumer", "range", b"for-s")
    assert co.heartbeat(G, s, 2, "i-1", 3_200) is E.FENCED_INSTANCE_ID
    assert co.heartbeat(G, new_id, 2, "i-1", 3_200) is E.NONE
    assert co.sync(sync_request(s, 2, instance="i-1"), 3_200).answer == SyncResult(E.FENCED_INSTANCE_ID)
    assert co.join(join_request(s, instance="i-1"), 3_300).answer == JoinResult(E.FENCED_INSTANCE_ID, member_id=s)


def test_static_member_replaced_while_its_join_waits_is_fenced():
    co = coordinator(delay_ms=3_000)
    old = co.join(join_request(client="s", instance="i-1"), 0).waiting_as
    new = co.join(join_request(client="s", instance="i-1"), 500)
    assert new.answer is None and new.waiting_as != old
    assert new.replies == [Reply(G, old, "join", JoinResult(E.FENCED_INSTANCE_ID, member_id=old))]
    assert member_ids(co) == [new.waiting_as]


# -- protocol selection


def test_protocol_selection_picks_the_most_preferred_protocol_all_members_support():
    co = coordinator(delay_ms=3_000)
    prefs = {
        "a": (("sticky", b"a-s"), ("rr", b"a-rr"), ("range", b"a-r")),
        "b": (("rr", b"b-rr"), ("range", b"b-r")),
        "c": (("rr", b"c-rr"), ("sticky", b"c-s"), ("range", b"c-r")),
    }
    ids = {client: co.join(join_request(client=client, protocols=p), 0).waiting_as for client, p in prefs.items()}
    results = join_replies(co.tick(3_000))
    assert {r.protocol_name for r in results.values()} == {"rr"}  # sticky is not supported by b
    leader = results[ids["a"]]
    assert {m.member_id: m.metadata for m in leader.members} == {
        ids["a"]: b"a-rr", ids["b"]: b"b-rr", ids["c"]: b"c-rr"}


def test_protocol_selection_counts_votes():
    co = coordinator(delay_ms=3_000)
    prefs = {
        "a": (("range", b""), ("rr", b"")),
        "b": (("rr", b""), ("range", b"")),
        "c": (("rr", b""), ("range", b"")),
    }
    for client, p in prefs.items():
        co.join(join_request(client=client, protocols=p), 0)
    assert {r.protocol_name for r in join_replies(co.tick(3_000)).values()} == {"rr"}


# -- offset commits


def test_commit_with_generation_minus_one_to_an_unknown_or_empty_group_is_accepted():
    co = coordinator()
    assert co.validate_commit("simple", "", -1, None, 0) is E.NONE
    a = join_alone(co)
    co.leave(G, [(a, None)], 1_000)
    assert state(co) is S.EMPTY
    assert co.validate_commit(G, "", -1, None, 1_000) is E.NONE


def test_commit_to_a_group_with_members_needs_a_member_of_the_current_generation():
    co = coordinator()
    a, _, generation = stable_pair(co)
    assert co.validate_commit(G, "", -1, None, 3_000) is E.UNKNOWN_MEMBER
    assert co.validate_commit(G, "stranger", generation, None, 3_000) is E.UNKNOWN_MEMBER
    assert co.validate_commit(G, a, generation, None, 3_000) is E.NONE
    co.join(join_request(client="c"), 4_000)  # PreparingRebalance: the old generation may still commit
    assert co.validate_commit(G, a, generation, None, 4_000) is E.NONE


def test_commit_while_completing_rebalance_is_rebalance_in_progress():
    co = coordinator()
    member = co.join(join_request(), 0).waiting_as
    assert state(co) is S.COMPLETING_REBALANCE
    assert co.validate_commit(G, member, 1, None, 100) is E.REBALANCE_IN_PROGRESS
    assert co.validate_commit(G, member, 0, None, 100) is E.ILLEGAL_GENERATION


def test_commit_with_a_generation_to_a_group_that_does_not_exist_is_illegal_generation():
    # Kafka's GroupCoordinator.handleCommitOffsets (and OffsetCommit < v9 in the new
    # coordinator): an unknown group with generation >= 0 is ILLEGAL_GENERATION.
    co = coordinator()
    assert co.validate_commit("nowhere", "m", 3, None, 0) is E.ILLEGAL_GENERATION


def test_commit_with_a_generation_to_an_empty_group_is_unknown_member():
    # Kafka validates the member before the generation: an Empty group has no members.
    co = coordinator()
    a = join_alone(co)
    co.leave(G, [(a, None)], 1_000)
    assert co.validate_commit(G, a, 1, None, 1_000) is E.UNKNOWN_MEMBER


# -- admin


def test_delete_needs_an_empty_group():
    co = coordinator()
    a = join_alone(co)
    assert co.delete(G) is E.NON_EMPTY_GROUP
    assert co.delete("nowhere") is E.GROUP_NOT_FOUND
    co.leave(G, [(a, None)], 1_000)
    assert co.delete(G) is E.NONE
    assert co.describe(G) is None


# -- deadlines


def test_next_deadline_is_the_earliest_relevant_deadline():
    co = coordinator()
    assert co.next_deadline_ms() is None
    a = co.join(join_request(client="a", session_ms=60_000, rebalance_ms=20_000), 0).waiting_as
    assert co.next_deadline_ms() == 20_000  # the sync phase deadline, before a's session
    co.sync(sync_request(a, 1, {a: b""}), 0)
    assert co.next_deadline_ms() == 60_000  # Stable: only a's session counts
    co.join(join_request(client="p", require_known=True, session_ms=6_000, group="h"), 1_000)
    assert co.next_deadline_ms() == 7_000  # the pending member id of group h
    co.tick(7_000)
    assert co.next_deadline_ms() == 60_000
    b = co.join(join_request(client="b", rebalance_ms=15_000), 9_000).waiting_as
    assert co.next_deadline_ms() == 9_000 + 20_000  # the rebalance deadline; b waits, so has no session
    assert set(join_replies(co.tick(29_000))) == {b}  # a did not rejoin
    assert co.next_deadline_ms() == 29_000 + SESSION  # b's session, before the sync deadline


# -- found by these tests (see the report): Kafka behaviour the machine should match


def test_sync_answer_restarts_the_session_of_a_member_that_waited():
    # Kafka's propagateAssignment restarts the session timer of every member whose SyncGroup it
    # answers; a follower that waited for a slow leader is not expired the moment it is answered.
    co = coordinator(delay_ms=3_000)
    a = co.join(join_request(client="a", session_ms=6_000, rebalance_ms=60_000), 0).waiting_as
    b = co.join(join_request(client="b", session_ms=6_000, rebalance_ms=60_000), 0).waiting_as
    co.tick(3_000)
    co.sync(sync_request(b, 1), 3_000)
    co.heartbeat(G, a, 1, None, 8_000)
    co.sync(sync_request(a, 1, {a: b"x", b: b"y"}), 12_000)
    assert co.tick(12_000) == []
    assert member_ids(co) == [a, b] and state(co) is S.STABLE


def test_tick_expiring_two_silent_members_after_the_rebalance_deadline():
    # b and c stop heartbeating after syncing at 3_000; the leader a rejoins at 4_000. By the
    # next tick both the rebalance deadline (8_000) and both sessions (13_000) have passed: b
    # and c are removed and the join completes with a alone.
    co = coordinator(delay_ms=3_000)
    a, b, c = (co.join(join_request(client=x, rebalance_ms=4_000), 0).waiting_as for x in "abc")
    co.tick(3_000)
    co.sync(sync_request(b, 1), 3_000)
    co.sync(sync_request(c, 1), 3_000)
    co.sync(sync_request(a, 1, {a: b"", b: b"", c: b""}), 3_000)
    co.join(join_request(a, client="a", rebalance_ms=4_000), 4_000)
    replies = co.tick(20_000)
    assert set(join_replies(replies)) == {a}
    assert member_ids(co) == [a]


def test_leader_leaving_during_a_rebalance_hands_leadership_to_a_member():
    # Kafka elects another leader as soon as the leader is removed (ClassicGroup.remove), so
    # the group never names a leader that is not a member.
    co = coordinator(delay_ms=3_000)
    a, b, c = (co.join(join_request(client=x), 0).waiting_as for x in "abc")
    co.tick(3_000)
    co.sync(sync_request(a, 1, {}), 3_000)
    co.join(join_request(b, client="b", protocols=(("range", b"changed"),)), 4_000)
    assert co.leave(G, [(a, None)], 4_100)[0] == [E.NONE]
    view = co.describe(G)
    assert view is not None and view.state is S.PREPARING_REBALANCE
    assert view.leader_id in {b, c}


def test_first_member_of_an_empty_group_leads_while_the_join_waits():
    # Kafka makes the first member added to a group its leader (ClassicGroup.add), so a
    # group with members always names one, also during the initial rebalance delay.
    co = coordinator(delay_ms=3_000)
    a = co.join(join_request(client="a"), 0).waiting_as
    view = co.describe(G)
    assert view is not None and view.state is S.PREPARING_REBALANCE
    assert view.leader_id == a


def test_initial_delay_ends_by_the_rebalance_deadline():
    # Kafka's InitialDelayedJoin never outlasts the rebalance timeout the group had when the
    # rebalance began (3_000 here): the join completes at 3_000 with both members. Here a later
    # joiner with a longer rebalance timeout stretches the delay past that deadline, and
    # next_deadline_ms keeps reporting the passed deadline, which tick does not act on.
    co = coordinator(delay_ms=3_000)
    a = co.join(join_request(client="a", rebalance_ms=3_000), 0).waiting_as
    b = co.join(join_request(client="b", rebalance_ms=8_000), 1).waiting_as
    assert set(join_replies(co.tick(3_000))) == {a, b}
    deadline = co.next_deadline_ms()
    assert deadline is None or deadline > 3_000
