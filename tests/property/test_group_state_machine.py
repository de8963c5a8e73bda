"""Property test: random clients drive the classic group coordinator (joins, static restarts,
syncs with a leader's assignment, heartbeats, commits, leaves, small and large clock jumps)
and after every step the group must be consistent: one generation at a time, every waiting
JoinGroup or SyncGroup answered exactly once, assignments as the leader gave them, removed
and expired members gone, a leader among the members."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from martlet.engine.groups.classic import ClassicCoordinator, GroupLimits
from martlet.engine.groups.types import (
    GroupError,
    GroupState,
    GroupView,
    JoinRequest,
    JoinResult,
    Outcome,
    Reply,
    SyncRequest,
    SyncResult,
)

# When a Hypothesis test fails, its pytest plugin imports libcst, whose mypy_extensions.TypedDict
# warning is attributed to libcst, so pyproject's "ignore::DeprecationWarning:mypy_extensions"
# misses it and the failure report is lost in an INTERNALERROR. Import it quietly up front.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:
        pass

E = GroupError
S = GroupState
G = "g"
PARTITIONS = range(6)

# mostly compatible choices, so groups get far; sometimes no protocol in common
compatible = st.sampled_from([["range"], ["rr", "range"], ["range", "sticky"]])
protocol_lists = st.one_of(compatible, compatible, compatible, st.lists(
    st.sampled_from(["range", "rr", "sticky"]), min_size=1, max_size=3, unique=True))
protocol_types = st.sampled_from(["consumer"] * 7 + ["connect"])
sessions = st.sampled_from([6_000, 10_000])
rebalances = st.sampled_from([3_000, 8_000, 20_000])
instances = st.sampled_from([None, None, "i0", "i1"])
picks = st.integers(0, 1_000)


@dataclass
class Client:
    """One consumer as the coordinator's peer sees it: what it was told, nothing more."""

    name: str
    instance: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_ms: int
    rebalance_ms: int
    member_id: str = ""
    pending_id: str = ""                 # from MEMBER_ID_REQUIRED
    joined: JoinResult | None = None     # the last successful JoinGroup answer
    waiting: set[str] = field(default_factory=set)  # "join", "sync"
    fenced: bool = False                 # told FENCED_INSTANCE_ID (or restarted): it stops


def encode(generation: int, member_id: str, partitions: list[int]) -> bytes:
    return f"{generation}|{member_id}|{','.join(map(str, partitions))}".encode()


def decode(assignment: bytes) -> tuple[int, str, set[int]]:
    generation, member_id, partitions = assignment.decode().split("|")
    return int(generation), member_id, {int(p) for p in partitions.split(",") if p}


