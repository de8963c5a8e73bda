"""The dispatcher's counts: latency per API, and every non-zero error code of an answer."""

from kio.schema.errors import ErrorCode

from martlet.gateway.http.metrics import api_name, error_name
from martlet.gateway.http.stats import RequestStats

PRODUCE, METADATA = 0, 3


def test_latency_and_error_codes_by_api() -> None:
    stats = RequestStats()
    answer = {"throttle_time": 0, "responses": [
        {"name": "a", "partition_responses": [{"index": 0, "error_code": ErrorCode.none},
                                              {"index": 1, "error_code": ErrorCode.not_leader_or_follower}]},
        {"name": "b", "partition_responses": [{"index": 0, "error_code": ErrorCode.not_leader_or_follower}]}]}
    stats.handled(PRODUCE, 9, 0.002, answer)
    stats.handled(PRODUCE, 9, 0.004, None)  # acks=0: no answer
    stats.handled(METADATA, 12, 0.0001, {"throttle_time": 0, "brokers": [], "topics": [
        {"error_code": ErrorCode.unknown_topic_or_partition, "name": "gone", "partitions": []},
        {"error_code": ErrorCode.none, "name": "t", "partitions": [
            {"error_code": ErrorCode.leader_not_available, "partition_index": 0}]}]})
    assert stats.latency[PRODUCE].count == 2 and stats.latency[METADATA].count == 1
    assert stats.errors == {(PRODUCE, int(ErrorCode.not_leader_or_follower)): 2,
                            (METADATA, int(ErrorCode.unknown_topic_or_partition)): 1,
                            (METADATA, int(ErrorCode.leader_not_available)): 1}


def test_only_the_schemas_error_codes_are_counted() -> None:
    """A field the response schema does not call error_code, or a list it does not hold, is
    not read: Metadata has no top-level error code, and its brokers carry none."""
    stats = RequestStats()
    stats.handled(METADATA, 12, 0.0001, {"error_code": ErrorCode.unknown_server_error, "topics": [],
                                         "brokers": [{"node_id": 1, "error_code": ErrorCode.broker_not_available}],
                                         "extra": [{"error_code": ErrorCode.unknown_server_error}]})
    assert stats.errors == {}


def test_names_as_kafka_spells_them() -> None:
    assert [api_name(k) for k in (0, 1, 18, 23)] == ["Produce", "Fetch", "ApiVersions", "OffsetForLeaderEpoch"]
    assert api_name(9999) == "9999"
    assert error_name(int(ErrorCode.not_leader_or_follower)) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(-12345) == "-12345"
