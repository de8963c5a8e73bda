"""Group answers shaped as Kafka 4.4 shapes them, down to nulls and defaults
(tests/integration/test_group_answers_reference.py compares whole answers with the reference)."""

import uuid
from typing import Any

from .harness import Broker

JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 11, 68, 69
MEMBER_ID_REQUIRED, GROUP_ID_NOT_FOUND = 79, 69


def _join(broker: Broker, version: int) -> Any:
    return broker.call(JOIN_GROUP, version, {
        "group_id": "g", "session_timeout": 30_000, "rebalance_timeout": 10_000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        "reason": None})


def test_a_join_answered_with_an_error_names_no_protocol_from_v7(broker: Broker) -> None:
    """Kafka answers a null protocol name where the version allows one, "" before."""
    for version, protocol_name in ((5, ""), (6, ""), (7, None), (9, None)):
        answer = _join(broker, version)
        assert answer.error_code == MEMBER_ID_REQUIRED and answer.member_id, version
        assert answer.protocol_name == protocol_name, version


def test_consumer_group_describe_of_an_unknown_group_fills_in_only_the_error(broker: Broker) -> None:
    answer = broker.call(CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["nobody"], "include_authorized_operations": False})
    [group] = answer.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        GROUP_ID_NOT_FOUND, "", 0, 0, "")


def test_a_member_without_a_regex_is_described_with_an_empty_one(broker: Broker) -> None:
    broker.create_topic("t", 2)
    joined = broker.call(CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "g", "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 10_000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})
    assert joined.error_code == 0
    answer = broker.call(CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"], "include_authorized_operations": False})
    [member] = answer.groups[0].members
    assert member.subscribed_topic_regex == ""
