"""Properties of the KIP-848 assignors and the consumer-protocol state machine.

Assignors: every partition of a subscribed topic goes to exactly one subscriber; uniform is
balanced (max - min <= 1) when everyone subscribes to the same topics, and sticky: a member
keeps min(what it had, its quota) of its previous partitions.

Machine: random clients join, heartbeat (reporting exactly what they were last told to own),
drop responses, leave, go silent, while topics grow and the clock jumps. After every step no
partition is owned by two clients, and once everyone heartbeats in turn the group settles on
the target assignment with every partition owned.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from martlet.engine.groups.assignors import AssignmentSpec, MemberSpec, range_assign, uniform_assign
from martlet.engine.groups.consumer import ConsumerCoordinator, ConsumerGroupLimits
from martlet.engine.groups.types import GroupError, HeartbeatRequest, TopicLookup

TOPICS = ["t", "u", "v"]
member_ids = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True)
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)


@st.composite
def specs(draw, same_topics: bool):
    partitions = draw(partition_counts)
    everything = [(t, p) for t, n in partitions.items() for p in range(n)]
    members = {}
    for member in draw(member_ids):
        topics = set(partitions) if same_topics else set(draw(st.lists(st.sampled_from(sorted(partitions)))))
        current = draw(st.sets(st.sampled_from(everything))) if everything else set()
        members[member] = MemberSpec(frozenset(topics), frozenset(current))
    # Previous assignments never overlap in practice: each partition had one owner.
    seen: set = set()
    for member in sorted(members):
        spec_ = members[member]
        members[member] = MemberSpec(spec_.topics, frozenset(spec_.current - seen))
        seen |= spec_.current
    return AssignmentSpec(members, partitions)


def check_complete(spec: AssignmentSpec, result) -> None:
    assert set(result) == set(spec.members)
    given_out = [tp for tps in result.values() for tp in tps]
    assert len(given_out) == len(set(given_out))
    subscribed = {t for m in spec.members.values() for t in m.topics}
    assert set(given_out) == {(t, p) for t in subscribed for p in range(spec.partitions[t])}
    for member, tps in result.items():
        assert all(t in spec.members[member].topics for t, _ in tps)


@given(specs(same_topics=False))
def test_every_subscribed_partition_assigned_once(spec):
    check_complete(spec, uniform_assign(spec))
    check_complete(spec, range_assign(spec))


@given(specs(same_topics=True))
def test_uniform_balanced_and_sticky_with_equal_subscriptions(spec):
    result = uniform_assign(spec)
    check_complete(spec, result)
    sizes = [len(tps) for tps in result.values()]
    assert max(sizes) - min(sizes) <= 1
    total, members = sum(sizes), len(sizes)
    for member, tps in result.items():
        valid = {(t, p) for t, p in spec.members[member].current if p < spec.partitions[t]}
        assert len(tps & valid) >= min(len(valid), total // members)


@given(specs(same_topics=False))
def test_assignors_are_deterministic(spec):
    shuffled = AssignmentSpec(dict(reversed(list(spec.members.items()))), dict(reversed(list(spec.partitions.items()))))
    assert uniform_assign(spec) == uniform_assign(shuffled)
    assert range_assign(spec) == range_assign(shuffled)


class Client:
    def __init__(self, name: str) -> None:
        self.name = name
        self.epoch = 0
        self.owned: frozenset = frozenset()
        self.joined = False


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.machine = ConsumerCoordinator(ConsumerGroupLimits(session_timeout_ms=10_000), lambda: "unused")
        self.counts = {"t": 4, "u": 2}
        self.now = 0
        self.clients = {name: Client(name) for name in "abcd"}

    def lookup(self) -> TopicLookup:
        return TopicLookup(self.counts.get, lambda n: n if n in self.counts else None, lambda: list(self.counts))

    def _send(self, client: Client, request: HeartbeatRequest, deliver: bool = True) -> None:
        result = self.machine.heartbeat(request, self.lookup(), self.now)
        if result.error is GroupError.FENCED_MEMBER_EPOCH:  # drops its partitions and rejoins at once
            client.epoch, client.owned = 0, frozenset()
            result = self.machine.heartbeat(_join_request(client.name, False), self.lookup(), self.now)
        if result.error is GroupError.UNKNOWN_MEMBER:
            client.joined, client.epoch, client.owned = False, 0, frozenset()
            return
        assert result.error is GroupError.NONE, result
        if deliver:
            client.epoch = result.member_epoch
            if result.assignment is not None:
                client.owned = result.assignment

    @rule(name=st.sampled_from("abcd"), regex=st.booleans())
    def join(self, name, regex):
        client = self.clients[name]
        if client.joined:
            return
        client.joined, client.owned = True, frozenset()
        self._send(client, _join_request(name, regex))

    @rule(name=st.sampled_from("abcd"), deliver=st.booleans())
    def heartbeat(self, name, deliver):
        client = self.clients[name]
        if client.joined:
            self._send(client, _beat(client), deliver)

    @rule(name=st.sampled_from("abcd"))
    def leave(self, name):
        client = self.clients[name]
        if client.joined:
            self.machine.heartbeat(HeartbeatRequest("g", name, -1), self.lookup(), self.now)
            client.joined, client.epoch, client.owned = False, 0, frozenset()

    @rule(ms=st.sampled_from([100, 1_000, 6_000, 11_000]))
    def time_passes(self, ms):
        self.now += ms
        self.machine.tick(self.now)
        present = {m.member_id for m in (self.machine.describe("g").members if self.machine.describe("g") else ())}
        for client in self.clients.values():
            if client.joined and client.name not in present:  # expired or fenced: it stops consuming
                client.joined, client.epoch, client.owned = False, 0, frozenset()

    @rule()
    def grow(self):
        self.counts["t"] += 1

    @invariant()
    def no_partition_has_two_owners(self):
        owned = [tp for c in self.clients.values() if c.joined for tp in c.owned]
        assert len(owned) == len(set(owned))

    @invariant()
    def settles_when_everyone_heartbeats(self):
        members = [c for c in self.clients.values() if c.joined]
        view = self.machine.describe("g")
        if not members or view is None:
            return
        assert {m.member_id for m in view.members} == {c.name for c in members}
        saved = {c.name: (c.epoch, c.owned) for c in members}
        machine_copy = _copy(self.machine)
        for _ in range(4):
            for client in members:
                result = machine_copy.heartbeat(_beat(client), self.lookup(), self.now)
                if result.error is GroupError.FENCED_MEMBER_EPOCH:  # lost answers: start over, own nothing
                    client.owned = frozenset()
                    result = machine_copy.heartbeat(_join_request(client.name, regex=False), self.lookup(), self.now)
                assert result.error is GroupError.NONE, result
                client.epoch = result.member_epoch
                client.owned = client.owned if result.assignment is None else result.assignment
        owned = [tp for c in members for tp in c.owned]
        assert len(owned) == len(set(owned))
        assert set(owned) == {(t, p) for t, n in self.counts.items() for p in range(n)}
        for client in members:
            client.epoch, client.owned = saved[client.name]


def _beat(client: Client) -> HeartbeatRequest:
    """A client whose join answer was lost is still at epoch 0 and sends a full join again."""
    if client.epoch == 0:
        return _join_request(client.name, regex=False)
    return HeartbeatRequest("g", client.name, client.epoch, owned=client.owned)


def _join_request(name: str, regex: bool) -> HeartbeatRequest:
    names, pattern = (None, "t|u") if regex else (("t", "u"), None)
    return HeartbeatRequest("g", name, 0, rebalance_timeout_ms=5_000, owned=frozenset(),
                            subscribed_topic_names=names, subscribed_topic_regex=pattern)


def _copy(machine: ConsumerCoordinator) -> ConsumerCoordinator:
    return copy.deepcopy(machine)


ConsumerGroupMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_consumer_group_machine = ConsumerGroupMachine.TestCase
