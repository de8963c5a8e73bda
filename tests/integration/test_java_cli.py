"""The Java client, through Apache Kafka's own CLI tools, against Martlet."""

from __future__ import annotations

import json
import subprocess

import pytest

from martlet.compat.reference.kafka import tool_command
from tests.integration.clients import confluent_consume, confluent_consumer, confluent_high_watermarks, unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.java]

TOOL_TIMEOUT_S = 120.0


def run_ok(kafka_tool, tool, args, input=None):
    result = kafka_tool(tool, args, TOOL_TIMEOUT_S, input=input)
    assert result.returncode == 0, f"{tool} failed:\n{result.stdout.decode()}\n{result.stderr.decode()}"
    return result.stdout.decode()


def create(kafka_tool, bootstrap, topic, partitions):
    out = run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--create", "--topic", topic,
                                        "--partitions", str(partitions), "--replication-factor", "1"])
    assert f"Created topic {topic}." in out


def test_topics_tool_creates_describes_alters_and_deletes(martlet, kafka_tool):
    topic = unique_topic("cli-topics")
    bootstrap = martlet.bootstrap
    create(kafka_tool, bootstrap, topic, 3)
    described = run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic])
    assert "PartitionCount: 3" in described and described.count("Leader: 1") == 3
    run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--alter", "--topic", topic, "--partitions", "5"])
    run_ok(kafka_tool, "configs", ["--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics",
                                   "--entity-name", topic, "--add-config", "retention.ms=3600000"])
    described = run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic])
    assert "PartitionCount: 5" in described and "retention.ms=3600000" in described
    assert topic in run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--list"]).split()
    run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--delete", "--topic", topic])
    assert topic not in run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--list"]).split()


def test_console_producer_and_consumer_round_trip(martlet, kafka_tool):
    topic = unique_topic("cli-console")
    create(kafka_tool, martlet.bootstrap, topic, 1)
    lines = [f"key{i}:value{i}" for i in range(500)]
    run_ok(kafka_tool, "console-producer", ["--bootstrap-server", martlet.bootstrap, "--topic", topic,
                                            "--reader-property", "parse.key=true",
                                            "--reader-property", "key.separator=:"],
           input="\n".join(lines).encode() + b"\n")
    out = run_ok(kafka_tool, "console-consumer", [
        "--bootstrap-server", martlet.bootstrap, "--topic", topic, "--partition", "0", "--offset", "earliest",
        "--max-messages", "500", "--timeout-ms", "30000",
        "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:"])
    assert out.splitlines() == lines


def test_producer_perf_test_with_acks_all(martlet, kafka_tool):
    topic = unique_topic("cli-perf")
    create(kafka_tool, martlet.bootstrap, topic, 3)
    out = run_ok(kafka_tool, "producer-perf-test", [
        "--topic", topic, "--num-records", "20000", "--record-size", "1000", "--throughput", "-1",
        "--bootstrap-server", martlet.bootstrap, "--command-property", "acks=all"])
    assert "20000 records sent" in out
    consumer = confluent_consumer(martlet.bootstrap)
    try:
        assert sum(confluent_high_watermarks(consumer, topic, 3).values()) == 20000
    finally:
        consumer.close()


