"""Whole group answers compared with the reference Apache Kafka: every field, not only error codes.

test_group_errors.py compares the error codes of group APIs given bad input; this module
compares every field of their answers in a whole life of a group, at the versions real
clients send today (kafka-clients 4.x and librdkafka 2.x, /work/shared/reference/kafka-clients.md):

- classic: JoinGroup (MEMBER_ID_REQUIRED, then the join; a second member makes the leader
  rejoin), SyncGroup (leader with the assignments, follower), Heartbeat, OffsetCommit (good,
  unknown topic or partition, bad generation), OffsetFetch (all topics, named), ListGroups
  (states and types filters), DescribeGroups of the Stable group, LeaveGroup with a members
  list (known and unknown), OffsetDelete, DeleteGroups (non-empty, empty, unknown);
- KIP-848: ConsumerGroupHeartbeat (join at epoch 0, heartbeat, leave at epoch -1) and
  ConsumerGroupDescribe (known and unknown group).

Member ids are each broker's own, so a flow runs separately on each broker (its own
connections, threading that broker's member ids and topic ids through) and records each
answer under a label. The answers are reduced with tests/support/answers.py's shape (ids, ports,
throttle times and messages to null-or-not), then each member id is replaced by its place
in the flow ("<member 1>" is the first id handed out), which keeps "the leader is this
member" comparable where a bare "<set>" would not. Group and topic names are the same on
both brokers.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from martlet.protocol.codec import build, request_type
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.raw_client import RawClient, serving
from tests.support.answers import ORDER_FREE, differences, order, shape
from tests.support.group_requests import GROUP_CONFIG, assignment, coordinator_ready, subscription

pytestmark = [pytest.mark.integration, pytest.mark.java]

OFFSET_COMMIT, OFFSET_FETCH, METADATA, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 3, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 19, 42, 47
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
SESSION_MS, REBALANCE_MS = 30_000, 10_000
CLIENT_TIMEOUT_S = 15.0  # a JoinGroup that waits for the other member is answered well before
READY_TIMEOUT_S = 60.0
MEMBER_ID_REQUIRED = 79
UNKNOWN_TOPIC_ID = uuid.UUID(int=1 << 64)  # no topic on either broker has this id


@dataclass(frozen=True)
class Versions:
    """The versions one client sends, each its newest within Kafka 4.4's range; LeaveGroup is
    the members-list form (v3+) admin tools send to remove members."""

    name: str
    join: int
    sync: int
    heartbeat: int
    leave: int
    commit: int
    fetch: int
    describe: int
    consumer_describe: int


JAVA = Versions("kafka-clients 4.x", join=9, sync=5, heartbeat=4, leave=5, commit=10, fetch=10, describe=6,
                consumer_describe=1)
LIBRDKAFKA = Versions("librdkafka 2.x", join=5, sync=3, heartbeat=3, leave=3, commit=9, fetch=9, describe=5,
                      consumer_describe=0)


class Flow:
    """One flow on one broker: its connections, and each answer it got by label."""

    def __init__(self, bootstrap: str, prefix: str, known_topics: tuple[str, ...]) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        with RawClient(bootstrap, CLIENT_TIMEOUT_S) as client:
            answer = client.request(build(request_type(METADATA, 12), {"topics": [{"name": n} for n in known_topics]}))
        self.topic_ids = {t.name: t.topic_id for t in answer.topics}
        self.topic_names = {topic_id: f"<id of {name}>" for name, topic_id in self.topic_ids.items()}
        self.seen: dict[str, Any] = {}
        self.members: dict[str, str] = {}  # a member id -> "<member N>", in the order handed out
        self._clients: list[RawClient] = []

    def client(self) -> RawClient:
        client = RawClient(self.bootstrap, CLIENT_TIMEOUT_S, client_id="group-answers")
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def member(self, member_id: str) -> str:
        self.members.setdefault(member_id, f"<member {len(self.members) + 1}>")
        return member_id

    def ask(self, label: str, client: RawClient, api_key: int, version: int, body: dict[str, Any]) -> Any:
        answer = client.request(build(request_type(api_key, version), body))
        return self.note(label, answer)

    def send(self, client: RawClient, api_key: int, version: int, body: dict[str, Any]) -> tuple[int, int, int]:
        """A request whose answer waits for another member's; `receive` reads it later."""
        return api_key, version, client.send(build(request_type(api_key, version), body))

    def receive(self, label: str, client: RawClient, sent: tuple[int, int, int]) -> Any:
        return self.note(label, client.receive(*sent))

    def note(self, label: str, answer: Any) -> Any:
        assert label not in self.seen, label
        self.seen[label] = self._shape(answer)
        return answer

    def _shape(self, value: Any, name: str = "") -> Any:
        """tests/support/answers.py's shape, but this broker's id of a known topic reads as the
        topic's name (the ids differ between the brokers; the topics they name must not)."""
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self._shape(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
        if isinstance(value, tuple | list):
            items = [self._shape(item) for item in value]
            by_id = all(isinstance(item, dict) and "topic_id" in item and "name" not in item for item in items)
            if by_id:  # OffsetCommit and OffsetFetch from v10, KIP-848 assignments
                return sorted(items, key=lambda item: str(item["topic_id"]))
            return sorted(items, key=order) if name in ORDER_FREE else items
        if name == "topic_id" and value in self.topic_names:
            return self.topic_names[value]
        return shape(value, name)

    def answers(self) -> dict[str, Any]:
        """Every answer with member ids in their places, members lists in member order, and
        ListGroups narrowed to this flow's groups (the reference broker serves other tests too)."""
        return {label: self._generic(value) for label, value in self.seen.items()}

    def _generic(self, value: Any, name: str = "") -> Any:
        if isinstance(value, dict):
            return {key: self._generic(item, key) for key, item in value.items()}
        if isinstance(value, list):
            items = [self._generic(item) for item in value]
            if name == "members":  # Kafka lists members as its hash map holds them
                items.sort(key=lambda m: str(m.get("member_id")) if isinstance(m, dict) else "")
            if name == "groups" and all("group_state" in g and "members" not in g for g in items):  # ListGroups
                items = [g for g in items if str(g["group_id"]).startswith(self.prefix)]
            if name in ("groups", "results"):  # looked up by group id; Kafka's DeleteGroups order varies
                items.sort(key=lambda g: str(g["group_id"]))
            return items
        if name in EPOCHS and isinstance(value, int) and value > 0:
            return "<epoch>"  # see EPOCHS
        return self.members.get(value, value) if isinstance(value, str) else value


def join_body(group: str, member_id: str, topic: str) -> dict[str, Any]:
    return {"group_id": group, "session_timeout": SESSION_MS, "rebalance_timeout": REBALANCE_MS,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic)}], "reason": None}