class GroupMachine(RuleBasedStateMachine):
    @initialize(delay_ms=st.sampled_from([0, 3_000]))
    def start(self, delay_ms: int) -> None:
        ids = itertools.count()
        self.co = ClassicCoordinator(GroupLimits(initial_rebalance_delay_ms=delay_ms),
                                     lambda prefix: f"{prefix}-{next(ids)}")
        self.now = 0
        self.clients: list[Client] = []
        self.waits: dict[tuple[str, str], Client] = {}     # (kind, member id) -> the waiting client
        self.last_seen: dict[str, int] = {}                # member id -> when Kafka last heard of it
        self.session: dict[str, int] = {}                  # member id -> its session timeout
        self.gone: set[str] = set()                        # member ids that left the group
        self.assigned: dict[int, dict[str, bytes]] = {}    # generation -> leader's assignment
        self.generation = 0
        self.join_generation = 0                           # highest generation a join answered
        self.before = self.view()

    # -- helpers

    def view(self) -> GroupView | None:
        return self.co.describe(G)

    def members(self) -> dict[str, bytes]:
        view = self.view()
        return {} if view is None else {m.member_id: m.assignment for m in view.members}

    def current_generation(self) -> int:
        view = self.view()
        return -1 if view is None else view.generation_id

    def pick(self, candidates: list[Client], index: int) -> Client | None:
        return candidates[index % len(candidates)] if candidates else None

    def seen(self, member_id: str, session_ms: int | None = None) -> None:
        self.last_seen[member_id] = self.now
        if session_ms is not None:
            self.session[member_id] = session_ms

    def deliver(self, replies: list[Reply]) -> None:
        """Hand every reply to the client waiting for it; each wait is answered exactly once."""
        view = self.view()
        generations = {r.result.generation_id for r in replies
                       if isinstance(r.result, JoinResult) and r.result.error is E.NONE}
        assert len(generations) <= 1, f"one call completed several generations: {generations}"
        for reply in replies:
            assert reply.group_id == G
            key = (reply.kind, reply.member_id)
            assert key in self.waits, f"a reply nobody waits for: {reply}"
            client = self.waits.pop(key)
            client.waiting.discard(reply.kind)
            if isinstance(reply.result, JoinResult):
                self.on_join_reply(client, reply.result, view, replies)
            else:
                self.on_sync_reply(client, reply.member_id, reply.result)

    def on_join_reply(self, client: Client, result: JoinResult, view: GroupView | None, batch: list[Reply]) -> None:
        if result.error is E.NONE:
            assert view is not None and result.generation_id == view.generation_id
            assert result.generation_id >= self.join_generation
            self.join_generation = result.generation_id
            client.member_id, client.joined, client.pending_id = result.member_id, result, ""
            self.seen(result.member_id)
            assert result.protocol_name in dict(client.protocols), "a protocol every member supports"
            if result.members:  # the leader learns exactly the members answered in this round
                assert result.leader_id == result.member_id
                answered = {r.member_id for r in batch if r.kind == "join" and r.result.error is E.NONE}
                assert {m.member_id for m in result.members} == answered
        else:
            assert result.error in (E.UNKNOWN_MEMBER, E.FENCED_INSTANCE_ID), result
            self.forget(client, result.error)

    def on_sync_reply(self, client: Client, member_id: str, result: SyncResult) -> None:
        if result.error is E.NONE:
            generation = client.joined.generation_id if client.joined else -1
            assert result.assignment == self.assigned[generation][member_id]
            self.seen(member_id)
        elif result.error is E.REBALANCE_IN_PROGRESS:
            self.seen(member_id)
        else:
            assert result.error in (E.UNKNOWN_MEMBER, E.FENCED_INSTANCE_ID), result
            self.forget(client, result.error)

    def forget(self, client: Client, error: GroupError = E.UNKNOWN_MEMBER) -> None:
        """The client learnt it is out: a dynamic one starts over, a fenced static one stops."""
        if error is E.FENCED_INSTANCE_ID:
            client.fenced = True
        else:
            client.member_id, client.joined = "", None

    def live(self) -> list[Client]:
        return [c for c in self.clients if not c.fenced]

    def settle(self, outcome: Outcome, client: Client, kind: str) -> None:
        if outcome.answer is None:
            key = (kind, outcome.waiting_as)
            assert key not in self.waits, f"{key} waits twice"
            self.waits[key] = client
            client.waiting.add(kind)
            self.seen(outcome.waiting_as, client.session_ms if kind == "join" else None)
        self.deliver(outcome.replies)

    def send_join(self, client: Client, member_id: str, require_known: bool,
                  protocols: tuple[tuple[str, bytes], ...] | None = None) -> None:
        before = self.members()
        old_static = member_id == "" and client.instance is not None and any(
            c.instance == client.instance and c.member_id in before for c in self.clients if c is not client)
        request = JoinRequest(G, member_id, client.instance, client.protocol_type, protocols or client.protocols,
                              client.session_ms, client.rebalance_ms, require_known, client_id=client.name)
        outcome = self.co.join(request, self.now)
        answer = outcome.answer
        if answer is None or isinstance(answer, JoinResult) and answer.error is E.NONE:
            client.protocols = request.protocols
        self.settle(outcome, client, "join")
        if isinstance(answer, JoinResult):
            if answer.error is E.MEMBER_ID_REQUIRED:
                assert member_id == "" and client.instance is None and answer.member_id not in before
                client.pending_id = answer.member_id
            elif answer.error is E.NONE:  # a known member's current generation, or a static restart
                assert answer.generation_id == self.current_generation()
                if old_static:
                    self.inherit(client.instance, answer.member_id, before)
                client.member_id, client.joined = answer.member_id, answer
                self.seen(answer.member_id, client.session_ms)
            elif answer.error in (E.UNKNOWN_MEMBER, E.FENCED_INSTANCE_ID):
                self.forget(client, answer.error)
            else:
                assert answer.error is E.INCONSISTENT_PROTOCOL, answer

    def inherit(self, instance: str | None, new_id: str, before: dict[str, bytes]) -> None:
        """A static member restarted in a Stable group: its new id takes the old one's assignment."""
        [old_id] = [c.member_id for c in self.clients if c.instance == instance and c.member_id in before
                    and c.member_id != new_id]
        assigned = self.assigned.get(self.current_generation(), {})
        if old_id in assigned:
            assigned[new_id] = assigned[old_id]

    # -- rules

    @rule(name=st.text("abc", min_size=1, max_size=2), instance=instances, protocol_type=protocol_types,
          protocols=protocol_lists, session_ms=sessions, rebalance_ms=rebalances, require_known=st.booleans())
    def new_client(self, name, instance, protocol_type, protocols, session_ms, rebalance_ms, require_known):
        client = Client(name, instance, protocol_type, tuple((p, f"{p}:{name}".encode()) for p in protocols),
                        session_ms, rebalance_ms)
        self.clients.append(client)
        self.send_join(client, "", require_known)

    @rule(statics=st.lists(st.booleans(), min_size=2, max_size=4))
    def consumers_start(self, statics):
        """A few alike consumers start together, some static (instance ids s0, s1, ...)."""
        for n, static in enumerate(statics):
            client = Client(f"k{n}", f"s{n}" if static else None, "consumer", (("range", b"range:k"),), 10_000, 8_000)
            self.clients.append(client)
            self.send_join(client, "", True)

    @rule(index=picks)
    def restart_static(self, index):
        """A static member's process restarts: same instance id and protocols, no member id."""
        old = self.pick([c for c in self.live() if c.instance and c.member_id], index)
        if old is not None:
            old.fenced = True
            client = Client(old.name, old.instance, old.protocol_type, old.protocols, old.session_ms, old.rebalance_ms)
            self.clients.append(client)
            self.send_join(client, "", False)

    def stable_followers(self) -> list[Client]:
        view = self.view()
        if view is None or view.state is not S.STABLE:
            return []
        ids = {m.member_id for m in view.members} - {view.leader_id}
        return [c for c in self.live() if c.instance and c.member_id in ids]

    @precondition(lambda self: self.stable_followers())
    @rule(index=picks)
    def restart_static_follower_of_stable_group(self, index):
        """The KIP-345 case: no rebalance, the new member id takes the old one's assignment."""
        generation = self.current_generation()
        old = self.pick(self.stable_followers(), index)
        assert old is not None
        old.fenced = True
        client = Client(old.name, old.instance, old.protocol_type, old.protocols, old.session_ms, old.rebalance_ms)
        self.clients.append(client)
        self.send_join(client, "", False)
        view = self.view()
        assert view is not None and view.state is S.STABLE and view.generation_id == generation
        assert client.member_id in {m.member_id for m in view.members}
        assert old.member_id not in {m.member_id for m in view.members}

    @rule(index=picks, protocols=st.none() | protocol_lists)
    def rejoin(self, index, protocols):
        client = self.pick([c for c in self.live() if "join" not in c.waiting], index)
        if client is None:
            return
        wanted = None if protocols is None else tuple((p, f"{p}:{client.name}".encode()) for p in protocols)
        self.send_join(client, client.member_id or client.pending_id, True, wanted)

    @rule(index=picks, spread=st.lists(st.integers(0, 100), min_size=len(PARTITIONS), max_size=len(PARTITIONS)))
    def sync(self, index, spread):
        client = self.pick([c for c in self.live() if c.joined and c.member_id and not c.waiting], index)
        if client is not None:
            self.send_sync(client, spread)

    @rule(index=picks)
    def leader_sync(self, index):
        leader = self.pick([c for c in self.live() if c.joined and c.joined.members and not c.waiting], index)
        if leader is not None:
            self.send_sync(leader, [index * (p + 1) for p in PARTITIONS])

    def send_sync(self, client: Client, spread: list[int]) -> None:
        assert client.joined is not None
        generation = client.joined.generation_id
        assignments: dict[str, bytes] = {}
        if client.joined.members:  # the leader's assignor: each partition to exactly one member
            ids = [m.member_id for m in client.joined.members]
            owned: dict[str, list[int]] = {m: [] for m in ids}
            for partition, choice in zip(PARTITIONS, spread):
                owned[ids[choice % len(ids)]].append(partition)
            assignments = {m: encode(generation, m, parts) for m, parts in owned.items()}
        view = self.view()
        completing = view is not None and view.state is S.COMPLETING_REBALANCE and view.generation_id == generation
        request = SyncRequest(G, client.member_id, generation, client.instance, client.protocol_type,
                              client.joined.protocol_name, tuple(assignments.items()))
        outcome = self.co.sync(request, self.now)
        if outcome.answer is None and assignments and completing:
            self.assigned[generation] = dict(assignments)
        self.settle(outcome, client, "sync")
        answer = outcome.answer
        if isinstance(answer, SyncResult):
            if answer.error is E.NONE:
                assert answer.assignment == self.assigned[generation][client.member_id]
                self.seen(client.member_id)
            elif answer.error is E.REBALANCE_IN_PROGRESS:
                self.seen(client.member_id)
            elif answer.error in (E.UNKNOWN_MEMBER, E.FENCED_INSTANCE_ID):
                self.forget(client, answer.error)
            else:
                assert answer.error in (E.ILLEGAL_GENERATION, E.INCONSISTENT_PROTOCOL), answer

    @rule(index=picks)
    def heartbeat(self, index):
        client = self.pick([c for c in self.clients if c.member_id], index)
        if client is not None:
            self.send_heartbeat(client)

    @rule(spread=st.integers(0, 100), rounds=st.integers(1, 4))
    def everyone_acts(self, spread, rounds):
        """Every idle client does what a well-behaved consumer does next: rejoin when it is not in
        the current generation or a rebalance runs, sync while the rebalance completes, else
        heartbeat; a few rounds, 100 ms apart, as long as the group is not Stable."""
        for _ in range(rounds):
            self.act(spread)
            view = self.view()
            if view is None or view.state is S.STABLE:
                break
            self.tick(self.now + 100)

    def act(self, spread: int) -> None:
        for client in self.live():
            view = self.view()
            if client.waiting or view is None:
                continue
            current = client.joined is not None and client.joined.generation_id == view.generation_id
            if not client.member_id or not current or view.state is S.PREPARING_REBALANCE:
                self.send_join(client, client.member_id or client.pending_id, True)
            elif view.state is S.COMPLETING_REBALANCE:
                self.send_sync(client, [spread * (p + 3) for p in PARTITIONS])
            else:
                self.send_heartbeat(client)

    def send_heartbeat(self, client: Client) -> None:
        generation = client.joined.generation_id if client.joined else -1
        error = self.co.heartbeat(G, client.member_id, generation, client.instance, self.now)
        present = client.member_id in self.members()
        if error in (E.NONE, E.REBALANCE_IN_PROGRESS):
            assert present and generation == self.current_generation()
            self.seen(client.member_id)
        elif error is E.UNKNOWN_MEMBER:
            assert not present
            self.forget(client)
        else:
            assert error in (E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID), error
            if error is E.FENCED_INSTANCE_ID:
                self.forget(client, error)

    @rule(index=picks)
    def commit(self, index):
        client = self.pick([c for c in self.clients if c.member_id], index)
        if client is None:
            return
        generation = client.joined.generation_id if client.joined else -1
        error = self.co.validate_commit(G, client.member_id, generation, client.instance, self.now)
        view = self.view()
        if error is E.NONE:
            assert view is not None and view.state in (S.STABLE, S.PREPARING_REBALANCE)
            assert generation == view.generation_id and client.member_id in self.members()
            self.seen(client.member_id)
        elif error is E.REBALANCE_IN_PROGRESS:
            assert view is not None and view.state is S.COMPLETING_REBALANCE
            self.seen(client.member_id)

    @rule(index=picks, by_instance=st.booleans())
    def leave(self, index, by_instance):
        client = self.pick([c for c in self.clients if c.member_id], index)
        if client is None:
            return
        view = self.view()
        target = client.member_id
        if by_instance and client.instance:  # an admin removes whoever holds the instance id now
            holders = [] if view is None else [m.member_id for m in view.members
                                               if m.group_instance_id == client.instance]
            target = holders[0] if holders else ""
        present = target in self.members()
        errors, replies = self.co.leave(G, [("" if by_instance and client.instance else target, client.instance)],
                                        self.now)
        self.deliver(replies)
        if errors == [E.NONE]:
            assert present and target not in self.members()
            for other in self.clients:
                if other.member_id == target:
                    self.forget(other)
        else:
            assert errors[0] in (E.UNKNOWN_MEMBER, E.FENCED_INSTANCE_ID), errors

    @rule(ms=st.integers(0, 3_000) | st.integers(5_000, 60_000))
    def advance(self, ms):
        self.tick(self.now + ms)

    @rule()
    def until_next_deadline(self):
        deadline = self.co.next_deadline_ms()
        if deadline is not None:
            self.tick(max(self.now, deadline))

    def tick(self, now_ms: int) -> None:
        """Run the clock to `now_ms`: whatever was due is done, and a member Kafka would have
        expired is gone (a waiting one never expires)."""
        self.now = now_ms
        self.deliver(self.co.tick(self.now))
        deadline = self.co.next_deadline_ms()
        assert deadline is None or deadline > self.now, f"tick({self.now}) left deadline {deadline} due"
        for member_id in self.members():
            waiting = ("join", member_id) in self.waits or ("sync", member_id) in self.waits
            if not waiting:
                assert self.last_seen[member_id] + self.session[member_id] > self.now, member_id

    @rule()
    def drain(self) -> None:
        """Every wait is answered eventually: run the clock from deadline to deadline until
        nothing waits (silent clients expire; a rebalance always ends by its deadline)."""
        for _ in range(20):
            deadline = self.co.next_deadline_ms()
            if not self.waits or deadline is None:
                break
            self.tick(max(self.now, deadline))
            self.consistent()
        assert not self.waits, f"never answered: {sorted(self.waits)}"

    # -- invariants

    @invariant()
    def consistent(self) -> None:
        view = self.view()
        before, self.before = self.before, view
        if view is None:
            assert not self.waits
            return
        ids = [m.member_id for m in view.members]
        assert len(ids) == len(set(ids)), "member ids are unique"
        assert view.generation_id >= self.generation, "generations only grow"
        self.generation = view.generation_id
        if before is not None:
            self.gone |= {m.member_id for m in before.members} - set(ids)
        assert not self.gone & set(ids), "a member that left is back"
        if view.state is S.EMPTY:
            assert not ids and view.leader_id == ""
        else:
            assert ids, f"{view.state} without members"
            assert view.leader_id in ids, "the leader is a member"
        for (kind, member_id) in self.waits:
            assert member_id in ids, "a waiting member was removed without an answer"
            assert view.state is (S.PREPARING_REBALANCE if kind == "join" else S.COMPLETING_REBALANCE)
        if view.state is S.COMPLETING_REBALANCE:
            assert all(m.assignment == b"" for m in view.members)
        if view.state is S.STABLE:
            given = self.assigned[view.generation_id]
            owners: dict[int, str] = {}
            for member in view.members:
                assert member.assignment == given[member.member_id], "the leader's assignment"
                generation, _, partitions = decode(member.assignment)
                assert generation == view.generation_id
                for partition in partitions:
                    assert partition not in owners, f"partition {partition} assigned twice"
                    owners[partition] = member.member_id
            assert set(owners) == set(PARTITIONS)


GroupMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None, report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)
test_group_state_machine = GroupMachine.TestCase
