"""Group answers shaped as Kafka 4.4 shapes them, down to nulls and defaults
(tests/integration/test_group_answers_reference.py compares whole answers with the reference)."""

from typing import Any

from .harness import Broker

JOIN_GROUP, MEMBER_ID_REQUIRED = 11, 79


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
