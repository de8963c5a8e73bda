"""CreateTopics, DeleteTopics (by name and, v6, by id), CreatePartitions."""

import uuid

from .harness import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, METADATA, Broker


def create(broker: Broker, topics: list[dict], validate_only: bool = False) -> list:
    topics = [{"replication_factor": 1, "num_partitions": 1} | t for t in topics]
    return list(broker.call(CREATE_TOPICS, 7, {"topics": topics, "timeout": 1000,
                                               "validate_only": validate_only}).topics)


def test_create_answers_partitions_and_configs(broker: Broker) -> None:
    [created] = create(broker, [{"name": "t", "num_partitions": 3,
                                 "configs": [{"name": "retention.ms", "value": "1000"}]}])
    assert (created.error_code, created.num_partitions, created.replication_factor) == (0, 3, 1)
    assert created.topic_id.int != 0
    configs = {c.name: (c.value, c.config_source) for c in created.configs}
    assert configs["retention.ms"] == ("1000", 1)
    assert configs["segment.ms"][1] == 5


def test_create_default_partitions(broker: Broker) -> None:
    [created] = create(broker, [{"name": "t", "num_partitions": -1, "replication_factor": -1}])
    assert (created.error_code, created.num_partitions) == (0, 1)


def test_validate_only_creates_nothing(broker: Broker) -> None:
    [checked] = create(broker, [{"name": "t", "num_partitions": 4}], validate_only=True)
    assert (checked.error_code, checked.num_partitions) == (0, 4)
    assert broker.topic_names() == set()
    broker.create_topic("taken")
    [bad, exists, parts, config] = create(broker, [
        {"name": "bad name!"}, {"name": "taken"}, {"name": "zero", "num_partitions": 0},
        {"name": "cfg", "configs": [{"name": "no.such.config", "value": "1"}]}], validate_only=True)
    assert [r.error_code for r in (bad, exists, parts, config)] == [17, 36, 37, 40]
    assert broker.topic_names() == {"taken"}


def test_create_errors(broker: Broker) -> None:
    broker.create_topic("taken")
    results = create(broker, [
        {"name": "bad name!"}, {"name": "a" * 250}, {"name": ".."}, {"name": "taken"},
        {"name": "rf", "replication_factor": 3}, {"name": "zero", "num_partitions": 0},
        {"name": "cfg", "configs": [{"name": "no.such.config", "value": "1"}]},
        {"name": "val", "configs": [{"name": "retention.ms", "value": "soon"}]}])
    assert [(r.name, r.error_code) for r in results] == [
        ("bad name!", 17), ("a" * 250, 17), ("..", 17), ("taken", 36), ("rf", 38), ("zero", 37),
        ("cfg", 40), ("val", 40)]
    assert all(r.num_partitions == -1 and r.replication_factor == -1 for r in results)
    assert broker.topic_names() == {"taken"}


def test_same_name_twice_in_one_request(broker: Broker) -> None:
    results = create(broker, [{"name": "twice"}, {"name": "twice"}])
    assert [r.error_code for r in results] == [42, 42]
    assert broker.topic_names() == set()


def test_delete_by_name(broker: Broker) -> None:
    broker.create_topic("a")
    broker.create_topic("b")
    answer = broker.call(DELETE_TOPICS, 5, {"topic_names": ["a", "ghost"], "timeout": 1000})
    assert [(r.name, r.error_code) for r in answer.responses] == [("a", 0), ("ghost", 3)]
    assert broker.topic_names() == {"b"}


def topic_ids(broker: Broker) -> dict[str, uuid.UUID]:
    return {t.name: t.topic_id for t in broker.call(METADATA, 12, {"topics": None}).topics}


def test_delete_by_topic_id_v6(broker: Broker) -> None:
    broker.create_topic("a")
    broker.create_topic("b")
    ids = topic_ids(broker)
    answer = broker.call(DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": ids["b"]}], "timeout": 1000})
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [("b", ids["b"], 0)]
    assert broker.topic_names() == {"a"}
    by_name = broker.call(DELETE_TOPICS, 6, {"topics": [{"name": "a", "topic_id": None}], "timeout": 1000})
    assert [(r.name, r.topic_id, r.error_code) for r in by_name.responses] == [("a", ids["a"], 0)]
    assert broker.topic_names() == set()


def test_delete_unknown_topic_id_v6(broker: Broker) -> None:
    broker.create_topic("a")
    unknown = uuid.uuid4()
    answer = broker.call(DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": unknown}], "timeout": 1000})
    # Kafka 4.4.0 answers UNKNOWN_TOPIC_ID (100) here, not UNKNOWN_TOPIC_OR_PARTITION (3)
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [(None, unknown, 100)]
    assert broker.topic_names() == {"a"}


def test_create_partitions_grows_and_refuses_to_shrink(broker: Broker) -> None:
    broker.create_topic("t", 2)

    def grow(count: int, validate_only: bool = False, name: str = "t") -> int:
        answer = broker.call(CREATE_PARTITIONS, 3, {"topics": [{"name": name, "count": count, "assignments": None}],
                                                    "timeout": 1000, "validate_only": validate_only})
        return answer.results[0].error_code

    def partitions() -> int:
        return len(broker.call(METADATA, 12, {"topics": [{"name": "t"}]}).topics[0].partitions)

    assert grow(5, validate_only=True) == 0 and partitions() == 2
    assert grow(5) == 0 and partitions() == 5
    assert grow(3) == 37 and grow(5) == 37 and partitions() == 5
    assert grow(9, name="ghost") == 3
    assert broker.append("t", 4, [b"in the new partition"]) == 0
