"""`martlet topic`, `martlet group` and `martlet status` run as a user runs them (subprocesses,
the broker named by MARTLET_BOOTSTRAP and MARTLET_HTTP), against Martlet and against the
reference Apache Kafka: what they print as JSON is checked against what a confluent-kafka client
sees, and their exit codes (0 done, 1 refused, 2 usage, 3 unreachable) against the cases.

The reference gets a closed port as its HTTP address, so the Martlet-only facts (slot ranges,
checkpoint C, unpersisted bytes, memory, store) are absent there; against Martlet they are
checked in test_martlet_extras.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.fixtures.martlet import wait_until
from tests.integration.clients import unique_topic

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "martlet.cli"]
RUN_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 30.0
RECORDS_PER_PARTITION = 10
BASE_TS_MS = 1_700_000_000_000  # records of partition p, offset i, are stamped BASE_TS_MS + i * 1000


@dataclass(frozen=True)
class Endpoint:
    name: str
    bootstrap: str
    http: str  # Martlet's HTTP address; for the reference a port nobody listens on


@pytest.fixture(scope="module")
def closed_port() -> Iterator[str]:
    """A loopback port bound but not listening: connections to it are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(scope="module", params=["martlet", "reference"])
def endpoint(request: pytest.FixtureRequest, closed_port: str) -> Endpoint:
    if request.param == "martlet":
        broker = request.getfixturevalue("martlet")
        return Endpoint("martlet", broker.bootstrap, broker.http)
    return Endpoint("reference", request.getfixturevalue("reference_kafka").bootstrap, closed_port)


