"""Dynamic broker configs and broker loggers against the reference Apache Kafka: the same
answers to the same IncrementalAlterConfigs, and the same values, sources and dynamic
synonyms in DescribeConfigs, for the broker, the cluster default and a topic.

Both brokers are shared by the whole session, so every value set here is harmless to other
tests (longer retention, larger messages) and removed again at the end.

Differences, each with its reason (the rest must match):
- the loggers are Martlet's own (Python's), not Kafka's log4j ones; each side is asked about
  one of its own;
- Kafka lists log.retention.hours as the default synonym of log.retention.ms; the dynamic
  layers are compared;
- after a node's dynamic value is deleted, Kafka 4.4 goes on describing a topic with the
  deleted value (source DYNAMIC_BROKER_CONFIG) until it restarts; Martlet shows the value the
  topic now follows (the cluster's).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fixtures.reference_pair import Both
from tests.support.kafka_admin import DESCRIBE_CONFIGS, create

pytestmark = [pytest.mark.integration, pytest.mark.java]

INCREMENTAL_ALTER_CONFIGS = 44
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC = (2, 3)  # DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
CHANGES = [("log.retention.ms", SET, "1209600000"), ("broker.id", SET, "5"), ("unknown.config.x", SET, "1"),
           ("log.retention.ms", SET, "abc"), ("message.max.bytes", SET, "2000000"), ("num.partitions", SET, "3"),
           ("auto.create.topics.enable", SET, "false"), ("log.segment.bytes", SET, "100"),
           ("log.retention.ms", SET, None), ("max.connections", SET, "abc"), ("max.connections.per.ip", SET, "-1")]
SET_HERE = ("log.retention.ms", "message.max.bytes", "unknown.config.x")


def _alter(both: Both, resource_type: int, name: str, *ops: tuple[str, int, str | None]) -> list[tuple[int, Any]]:
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": False}
    return [(int(a.responses[0].error_code), a.responses[0].error_message)
            for a in both.ask(INCREMENTAL_ALTER_CONFIGS, 1, body)]


def _describe(both: Both, resource_type: int, name: str, keys: list[str] | None) -> list[dict[str, Any]]:
    body = {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True, "include_documentation": False}
    return [{c.name: c for c in answer.results[0].configs} for answer in both.ask(DESCRIBE_CONFIGS, 4, body)]


def _shown(entry: Any) -> tuple[object, ...]:
    return (entry.value, entry.read_only, int(entry.config_source), int(entry.config_type),
            [(s.name, s.value, int(s.source)) for s in entry.synonyms if int(s.source) in DYNAMIC])


def test_dynamic_broker_configs_answer_and_show_as_kafka(both: Both) -> None:
    topic = f"dynamic-{uuid.uuid4().hex[:8]}"
    create(both, topic, 1)
    try:
        for name in ("1", ""):
            for change in CHANGES:
                ours, theirs = _alter(both, BROKER, name, change)
                assert ours == theirs, (name, change)
        ours, theirs = _describe(both, BROKER, "1", ["log.retention.ms", "message.max.bytes"])
        assert {k: _shown(v) for k, v in ours.items()} == {k: _shown(v) for k, v in theirs.items()}
        ours, theirs = _describe(both, BROKER, "", None)
        assert {k: _shown(ours[k]) for k in SET_HERE} == {k: _shown(theirs[k]) for k in SET_HERE}
        ours, theirs = _describe(both, TOPIC, topic, ["retention.ms", "max.message.bytes"])
        assert {k: _shown(v) for k, v in ours.items()} == {k: _shown(v) for k, v in theirs.items()}
        assert _alter(both, BROKER, "1", ("log.retention.ms", DELETE, None)) == [(0, None)] * 2
        ours, _ = _describe(both, TOPIC, topic, ["retention.ms"])  # Kafka 4.4 goes on showing the deleted value
        assert _shown(ours["retention.ms"]) == ("1209600000", False, 3, 5, [("log.retention.ms", "1209600000", 3)])
    finally:
        for name in ("1", ""):
            _alter(both, BROKER, name, *((key, DELETE, None) for key in SET_HERE))


def test_broker_loggers_answer_as_kafka(both: Both) -> None:
    ours, theirs = _describe(both, BROKER_LOGGER, "1", ["root"])
    assert _shown(ours["root"])[1:] == _shown(theirs["root"])[1:]  # the level may differ; the flags may not
    for name in ("7", "x"):
        body = {"resources": [{"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        answers = [(int(a.results[0].error_code), a.results[0].error_message)
                   for a in both.ask(DESCRIBE_CONFIGS, 4, body)]
        assert answers[0] == answers[1], name
    refused = [("no.such.logger", SET, "DEBUG"), ("root", SET, "LOUD"), ("root", APPEND, "DEBUG"),
               ("root", DELETE, None), ("root", SET, None)]
    for change in refused:
        ours_answer, theirs_answer = _alter(both, BROKER_LOGGER, "1", change)
        assert ours_answer == theirs_answer, change
    own = {"martlet": "martlet.gateway.server", "kafka": "kafka.server.ReplicaManager"}
    for client, logger in ((both.martlet, own["martlet"]), (both.reference, own["kafka"])):
        single = Both.__new__(Both)
        single.martlet = single.reference = client
        assert _alter(single, BROKER_LOGGER, "1", (logger, SET, "TRACE"))[0] == (0, None)
        assert _describe(single, BROKER_LOGGER, "1", [logger])[0][logger].value == "TRACE"
        assert _alter(single, BROKER_LOGGER, "1", (logger, DELETE, None))[0] == (0, None)
        root = _describe(single, BROKER_LOGGER, "1", ["root"])[0]["root"].value
        assert _describe(single, BROKER_LOGGER, "1", [logger])[0][logger].value == root