@pytest.mark.parametrize("hard", [False, True], ids=["graceful", "kill-9"])
def test_java_idempotent_producer_across_restart_leaves_no_duplicates(martlet_process, kafka_tool, hard):
    broker = martlet_process()
    topic = unique_topic("cli-idempotent")
    create(kafka_tool, broker.bootstrap, topic, 1)
    command = tool_command("console-producer", [
        "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--command-property", "enable.idempotence=true", "--command-property", "acks=all",
        "--command-property", "delivery.timeout.ms=60000", "--command-property", "retry.backoff.ms=50"])
    first = "".join(f"line-{i}\n" for i in range(1500)).encode()
    second = "".join(f"line-{i}\n" for i in range(1500, 3000)).encode()
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as producer:
        try:
            assert producer.stdin is not None
            producer.stdin.write(first)
            producer.stdin.flush()
            broker.restart(hard=hard)
            _, err = producer.communicate(second, timeout=TOOL_TIMEOUT_S)
        finally:
            producer.kill()
    assert producer.returncode == 0, err.decode()
    consumer = confluent_consumer(broker.bootstrap)
    try:
        got = confluent_consume(consumer, topic, 3000, partitions=1, timeout_s=30)
    finally:
        consumer.close()
    values = [g.value.decode() for g in got]
    assert len(values) == len(set(values)), "duplicates after restart"
    assert len(values) == 3000, f"{3000 - len(values)} lines lost"
    assert sorted(values, key=lambda v: int(v.split("-")[1])) == values  # order kept


def test_operator_tools_describe_reassign_and_list_api_versions(martlet, kafka_tool, tmp_path):
    topic = unique_topic("cli-admin")
    bootstrap = martlet.bootstrap
    create(kafka_tool, bootstrap, topic, 2)
    described = run_ok(kafka_tool, "topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic])
    assert "ReplicationFactor: 1" in described and described.count("Leader: 1\tReplicas: 1\tIsr: 1") == 2

    versions = run_ok(kafka_tool, "broker-api-versions", ["--bootstrap-server", bootstrap])
    assert f"{bootstrap} (id: 1 rack: null" in versions
    for served in ("DescribeLogDirs(35): 1 to 5", "ElectLeaders(43): 0 to 2", "AlterPartitionReassignments(45): 0 to 1",
                   "ListPartitionReassignments(46): 0 [usable: 0]", "DescribeCluster(60): 0 to 2"):
        assert served in versions

    configs = run_ok(kafka_tool, "configs", ["--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers",
                                             "--entity-name", "1", "--all"])
    assert f"advertised.listeners=PLAINTEXT://{bootstrap} " in configs and "broker.id=1 " in configs
    run_ok(kafka_tool, "configs", ["--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers",
                                   "--entity-name", "1"])
    default = ["--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-default"]
    run_ok(kafka_tool, "configs", [*default, "--alter", "--add-config", "log.retention.ms=1209600000"])
    try:
        shown = run_ok(kafka_tool, "configs", ["--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics",
                                               "--entity-name", topic, "--all"])
        assert "retention.ms=1209600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" in shown
    finally:
        run_ok(kafka_tool, "configs", [*default, "--alter", "--delete-config", "log.retention.ms"])
    loggers = run_ok(kafka_tool, "configs", ["--bootstrap-server", bootstrap, "--describe", "--entity-type",
                                             "broker-loggers", "--entity-name", "1"])
    assert "root=" in loggers and "martlet.gateway.server=" in loggers

    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]}))
    reassign = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
    assert f"Successfully started partition reassignment for {topic}-0" in run_ok(
        kafka_tool, "reassign-partitions", [*reassign, "--execute"])
    assert f"Reassignment of partition {topic}-0 is completed." in run_ok(
        kafka_tool, "reassign-partitions", [*reassign, "--verify"])  # and clears the (absent) throttles
    assert "No partition reassignments found." in run_ok(
        kafka_tool, "reassign-partitions", ["--bootstrap-server", bootstrap, "--list"])

    log_dirs = run_ok(kafka_tool, "log-dirs", ["--bootstrap-server", bootstrap, "--describe", "--topic-list", topic])
    report = json.loads(log_dirs.splitlines()[-1])
    assert sorted(p["partition"] for d in report["brokers"][0]["logDirs"] for p in d["partitions"]) == [
        f"{topic}-0", f"{topic}-1"]
    elected = run_ok(kafka_tool, "leader-election", ["--bootstrap-server", bootstrap, "--election-type", "preferred",
                                                     "--topic", topic, "--partition", "0"])
    assert f"Valid replica already elected for partitions {topic}-0" in elected