def cli(endpoint: Endpoint, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MARTLET_BOOTSTRAP": endpoint.bootstrap, "MARTLET_HTTP": endpoint.http}
    done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == code, (f"martlet {' '.join(args)} on {endpoint.name}: exit {done.returncode}, "
                                     f"expected {code}\n{done.stdout}\n{done.stderr}")
    return done


def cli_json(endpoint: Endpoint, *args: str) -> Any:
    return json.loads(cli(endpoint, *args, "--output", "json").stdout)


def refused(endpoint: Endpoint, *args: str, error: str) -> str:
    """Runs a command the broker refuses: exit 1 and one `martlet: ... (ERROR)` line."""
    stderr = cli(endpoint, *args, code=1).stderr.strip()
    assert stderr.startswith("martlet: ") and stderr.endswith(f"({error})") and "\n" not in stderr, stderr
    return stderr


_ADMINS: dict[str, AdminClient] = {}


@pytest.fixture(scope="module", autouse=True)
def drop_admins() -> Iterator[None]:
    """The kept clients go before the session's brokers stop (else they log their lost connections)."""
    yield
    _ADMINS.clear()


def admin(endpoint: Endpoint) -> AdminClient:
    """One client per broker, kept: a client dropped while a call is under way fails the call (_DESTROY)."""
    if endpoint.bootstrap not in _ADMINS:
        _ADMINS[endpoint.bootstrap] = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    return _ADMINS[endpoint.bootstrap]


def produce(endpoint: Endpoint, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": endpoint.bootstrap, "linger.ms": 5})
    for partition in range(partitions):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition, timestamp=BASE_TS_MS + i * 1000)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0


def topic_configs(endpoint: Endpoint, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin(endpoint).describe_configs([resource])[resource].result(CLIENT_TIMEOUT_S)
    return {name: entry.value for name, entry in entries.items()}


def partition_count(endpoint: Endpoint, topic: str) -> int | None:
    found = admin(endpoint).list_topics(timeout=CLIENT_TIMEOUT_S).topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


# -- topics ------------------------------------------------------------------------------------

def test_topic_create_list_describe(endpoint: Endpoint) -> None:
    topic = unique_topic("tools-topic")
    created = cli_json(endpoint, "topic", "create", topic, "--partitions", "3", "--config", "retention.ms=86400000")
    assert created == {"topic": topic, "created": True, "partitions": 3}
    refused(endpoint, "topic", "create", topic, error="TOPIC_ALREADY_EXISTS")
    assert cli_json(endpoint, "topic", "create", topic, "--if-not-exists")["created"] is False
    produce(endpoint, topic, 3)

    listed = {row["name"]: row for row in cli_json(endpoint, "topic", "list")["topics"]}
    assert listed[topic]["partitions"] == 3 and listed[topic]["replication_factor"] == 1
    assert not any(row["internal"] for row in listed.values())
    with_internal = {row["name"] for row in cli_json(endpoint, "topic", "list", "--internal")["topics"]}
    assert with_internal >= set(listed)
    if endpoint.name == "martlet":  # Kafka makes __consumer_offsets when a group first needs it
        assert "__consumer_offsets" in with_internal

    [described] = cli_json(endpoint, "topic", "describe", topic)["topics"]
    metadata = admin(endpoint).list_topics(topic, timeout=CLIENT_TIMEOUT_S).topics[topic]
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for row in described["partitions"]:
        seen = metadata.partitions[row["partition"]]
        assert (row["leader"], row["replicas"], row["isr"]) == (seen.leader, list(seen.replicas), list(seen.isrs))
        assert (row["log_start_offset"], row["high_watermark"]) == (0, RECORDS_PER_PARTITION)
    assert described["configs"]["retention.ms"] == "86400000"
    assert "cleanup.policy" not in described["configs"]  # defaults are not shown
    assert ("slots" in described["partitions"][0]) == (endpoint.name == "martlet")


def test_topic_alter_add_partitions_delete(endpoint: Endpoint) -> None:
    topic = unique_topic("tools-alter")
    cli(endpoint, "topic", "create", topic, "-p", "2", "-c", "retention.ms=86400000")
    cli(endpoint, "topic", "alter", topic, "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
    configs = topic_configs(endpoint, topic)
    assert (configs["retention.ms"], configs["cleanup.policy"]) == ("3600000", "compact")
    cli(endpoint, "topic", "alter", topic, "--delete-config", "cleanup.policy")
    assert topic_configs(endpoint, topic)["cleanup.policy"] == "delete"
    assert "bogus.config" in refused(endpoint, "topic", "alter", topic, "-c", "bogus.config=1", error="INVALID_CONFIG")

    assert cli_json(endpoint, "topic", "add-partitions", topic, "--total", "4") == {"topic": topic, "partitions": 4}
    assert wait_until(lambda: partition_count(endpoint, topic) == 4, CLIENT_TIMEOUT_S)
    refused(endpoint, "topic", "add-partitions", topic, "--total", "2", error="INVALID_PARTITIONS")

    assert cli_json(endpoint, "topic", "delete", topic) == {"deleted": [topic], "absent": []}
    assert wait_until(lambda: partition_count(endpoint, topic) is None, CLIENT_TIMEOUT_S)
    refused(endpoint, "topic", "delete", topic, error="UNKNOWN_TOPIC_OR_PART")
    assert cli_json(endpoint, "topic", "delete", topic, "--if-exists") == {"deleted": [], "absent": [topic]}


def test_refusals_name_the_kafka_error(endpoint: Endpoint) -> None:
    missing = unique_topic("tools-missing")
    assert refused(endpoint, "topic", "describe", missing, error="UNKNOWN_TOPIC_OR_PART") == (
        f"martlet: topic {missing} does not exist (UNKNOWN_TOPIC_OR_PART)")
    refused(endpoint, "topic", "alter", missing, "-c", "retention.ms=1", error="UNKNOWN_TOPIC_OR_PART")
    refused(endpoint, "group", "describe", unique_topic("tools-no-group"), error="GROUP_ID_NOT_FOUND")
    refused(endpoint, "group", "delete", unique_topic("tools-no-group"), error="GROUP_ID_NOT_FOUND")


def test_unreachable_and_usage_exit_codes(closed_port: str) -> None:
    """All at once (each process mostly waits): no broker is exit 3 within --timeout, bad usage exit 2."""
    nowhere = Endpoint("closed port", closed_port, closed_port)
    unreachable = [["topic", "list"], ["group", "list"], ["status"]]
    usage = [["topic", "create"], ["topic", "frobnicate"], ["topic", "create", "t", "--config", "novalue"],
             ["group", "reset-offsets", "g", "--topic", "t"],
             ["group", "reset-offsets", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"],
             ["status", "--output", "yaml"], ["completion", "fish"], ["topic", "alter", "t"]]
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        down = [pool.submit(cli, nowhere, *args, "--timeout", "1", code=3) for args in unreachable]
        wrong = [pool.submit(cli, nowhere, *args, code=2) for args in usage]
        for future in down:
            stderr = future.result().stderr.strip()
            assert stderr.startswith(f"martlet: no broker answered at {closed_port}") and "\n" not in stderr, stderr
        assert "nothing to change" in [future.result() for future in wrong][-1].stderr
    assert time.monotonic() - started < 20  # each within --timeout (1 s), plus process starts


# -- groups ------------------------------------------------------------------------------------

@dataclass
class Lagging:
    endpoint: Endpoint
    topic: str
    group: str
    committed: dict[int, int]


@pytest.fixture(scope="module")
def lagging(endpoint: Endpoint) -> Iterator[tuple[Lagging, Consumer]]:
    """A group with one live member that consumed everything and committed only some of it (the
    describe test looks at it first, then the reset test stops the member; one group join saved)."""
    topic, group = unique_topic("tools-lag"), unique_topic("tools-group")
    cli(endpoint, "topic", "create", topic, "-p", "3")
    produce(endpoint, topic, 3)
    consumer = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": group, "client.id": "lag-client",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline, seen = time.monotonic() + CLIENT_TIMEOUT_S, 0
    while seen < 3 * RECORDS_PER_PARTITION and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        seen += message is not None and message.error() is None
    assert seen == 3 * RECORDS_PER_PARTITION
    committed = {0: 4, 1: RECORDS_PER_PARTITION, 2: 0}
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    yield Lagging(endpoint, topic, group, committed), consumer
    with contextlib.suppress(RuntimeError):  # closed already by the reset test
        consumer.close()


def committed_now(endpoint: Endpoint, topic: str, group: str) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": group})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(3)], timeout=CLIENT_TIMEOUT_S)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found}


def test_group_describe_shows_members_and_lag(lagging: tuple[Lagging, Consumer]) -> None:
    state, _ = lagging
    endpoint = state.endpoint
    [group] = cli_json(endpoint, "group", "describe", state.group)["groups"]
    assert (group["group_id"], group["state"], group["protocol_type"]) == (state.group, "Stable", "consumer")
    [member] = group["members"]
    assert member["client_id"] == "lag-client"
    assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(state.topic, p) for p in range(3)]
    rows = {row["partition"]: row for row in group["offsets"]}
    for partition, offset in state.committed.items():
        assert rows[partition]["committed"] == offset and rows[partition]["high_watermark"] == RECORDS_PER_PARTITION
        assert rows[partition]["lag"] == RECORDS_PER_PARTITION - offset
    assert group["lag"] == sum(RECORDS_PER_PARTITION - offset for offset in state.committed.values())
    listed = {row["group_id"]: row for row in cli_json(endpoint, "group", "list")["groups"]}
    assert listed[state.group]["state"] == "Stable"
    if endpoint.name == "martlet":  # members and lag from Martlet's HTTP API
        assert (listed[state.group]["members"], listed[state.group]["lag"]) == (1, group["lag"])
    else:
        assert "lag" not in listed[state.group]
    text = cli(endpoint, "group", "describe", state.group).stdout
    assert f"Group {state.group}: Stable" in text and "lag-client" in text and f"total lag {group['lag']}" in text


def test_group_reset_offsets_and_delete(lagging: tuple[Lagging, Consumer]) -> None:
    state, consumer = lagging
    endpoint, topic, group = state.endpoint, state.topic, state.group
    refused(endpoint, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute",
            error="NON_EMPTY_GROUP")
    consumer.close()  # leaves the group: now Empty
    plan = cli_json(endpoint, "group", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert plan["executed"] is False
    assert [(o["partition"], o["current"], o["new"]) for o in plan["offsets"]] == [
        (p, state.committed[p], 0) for p in range(3)]
    assert committed_now(endpoint, topic, group) == state.committed  # a dry run changes nothing

    cli(endpoint, "group", "reset-offsets", group, "--topic", f"{topic}:1", "--to-offset", "7", "--execute")
    assert committed_now(endpoint, topic, group) == {**state.committed, 1: 7}
    cli(endpoint, "group", "reset-offsets", group, "--topic", topic, "--to-timestamp", str(BASE_TS_MS + 5000),
        "--execute")
    assert committed_now(endpoint, topic, group) == {0: 5, 1: 5, 2: 5}
    at = datetime.datetime.fromtimestamp((BASE_TS_MS + 3000) / 1000, datetime.UTC).isoformat()
    cli(endpoint, "group", "reset-offsets", group, "--topic", topic, "--to-datetime", at, "--execute")  # Kafka's spelling
    assert committed_now(endpoint, topic, group) == {0: 3, 1: 3, 2: 3}
    cli(endpoint, "group", "reset-offsets", group, "-t", f"{topic}:0,2", "--to-offset", "99", "--execute")
    assert committed_now(endpoint, topic, group) == {0: 10, 1: 3, 2: 10}  # clamped to the high watermark

    assert cli_json(endpoint, "group", "delete", group) == {"deleted": [group]}
    assert group not in {row["group_id"] for row in cli_json(endpoint, "group", "list")["groups"]}
    refused(endpoint, "group", "describe", group, error="GROUP_ID_NOT_FOUND")


def test_reset_offsets_of_a_new_group(lagging: tuple[Lagging, Consumer]) -> None:
    """As with Kafka's tool, a group that has never committed gets its first offsets."""
    endpoint, topic, group = lagging[0].endpoint, lagging[0].topic, unique_topic("tools-new-group")
    refused(endpoint, "group", "reset-offsets", group, "--topic", unique_topic("tools-missing"), "--to-latest",
            error="UNKNOWN_TOPIC_OR_PART")
    refused(endpoint, "group", "reset-offsets", group, "--topic", f"{topic}:3", "--to-latest",
            error="UNKNOWN_TOPIC_OR_PART")
    plan = cli_json(endpoint, "group", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute")
    assert [(o["current"], o["new"]) for o in plan["offsets"]] == [(None, RECORDS_PER_PARTITION)] * 3
    assert committed_now(endpoint, topic, group) == dict.fromkeys(range(3), RECORDS_PER_PARTITION)


# -- status ------------------------------------------------------------------------------------

def test_status(endpoint: Endpoint) -> None:
    status = cli_json(endpoint, "status")
    cluster = admin(endpoint).describe_cluster().result(CLIENT_TIMEOUT_S)
    assert status["cluster_id"] == cluster.cluster_id
    assert [(b["node_id"], b["host"], b["port"]) for b in status["brokers"]] == [(n.id, n.host, n.port) for n in cluster.nodes]
    assert [b["controller"] for b in status["brokers"]] == [n.id == cluster.controller.id for n in cluster.nodes]
    topics = admin(endpoint).list_topics(timeout=CLIENT_TIMEOUT_S).topics  # no topic is made or deleted meanwhile
    assert status["topics"] + status["internal_topics"] == len(topics)
    assert status["partitions"] + status["internal_partitions"] == sum(len(t.partitions) for t in topics.values())
    if endpoint.name == "reference":
        assert status["martlet"] is None
        return
    martlet = status["martlet"]
    assert martlet["kafka"] == endpoint.bootstrap and martlet["version"]
    assert martlet["store"]["healthy"] is True and martlet["memory"]["budget_bytes"] > 0
    text = cli(endpoint, "status").stdout
    assert "store health" in text and "healthy" in text and endpoint.bootstrap in text and endpoint.http in text


# -- Martlet's own facts -----------------------------------------------------------------------

def test_martlet_extras(martlet: Any) -> None:
    """Slot ranges, C and unpersisted bytes per partition, from Martlet's HTTP API."""
    endpoint = Endpoint("martlet", martlet.bootstrap, martlet.http)
    topic = unique_topic("tools-slots")
    cli(endpoint, "topic", "create", topic, "-p", "4")
    produce(endpoint, topic, 4)  # acks=all: persisted, so C is the high watermark
    [described] = cli_json(endpoint, "topic", "describe", topic)["topics"]
    ranges = [p["slots"] for p in described["partitions"]]
    assert ranges[0][0] == 0 and ranges[-1][1] == 65535
    assert all(after[0] == before[1] + 1 for before, after in zip(ranges, ranges[1:]))
    for row in described["partitions"]:
        assert row["checkpoint"] == row["high_watermark"] == RECORDS_PER_PARTITION
        assert row["unpersisted_bytes"] == 0
    text = cli(endpoint, "topic", "describe", topic).stdout
    assert "SLOTS" in text and f"{ranges[1][0]}-{ranges[1][1]}" in text
    listed = {row["name"]: row for row in cli_json(endpoint, "topic", "list")["topics"]}
    assert listed[topic]["records"] == 4 * RECORDS_PER_PARTITION


def test_another_clusters_http_api_is_not_shown(martlet: Any, reference_kafka: Any) -> None:
    """The HTTP address (by default port 9644 of the bootstrap host) may be another broker's:
    its facts are only shown when it names the cluster Kafka's DescribeCluster names."""
    mixed = Endpoint("reference with Martlet's HTTP", reference_kafka.bootstrap, martlet.http)
    done = cli(mixed, "status", "--output", "json")
    assert json.loads(done.stdout)["martlet"] is None
    assert f"the HTTP API at {martlet.http} is of cluster" in done.stderr
    [described] = cli_json(mixed, "topic", "describe", "__consumer_offsets")["topics"]
    assert "slots" not in described["partitions"][0]
