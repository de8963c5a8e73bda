"""Consumer groups (classic protocol): 1 then 3 then 1 members with commits and a restart
that resumes; static membership; the cooperative-sticky assignor.

Members are polled in turn (`poll_members`) because a classic rebalance completes only
when every member rejoins. Heartbeats run in the clients' own threads or loops.
"""

from __future__ import annotations

from typing import Any

from ..clients.base import Driver, Record
from .common import NONE, Context, Member, expect, expect_equal, poll_members, records

JOIN_TIMEOUT_S = 45.0
SESSION_TIMEOUT_MS = 10_000


def _spread(count: int, tag: str, partitions: int) -> list[Record]:
    sent = records(count, tag, headers=False)
    for index, record in enumerate(sent):
        record["partition"] = index % partitions
    return sent


def _produce(driver: Driver, topic: str, sent: list[Record]) -> None:
    errors = [a["error"] for a in driver.produce(topic, sent) if a["error"] != NONE]
    expect(not errors, f"produce: {errors[:3]}")


def _values(members: list[Member]) -> set[str]:
    return {r["value"] for m in members for r in m.records}


def _start(driver: Driver, ctx: Context, handle: str, group: str, topic: str, **options: Any) -> Member:
    driver.member_start(ctx.name(handle), group, [topic], session_timeout_ms=SESSION_TIMEOUT_MS, **options)
    return Member(ctx.name(handle))


# librdkafka's answer to a commit by a member that has read nothing since its assignment (it
# may have read its partitions' records before a rebalance that gave it those partitions).
NOTHING_TO_COMMIT = "CLIENT_ERROR: _NO_OFFSET"


def _commit(driver: Driver, member: Member, may_have_nothing: bool = False) -> None:
    answer = driver.member_commit(member.handle)
    if not (may_have_nothing and answer == NOTHING_TO_COMMIT):
        expect_equal(answer, NONE, f"commit by {member.handle}")