def sync_body(group: str, generation: int, member_id: str, assignments: list[tuple[str, bytes]]) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]}


def heartbeat_body(group: str, generation: int, member_id: str) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None}


def commit_body(flow: Flow, versions: Versions, group: str, generation: int, member_id: str,
                offsets: list[tuple[str, int, int]]) -> dict[str, Any]:
    """Topics by name, or by id from v10 (a topic the broker lacks gets UNKNOWN_TOPIC_ID)."""
    topics = []
    for topic, partition, offset in offsets:
        named = {"name": topic} if versions.commit < 10 else {"topic_id": _id_of(flow, topic)}
        topics.append(named | {"partitions": [{"partition_index": partition, "committed_offset": offset,
                                               "committed_leader_epoch": -1, "committed_metadata": f"m{offset}"}]})
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
            "group_instance_id": None, "topics": topics}


def fetch_body(flow: Flow, versions: Versions, group: str, topics: dict[str, list[int]] | None) -> dict[str, Any]:
    wanted = None
    if topics is not None:
        wanted = [({"name": t} if versions.fetch < 10 else {"topic_id": _id_of(flow, t)}) | {"partition_indexes": p}
                  for t, p in topics.items()]
    return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": wanted}],
            "require_stable": True}  # the Java classic consumer always asks for stable offsets


