"""The reference Apache Kafka starts, serves the CLI tools, runs twice at once and stops."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from martlet.compat.reference.kafka import (
    KAFKA_TOOLS,
    ReferenceKafka,
    ReferenceToolTimeout,
    kafka_classpath,
)

pytestmark = [pytest.mark.integration, pytest.mark.java]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _ok(done) -> str:
    out = done.stdout.decode()
    assert done.returncode == 0, f"exit {done.returncode}\n{out}\n{done.stderr.decode()}"
    return out


def _create(kafka_tool, bootstrap: str, topic: str, partitions: int) -> None:
    _ok(kafka_tool("topics", ["--bootstrap-server", bootstrap, "--create", "--topic", topic,
                              "--partitions", str(partitions), "--replication-factor", "1"], 60))


def _list(kafka_tool, bootstrap: str) -> set[str]:
    return set(_ok(kafka_tool("topics", ["--bootstrap-server", bootstrap, "--list"], 60)).split())


def test_main_classes_are_in_the_jars() -> None:
    import zipfile

    entries: set[str] = set()
    for jar in kafka_classpath().split(os.pathsep):
        if os.path.basename(jar).startswith(("kafka_2.13-", "kafka-tools-")):
            entries.update(zipfile.ZipFile(jar).namelist())
    for main_class in [*KAFKA_TOOLS.values(), "kafka.Kafka"]:
        assert main_class.replace(".", "/") + ".class" in entries


def test_topics_create_and_describe(reference_kafka, kafka_tool) -> None:
    topic = _topic("described")
    _create(kafka_tool, reference_kafka.bootstrap, topic, 3)
    out = _ok(kafka_tool("topics", ["--bootstrap-server", reference_kafka.bootstrap,
                                    "--describe", "--topic", topic], 60))
    assert f"Topic: {topic}" in out
    assert "PartitionCount: 3" in out
    for partition in range(3):
        assert f"Partition: {partition}\tLeader: 1" in out


def test_console_producer_then_consumer_round_trip(reference_kafka, kafka_tool) -> None:
    topic = _topic("roundtrip")
    _create(kafka_tool, reference_kafka.bootstrap, topic, 3)
    lines = [f"line-{i:03d}-{'x' * (i % 7)}" for i in range(100)]
    _ok(kafka_tool("console-producer", ["--bootstrap-server", reference_kafka.bootstrap,
                                        "--topic", topic],
                   60, input=("\n".join(lines) + "\n").encode()))
    out = _ok(kafka_tool("console-consumer", ["--bootstrap-server", reference_kafka.bootstrap,
                                              "--topic", topic, "--from-beginning",
                                              "--max-messages", "100", "--timeout-ms", "30000"],
                         90))
    received = out.splitlines()
    assert len(received) == 100
    assert sorted(received) == sorted(lines)  # order holds per partition only (3 partitions)


def test_get_offsets_sees_the_produced_records(reference_kafka, kafka_tool) -> None:
    topic = _topic("offsets")
    _create(kafka_tool, reference_kafka.bootstrap, topic, 1)
    _ok(kafka_tool("console-producer", ["--bootstrap-server", reference_kafka.bootstrap,
                                        "--topic", topic], 60, input=b"a\nb\nc\n"))
    out = _ok(kafka_tool("get-offsets", ["--bootstrap-server", reference_kafka.bootstrap,
                                         "--topic", topic], 60))
    assert out.split() == [f"{topic}:0:3"]


def test_tool_timeout_raises_with_output(reference_kafka, kafka_tool) -> None:
    topic = _topic("empty")
    _create(kafka_tool, reference_kafka.bootstrap, topic, 1)
    with pytest.raises(ReferenceToolTimeout, match="did not finish within 5"):
        kafka_tool("console-consumer", ["--bootstrap-server", reference_kafka.bootstrap,
                                        "--topic", topic, "--from-beginning"], 5)


def test_two_instances_run_at_once(reference_kafka, kafka_tool) -> None:
    with ReferenceKafka() as second:
        assert second.alive and reference_kafka.alive
        assert second.port != reference_kafka.port
        assert second.pid != reference_kafka.pid
        topic = _topic("only-on-second")
        _create(kafka_tool, second.bootstrap, topic, 1)
        assert topic in _list(kafka_tool, second.bootstrap)
        assert topic not in _list(kafka_tool, reference_kafka.bootstrap)


def test_stop_ends_the_process_and_frees_the_port() -> None:
    kafka = ReferenceKafka()
    kafka.start()
    pid, port, workdir = kafka.pid, kafka.port, kafka.workdir
    assert pid is not None and port is not None and workdir is not None
    assert kafka.alive and workdir.is_dir()
    kafka.stop()
    assert not kafka.alive
    assert not workdir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
    kafka.stop()  # idempotent
    kafka.start()  # and a stopped instance starts again, on fresh ports
    try:
        assert kafka.alive and kafka.pid != pid
    finally:
        kafka.stop()