def group_scale_1_3_1(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a group goes 1, 3, 1 members, commits, restarts and resumes at the commit."""
    partitions = 6
    topic = ctx.topic(driver, "t", partitions=partitions)
    group = ctx.name("g")
    seen: dict[str, Any] = {}
    first = _spread(30, "p1", partitions)
    _produce(driver, topic, first)
    m1 = _start(driver, ctx, "m1", group, topic)
    want = {r["value"] for r in first}
    poll_members(driver, [m1], lambda: len(m1.partitions()) == partitions and want <= _values([m1]),
                 JOIN_TIMEOUT_S, "one member owning all 6 partitions and reading the first 30 records")
    seen["one_member"] = m1.partitions()
    _commit(driver, m1)
    seen["committed_after_one"] = driver.committed(group, topic, list(range(partitions)))
    expect_equal(seen["committed_after_one"], {str(p): 5 for p in range(partitions)}, "committed offsets")

    second = _spread(30, "p2", partitions)
    _produce(driver, topic, second)
    m2, m3 = _start(driver, ctx, "m2", group, topic), _start(driver, ctx, "m3", group, topic)
    three = [m1, m2, m3]
    want = {r["value"] for r in second}

    def balanced() -> bool:
        owned = sorted(p for m in three for p in m.partitions())
        return owned == list(range(partitions)) and all(len(m.partitions()) == 2 for m in three)

    poll_members(driver, three, lambda: balanced() and want <= _values(three), JOIN_TIMEOUT_S,
                 "three members owning 2 partitions each and reading the next 30 records")
    seen["three_members"] = sorted(len(m.partitions()) for m in three)
    for member in three:
        _commit(driver, member, may_have_nothing=True)  # what counts is the commit checked below
    driver.member_stop(m2.handle)
    driver.member_stop(m3.handle)
    third = _spread(12, "p3", partitions)
    _produce(driver, topic, third)
    want = {r["value"] for r in third}
    poll_members(driver, [m1], lambda: len(m1.partitions()) == partitions and want <= _values([m1]),
                 JOIN_TIMEOUT_S, "the remaining member owning all 6 partitions again and reading 12 more")
    seen["one_member_again"] = m1.partitions()
    _commit(driver, m1)
    seen["committed_before_restart"] = driver.committed(group, topic, list(range(partitions)))
    expect_equal(seen["committed_before_restart"], {str(p): 12 for p in range(partitions)}, "committed offsets")
    driver.member_stop(m1.handle)

    fourth = _spread(6, "p4", partitions)
    _produce(driver, topic, fourth)
    m4 = _start(driver, ctx, "m4", group, topic)
    want = {r["value"] for r in fourth}
    poll_members(driver, [m4], lambda: want <= _values([m4]), JOIN_TIMEOUT_S,
                 "a restarted member reading the 6 records produced after the last commit")
    resumed = sorted((r["partition"], r["offset"]) for r in m4.records)
    expect_equal(resumed, [(p, 12) for p in range(partitions)], "(partition, offset) read after the restart")
    seen["resumed_at"] = resumed
    driver.member_stop(m4.handle)
    return seen


def _keep_polling(driver: Driver, members: list[Member], seconds: float) -> None:
    try:
        poll_members(driver, members, lambda: False, seconds, "")
    except AssertionError:
        pass


def static_membership(driver: Driver, ctx: Context) -> dict[str, Any]:
    """a static leader that restarts gets its partitions back without a rebalance."""
    topic = ctx.topic(driver, "t", partitions=4)
    group = ctx.name("g")
    # `a` joins first, alone, so it is the group leader when it restarts: the case where a
    # coordinator is most tempted to rebalance (KIP-814 lets the leader skip assignment).
    a = _start(driver, ctx, "a", group, topic, instance_id=ctx.name("instance-a"))
    poll_members(driver, [a], lambda: len(a.partitions()) == 4, JOIN_TIMEOUT_S, "the first static member alone")
    b = _start(driver, ctx, "b", group, topic, instance_id=ctx.name("instance-b"))
    poll_members(driver, [a, b], lambda: len(a.partitions()) == 2 and len(b.partitions()) == 2, JOIN_TIMEOUT_S,
                 "two static members owning 2 partitions each")
    before_a, before_b, revoked_b = a.partitions(), b.partitions(), b.revoked
    driver.member_stop(a.handle)  # a static member closes without leaving the group
    again = _start(driver, ctx, "a2", group, topic, instance_id=ctx.name("instance-a"))
    poll_members(driver, [again, b], lambda: len(again.partitions()) == 2, JOIN_TIMEOUT_S,
                 "the restarted static member getting its partitions back")
    _keep_polling(driver, [again, b], seconds=4.0)  # a rebalance started by the rejoin shows up here
    expect_equal(again.partitions(), before_a, "partitions of the restarted static member")
    expect_equal(b.partitions(), before_b, "partitions of the other member")
    expect_equal(b.revoked, revoked_b, "partitions revoked from the other member (no rebalance expected)")
    driver.member_stop(again.handle)
    driver.member_stop(b.handle)
    return {"assignment_sizes": [len(before_a), len(before_b)], "other_member_revoked": b.revoked - revoked_b}


def cooperative_sticky(driver: Driver, ctx: Context) -> dict[str, Any]:
    """with cooperative-sticky only the partitions that move are revoked."""
    topic = ctx.topic(driver, "t", partitions=4)
    group = ctx.name("g")
    c1 = _start(driver, ctx, "c1", group, topic, assignor="cooperative-sticky")
    poll_members(driver, [c1], lambda: len(c1.partitions()) == 4, JOIN_TIMEOUT_S, "one member owning 4 partitions")
    revoked_before = c1.revoked
    c2 = _start(driver, ctx, "c2", group, topic, assignor="cooperative-sticky")
    poll_members(driver, [c1, c2], lambda: len(c1.partitions()) == 2 and len(c2.partitions()) == 2, JOIN_TIMEOUT_S,
                 "two members owning 2 partitions each")
    revoked = c1.revoked - revoked_before
    expect_equal(revoked, 2, "partitions revoked from the first member (cooperative: only those that move)")
    expect_equal(sorted(c1.partitions() + c2.partitions()), [0, 1, 2, 3], "partitions owned")
    driver.member_stop(c2.handle)
    driver.member_stop(c1.handle)
    return {"first_member_revoked": revoked, "assignment_sizes": [2, 2]}


SCENARIOS = [group_scale_1_3_1, static_membership, cooperative_sticky]