def _id_of(flow: Flow, topic: str) -> uuid.UUID:
    return flow.topic_ids.get(topic, UNKNOWN_TOPIC_ID)


def leave_body(group: str, member_ids: list[str]) -> dict[str, Any]:
    return {"group_id": group, "members": [{"member_id": m, "group_instance_id": None, "reason": None}
                                           for m in member_ids]}


def list_body(states: list[str], types: list[str]) -> dict[str, Any]:
    return {"states_filter": states, "types_filter": types}


def describe_body(groups: list[str]) -> dict[str, Any]:
    return {"groups": groups, "include_authorized_operations": False}


# -- the flows


def classic_flow(flow: Flow, versions: Versions, topic: str, other: str) -> None:
    """Two members join and sync, commit and fetch, are listed and described, leave; then the
    group's offsets and the group are deleted."""
    group, v = f"{flow.prefix}-classic", versions
    leader, follower, admin = flow.client(), flow.client(), flow.client()
    first = flow.ask("JoinGroup, no member id", leader, JOIN_GROUP, v.join, join_body(group, "", topic))
    assert first.error_code == MEMBER_ID_REQUIRED, first
    leader_id = flow.member(first.member_id)
    joined = flow.ask("JoinGroup, the leader", leader, JOIN_GROUP, v.join, join_body(group, leader_id, topic))
    flow.ask("SyncGroup, the leader alone", leader, SYNC_GROUP, v.sync, sync_body(
        group, joined.generation_id, leader_id, [(leader_id, assignment(topic, [0, 1]))]))
    flow.ask("Heartbeat, generation 1", leader, HEARTBEAT, v.heartbeat,
             heartbeat_body(group, joined.generation_id, leader_id))
    second = flow.ask("JoinGroup, a second member, no member id", follower, JOIN_GROUP, v.join,
                      join_body(group, "", topic))
    follower_id = flow.member(second.member_id)
    waiting = flow.send(follower, JOIN_GROUP, v.join, join_body(group, follower_id, topic))
    assert wait_until(lambda: _rebalancing(flow, admin, group), 10.0)
    flow.ask("Heartbeat during the rebalance", leader, HEARTBEAT, v.heartbeat,
             heartbeat_body(group, joined.generation_id, leader_id))
    rejoined = flow.ask("JoinGroup, the leader rejoins", leader, JOIN_GROUP, v.join, join_body(group, leader_id, topic))
    follower_joined = flow.receive("JoinGroup, the follower", follower, waiting)
    generation = rejoined.generation_id
    assert follower_joined.generation_id == generation
    waiting = flow.send(follower, SYNC_GROUP, v.sync, sync_body(group, generation, follower_id, []))
    flow.ask("SyncGroup, the leader with assignments", leader, SYNC_GROUP, v.sync, sync_body(
        group, generation, leader_id, [(leader_id, assignment(topic, [0])), (follower_id, assignment(topic, [1]))]))
    flow.receive("SyncGroup, the follower", follower, waiting)
    flow.ask("Heartbeat, the follower", follower, HEARTBEAT, v.heartbeat, heartbeat_body(group, generation, follower_id))

    flow.ask("OffsetCommit", leader, OFFSET_COMMIT, v.commit,
             commit_body(flow, v, group, generation, leader_id, [(topic, 0, 5), (other, 0, 3)]))
    flow.ask("OffsetCommit, unknown topic and partition", leader, OFFSET_COMMIT, v.commit,
             commit_body(flow, v, group, generation, leader_id, [(f"{topic}-none", 0, 1), (topic, 7, 1)]))
    flow.ask("OffsetCommit, old generation", leader, OFFSET_COMMIT, v.commit,
             commit_body(flow, v, group, generation - 1, leader_id, [(topic, 1, 9)]))
    flow.ask("OffsetFetch, all topics", admin, OFFSET_FETCH, v.fetch, fetch_body(flow, v, group, None))
    flow.ask("OffsetFetch, named", admin, OFFSET_FETCH, v.fetch, fetch_body(flow, v, group, {topic: [0, 1, 7]}))

    flow.ask("ListGroups v4, Stable", admin, LIST_GROUPS, 4, {"states_filter": ["Stable"]})
    flow.ask("ListGroups v5, classic", admin, LIST_GROUPS, 5, list_body([], ["classic"]))
    flow.ask("DescribeGroups, Stable", admin, DESCRIBE_GROUPS, v.describe, describe_body([group]))
    flow.ask("DeleteGroups, non-empty", admin, DELETE_GROUPS, 2, {"groups_names": [group]})
    flow.ask("OffsetDelete, subscribed and not", admin, OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]}, {"name": other, "partitions": [{"partition_index": 0}]}]})

    flow.ask("LeaveGroup, the follower and an unknown member", admin, LEAVE_GROUP, v.leave,
             leave_body(group, [follower_id, "nobody"]))
    flow.ask("Heartbeat, the leader after the follower left", leader, HEARTBEAT, v.heartbeat,
             heartbeat_body(group, generation, leader_id))
    flow.ask("LeaveGroup, the leader", admin, LEAVE_GROUP, v.leave, leave_body(group, [leader_id]))
    flow.ask("DescribeGroups, Empty", admin, DESCRIBE_GROUPS, v.describe, describe_body([group]))
    flow.ask("ListGroups v5, Empty", admin, LIST_GROUPS, 5, list_body(["Empty"], []))
    flow.ask("OffsetDelete, empty group", admin, OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]})
    flow.ask("OffsetFetch, after OffsetDelete", admin, OFFSET_FETCH, v.fetch, fetch_body(flow, v, group, None))
    flow.ask("DeleteGroups, empty and unknown", admin, DELETE_GROUPS, 2, {"groups_names": [group, f"{group}-none"]})


