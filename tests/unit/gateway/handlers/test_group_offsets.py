"""OffsetCommit and OffsetFetch over the versions served: by name up to v9, by topic id from
v10, the single-group layout of v1-v7 and the batched one of v8+."""

import uuid

from .harness import METADATA, Broker

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
UNKNOWN_TOPIC_ID = 100


def _topic_id(broker: Broker, name: str) -> uuid.UUID:
    answer = broker.call(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    return answer.topics[0].topic_id


def _commit(broker: Broker, version: int, topic: dict[str, object], offset: int) -> list[tuple[object, int]]:
    body = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [topic | {"partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                 "committed_metadata": "m"}]}]}
    answer = broker.call(OFFSET_COMMIT, version, body)
    return [(getattr(t, "topic_id", None) or t.name, int(t.partitions[0].error_code)) for t in answer.topics]


def test_commit_by_name_and_by_id_fetch_in_every_layout(broker: Broker) -> None:
    broker.create_topic("t")
    topic_id = _topic_id(broker, "t")
    assert _commit(broker, 8, {"name": "t"}, 3) == [("t", 0)]
    single = broker.call(OFFSET_FETCH, 7, {"group_id": "g", "topics": None, "require_stable": False})
    assert [(t.name, t.partitions[0].committed_offset) for t in single.topics] == [("t", 3)]
    assert _commit(broker, 10, {"topic_id": topic_id}, 5) == [(topic_id, 0)]
    for version, topics in ((8, [{"name": "t", "partition_indexes": [0]}]), (9, None),
                            (10, [{"topic_id": topic_id, "partition_indexes": [0]}]), (10, None)):
        answer = broker.call(OFFSET_FETCH, version, {"groups": [
            {"group_id": "g", "member_id": None, "member_epoch": -1, "topics": topics}], "require_stable": False})
        shown = [(getattr(t, "topic_id", None) or t.name, t.partitions[0].committed_offset, t.partitions[0].metadata)
                 for t in answer.groups[0].topics]
        assert shown == [(topic_id if version >= 10 else "t", 5, "m")], version


def test_an_unknown_topic_id_is_unknown_topic_id(broker: Broker) -> None:
    ghost = uuid.uuid4()
    assert _commit(broker, 10, {"topic_id": ghost}, 1) == [(ghost, UNKNOWN_TOPIC_ID)]
    answer = broker.call(OFFSET_FETCH, 10, {"groups": [
        {"group_id": "g", "member_id": None, "member_epoch": -1,
         "topics": [{"topic_id": ghost, "partition_indexes": [0]}]}], "require_stable": False})
    assert [(t.topic_id, int(t.partitions[0].error_code)) for t in answer.groups[0].topics] == [(ghost, UNKNOWN_TOPIC_ID)]
