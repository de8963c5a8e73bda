"""ApiVersions against the reference Apache Kafka, and the newest versions of the APIs that
name topics by id, asked of both brokers the same way.

Every API whose advertised range differs from the reference's is listed in DIFFERENCES with
its reason (compat/FINDINGS.md has the same list): the test fails when a difference appears
or disappears without the list following.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from martlet.protocol.codec import build, request_type
from tests.fixtures.martlet import wait_until
from tests.fixtures.reference_pair import Both
from tests.integration.raw_client import RawClient, record_batch
from tests.support.fetching import fetch_body
from tests.support.kafka_admin import create

pytestmark = [pytest.mark.integration, pytest.mark.java]

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
COORDINATOR_LOADING, NOT_COORDINATOR = 14, 16
DESCRIBE_GROUPS, DESCRIBE_CLUSTER, CONSUMER_GROUP_HEARTBEAT = 15, 60, 68
FIND_COORDINATOR, API_VERSIONS, DESCRIBE_TOPIC_PARTITIONS = 10, 18, 75

SECURITY = "ACLs, quota changes and delegation tokens are not served (yet: issue 40)"
KRAFT = "describes or changes a KRaft controller quorum, which Martlet does not have"
SHARE = "share groups (KIP-932) are not served"
STREAMS = "streams groups (KIP-1071) are not served"
# api key -> (Martlet's range or None when not served, why it differs from Kafka's)
DIFFERENCES: dict[int, tuple[tuple[int, int] | None, str]] = {
    0: ((3, 13), "Produce v0-v2 carry message format v0/v1, which Martlet does not store"),
    18: ((0, 4), "ApiVersions v5: not in kio, the protocol library"),
    42: ((0, 2), "DeleteGroups v3: not in kio, the protocol library"),
    28: ((0, 5), "TxnOffsetCommit v6: not in kio, the protocol library"),
    29: (None, SECURITY), 30: (None, SECURITY), 31: (None, SECURITY),
    38: (None, SECURITY), 39: (None, SECURITY), 40: (None, SECURITY),
    41: (None, SECURITY), 49: (None, SECURITY),
    34: (None, "AlterReplicaLogDirs: a partition's data has one place, the store"),
    55: (None, KRAFT), 57: (None, KRAFT), 64: (None, KRAFT), 80: (None, KRAFT), 81: (None, KRAFT),
    74: (None, "ListConfigResources (client metrics resources): client telemetry is not collected"),
    76: (None, SHARE), 77: (None, SHARE), 78: (None, SHARE), 79: (None, SHARE), 83: (None, SHARE),
    84: (None, SHARE), 85: (None, SHARE), 86: (None, SHARE), 87: (None, SHARE), 90: (None, SHARE),
    91: (None, SHARE), 92: (None, SHARE), 93: (None, SHARE), 94: (None, SHARE),
    88: (None, STREAMS), 89: (None, STREAMS),
}


def _ask(client: RawClient, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return client.request(build(request_type(api_key, version), body))


def _ranges(answer: Any) -> dict[int, tuple[int, int]]:
    return {int(k.api_key): (k.min_version, k.max_version) for k in answer.api_keys}


def test_api_versions_differ_from_kafkas_only_where_listed(both: Both) -> None:
    body = {"client_software_name": "compat", "client_software_version": "1"}
    ours, theirs = (_ranges(answer) for answer in both.ask(API_VERSIONS, 3, body))
    differing = {key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)}
    assert differing == set(DIFFERENCES), sorted(differing ^ set(DIFFERENCES))
    for key, (served, _why) in DIFFERENCES.items():
        assert ours.get(key) == served, key


def test_feature_levels_name_kip_848_groups_and_no_kip_890_transactions(both: Both) -> None:
    ours, theirs = both.ask(API_VERSIONS, 3, {"client_software_name": "compat", "client_software_version": "1"})
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in ours.finalized_features}
    assert finalized == {"group.version": (1, 1)}
    assert {f.name: f.max_version for f in ours.supported_features} == {"group.version": 1, "transaction.version": 0}
    assert {f.name: f.max_version_level for f in theirs.finalized_features}["group.version"] == 1


def _topic_id(both: Both, name: str) -> tuple[uuid.UUID, uuid.UUID]:
    ours, theirs = both.ask(METADATA, 13, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
    assert ours.error_code == theirs.error_code == 0
    return ours.topics[0].topic_id, theirs.topics[0].topic_id


def test_produce_fetch_and_offsets_by_topic_id(both: Both) -> None:
    name = f"by-id-{uuid.uuid4().hex[:8]}"
    create(both, name, 1)
    ids = _topic_id(both, name)
    unknown = uuid.uuid4()
    for client, topic_id in zip((both.martlet, both.reference), ids, strict=True):
        produced = _ask(client, PRODUCE, 13, {
            "transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [
                {"topic_id": topic_id, "partition_data": [{"index": 0, "records": record_batch([b"a", b"b"])}]},
                {"topic_id": unknown, "partition_data": [{"index": 0, "records": record_batch([b"c"])}]}]})
        assert [(t.topic_id, int(t.partition_responses[0].error_code)) for t in produced.responses] == [
            (topic_id, 0), (unknown, 100)]
        body = fetch_body([("", 0, 0, 1 << 20)])
        body["topics"] = [{"topic_id": tid, "partitions": body["topics"][0]["partitions"]} for tid in (topic_id, unknown)]
        fetched = _ask(client, FETCH, 17, body)
        assert [t.topic_id for t in fetched.responses] == [topic_id, unknown]
        known, missing = (t.partitions[0] for t in fetched.responses)
        assert (int(known.error_code), known.high_watermark, len(known.records) > 0) == (0, 2, True)
        assert (int(missing.error_code), missing.high_watermark, missing.records) == (100, -1, b"")
        group = f"g-{uuid.uuid4().hex[:6]}"
        assert wait_until(lambda g=group, c=client: _coordinated(c, g), 30)  # Kafka makes __consumer_offsets now
        commit = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                  "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                   "committed_leader_epoch": -1,
                                                                   "committed_metadata": "m"}]}]}
        answers: list[Any] = []
        # the reference loads the new __consumer_offsets a moment after FindCoordinator made it
        assert wait_until(lambda c=client, b=commit, a=answers: _committed(a, _ask(c, OFFSET_COMMIT, 10, b)), 30)
        assert [(t.topic_id, int(t.partitions[0].error_code)) for t in answers[-1].topics] == [(topic_id, 0)]
        read = _ask(client, OFFSET_FETCH, 10, {"groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1,
             "topics": [{"topic_id": topic_id, "partition_indexes": [0]}]}], "require_stable": False})
        partition = read.groups[0].topics[0].partitions[0]
        assert (read.groups[0].topics[0].topic_id, partition.committed_offset, partition.metadata) == (topic_id, 1, "m")


def _committed(answers: list[Any], answer: Any) -> bool:
    answers.append(answer)
    return int(answer.topics[0].partitions[0].error_code) not in (COORDINATOR_LOADING, NOT_COORDINATOR)


def _coordinated(client: RawClient, group: str) -> bool:
    answer = _ask(client, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
    return answer.coordinators[0].error_code == 0


def test_list_offsets_special_timestamps_by_version(both: Both) -> None:
    name = f"special-{uuid.uuid4().hex[:8]}"
    create(both, name, 1)
    for version in (7, 8, 9, 10, 11):
        for timestamp in (-1, -2, -3, -4, -5, -6, -7):
            body = {"replica_id": -1, "isolation_level": 0, "timeout": 30_000, "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                               "timestamp": timestamp}]}]}
            ours, theirs = (a.topics[0].partitions[0] for a in both.ask(LIST_OFFSETS, version, body))
            shown = [(int(p.error_code), p.timestamp, p.offset, p.leader_epoch) for p in (ours, theirs)]
            assert shown[0] == shown[1], (version, timestamp, shown)


def test_describe_topic_partitions_pages_as_kafka_does(both: Both) -> None:
    prefix = uuid.uuid4().hex[:8]
    first, second = f"dtp-{prefix}-a", f"dtp-{prefix}-b"
    create(both, first, 3)
    create(both, second, 2)
    asks = [
        {"topics": [{"name": second}, {"name": f"dtp-{prefix}-none"}, {"name": first}], "response_partition_limit": 2},
        {"topics": [{"name": first}, {"name": second}], "response_partition_limit": 3},
        {"topics": [{"name": first}, {"name": second}], "response_partition_limit": 3,
         "cursor": {"topic_name": first, "partition_index": 2}},
        {"topics": [{"name": f"dtp-{prefix}-none"}], "response_partition_limit": 10},
        {"topics": [{"name": second}], "response_partition_limit": 3,
         "cursor": {"topic_name": first, "partition_index": 1}},
        {"topics": [{"name": first}], "response_partition_limit": 0},
    ]
    for body in asks:
        ours, theirs = both.ask(DESCRIBE_TOPIC_PARTITIONS, 0, {"cursor": None} | body)
        assert _page(ours) == _page(theirs), body


def _page(answer: Any) -> tuple[object, ...]:
    topics = [(int(t.error_code), t.name, t.topic_id is not None and t.topic_id.int != 0, t.is_internal,
               t.topic_authorized_operations,
               [(int(p.error_code), p.partition_index, p.leader_epoch, len(p.replica_nodes), len(p.isr_nodes),
                 p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) for p in t.partitions])
              for t in answer.topics]
    cursor = answer.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


def test_newest_group_and_cluster_versions_answer_as_kafka(both: Both) -> None:
    name = f"groups-{uuid.uuid4().hex[:8]}"
    create(both, name, 1)
    classic, consumer = f"classic-{name}", f"consumer-{name}"
    for client in (both.martlet, both.reference):
        assert wait_until(lambda c=client: _coordinated(c, consumer), 30)
        join = {"group_id": consumer, "member_id": uuid.uuid4().hex, "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout": 30_000, "subscribed_topic_names": [name],
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
        assert wait_until(lambda c=client, b=join: _ask(c, CONSUMER_GROUP_HEARTBEAT, 1, b).error_code == 0, 30)
    for version in (5, 6):
        ours, theirs = both.ask(DESCRIBE_GROUPS, version, {"groups": [classic, consumer],
                                                            "include_authorized_operations": False})
        shown = [[(int(g.error_code), getattr(g, "error_message", None), g.group_state) for g in answer.groups]
                 for answer in (ours, theirs)]
        assert shown[0] == shown[1], version
    for key_type in (0, 2):
        ours, theirs = both.ask(FIND_COORDINATOR, 6, {"key_type": key_type, "coordinator_keys": [classic]})
        assert int(ours.coordinators[0].error_code) == int(theirs.coordinators[0].error_code), key_type
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True}
    ours, theirs = both.ask(DESCRIBE_CLUSTER, 2, body)
    assert [(b.broker_id, b.is_fenced) for b in ours.brokers] == [(b.broker_id, b.is_fenced) for b in theirs.brokers]