def _rebalancing(flow: Flow, admin: RawClient, group: str) -> bool:
    """The second member's join has reached the coordinator (bounded by the caller)."""
    answer = admin.request(build(request_type(DESCRIBE_GROUPS, 5), describe_body([group])))
    return answer.groups[0].group_state == "PreparingRebalance"


def consumer_flow(flow: Flow, versions: Versions, topic: str) -> None:
    """A KIP-848 member joins at epoch 0, confirms its assignment, is described and leaves."""
    group, client = f"{flow.prefix}-consumer", flow.client()
    member_id = flow.member(str(uuid.uuid4()))  # the client names itself from v1
    body = {"group_id": group, "member_id": member_id, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": REBALANCE_MS, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    joined = flow.ask("ConsumerGroupHeartbeat, join", client, CONSUMER_GROUP_HEARTBEAT, 1, body)
    owned = [] if joined.assignment is None else [
        {"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in joined.assignment.topic_partitions]
    again = body | {"member_epoch": joined.member_epoch, "rebalance_timeout": -1, "subscribed_topic_names": None,
                    "topic_partitions": owned}
    flow.ask("ConsumerGroupHeartbeat, heartbeat", client, CONSUMER_GROUP_HEARTBEAT, 1, again)
    flow.ask("ConsumerGroupDescribe", client, CONSUMER_GROUP_DESCRIBE, versions.consumer_describe,
             {"group_ids": [group, f"{group}-none"], "include_authorized_operations": False})
    flow.ask("ListGroups v5, consumer", client, LIST_GROUPS, 5, list_body([], ["consumer"]))
    flow.ask("ConsumerGroupHeartbeat, leave", client, CONSUMER_GROUP_HEARTBEAT, 1,
             body | {"member_epoch": -1, "rebalance_timeout": -1, "subscribed_topic_names": None,
                     "topic_partitions": None})
    flow.ask("ConsumerGroupDescribe, after the leave", client, CONSUMER_GROUP_DESCRIBE, versions.consumer_describe,
             {"group_ids": [group], "include_authorized_operations": False})
    flow.ask("DeleteGroups, the empty consumer group", client, DELETE_GROUPS, 2, {"groups_names": [group]})


# -- brokers


@pytest.fixture(scope="module")
def martlet_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MartletProcess]:
    """A broker of its own whose first rebalance is not delayed, as the reference fixture's
    (group.initial.rebalance.delay.ms=0)."""
    folder: Path = tmp_path_factory.mktemp("martlet-group-answers")
    config = folder / "martlet.toml"
    config.write_bytes(GROUP_CONFIG)
    process = MartletProcess(folder / "data", ["--config", str(config)])
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def topics(martlet_groups: MartletProcess, reference_kafka: Any) -> tuple[str, str]:
    """The same two topics on both brokers (two partitions and one), with a coordinator that serves."""
    suffix = uuid.uuid4().hex[:8]
    names = {f"ga-topic-{suffix}": 2, f"ga-other-{suffix}": 1}
    for bootstrap in (martlet_groups.bootstrap, reference_kafka.bootstrap):
        with RawClient(bootstrap, CLIENT_TIMEOUT_S) as client:
            body = {"topics": [{"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [],
                                "configs": []} for name, count in names.items()], "timeout": 30_000}
            answer = client.request(build(request_type(CREATE_TOPICS, 7), body))
            assert all(t.error_code == 0 for t in answer.topics), answer
            assert wait_until(lambda: _ready(client, names), READY_TIMEOUT_S), bootstrap
    topic, other = names
    return topic, other


def _ready(client: RawClient, names: dict[str, int]) -> bool:
    """Every partition led, and a group coordinator that serves (Kafka makes and loads
    __consumer_offsets on the first FindCoordinator)."""
    return serving(client, names) and coordinator_ready(client)


def run(bootstrap: str, prefix: str, known: tuple[str, ...], flow_of: Callable[[Flow], None]) -> dict[str, Any]:
    flow = Flow(bootstrap, prefix, known)
    try:
        flow_of(flow)
    finally:
        flow.close()
    return flow.answers()


# Known differences. KIP-848 epochs: Kafka 4.4 counts its own steps (a group's first member
# that subscribes to topics takes its group to epoch 2, and the target assignment is computed
# at most once per group.consumer.assignment.interval.ms, 1 s, so the assignment epoch depends
# on timing); Martlet bumps the group epoch once per change and assigns at once. Clients only
# send back the epoch they were given, so a positive epoch reads "<epoch>" (0 and -1 stay).
# docs/api-versions.md lists this.
EPOCHS = frozenset({"member_epoch", "group_epoch", "assignment_epoch"})


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    return [f"{label} {found}" for label in dict.fromkeys([*theirs, *ours])
            for found in differences(ours.get(label), theirs.get(label))]


@pytest.mark.parametrize("versions", [JAVA, LIBRDKAFKA], ids=lambda v: v.name.split()[0])
def test_classic_group_answers(martlet_groups: MartletProcess, reference_kafka: Any, topics: tuple[str, str],
                               versions: Versions) -> None:
    topic, other = topics
    prefix = f"ga-{uuid.uuid4().hex[:8]}"
    answers = [run(bootstrap, prefix, topics, lambda flow: classic_flow(flow, versions, topic, other))
               for bootstrap in (martlet_groups.bootstrap, reference_kafka.bootstrap)]
    problems = compare(*answers)
    assert not problems, f"{versions.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("versions", [JAVA, LIBRDKAFKA], ids=lambda v: v.name.split()[0])
def test_consumer_group_answers(martlet_groups: MartletProcess, reference_kafka: Any, topics: tuple[str, str],
                                versions: Versions) -> None:
    topic, _ = topics
    prefix = f"ga-{uuid.uuid4().hex[:8]}"
    answers = [run(bootstrap, prefix, topics, lambda flow: consumer_flow(flow, versions, topic))
               for bootstrap in (martlet_groups.bootstrap, reference_kafka.bootstrap)]
    problems = compare(*answers)
    assert not problems, f"{versions.name}:\n" + "\n".join(problems)
