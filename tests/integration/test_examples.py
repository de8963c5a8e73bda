"""Every example in examples/ runs end to end against a Martlet broker, as its README says
(examples/exactly_once.py is run, and killed, by test_transactions_kill.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.compat.reference.spark import spark_kafka_jars
from tests.fixtures.martlet import wait_until
from tests.integration.store_readers import new_topic, produce, published

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUN_S = 300


def _run(*args: str) -> str:
    done = subprocess.run([*args], capture_output=True, text=True, timeout=RUN_S, cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("script", ["confluent_quickstart.py", "kafka_python_quickstart.py", "aiokafka_quickstart.py"])
def test_quickstart(martlet: Any, script: str) -> None:
    out = _run(sys.executable, str(EXAMPLES / "quickstart" / script), "--bootstrap", martlet.bootstrap)
    assert out.splitlines()[-1] == "read 10 records"
    assert len([line for line in out.splitlines() if " = hello " in line]) == 10


def _fill(martlet: Any, count: int) -> str:
    topic = new_topic(martlet.bootstrap, 1, prefix="example")
    produce(martlet.bootstrap, topic, [{"key": b"k%d" % n, "value": b"event %d" % n} for n in range(count)])
    published(martlet.data_dir, topic, {0: count})
    return topic


@pytest.mark.spark
@pytest.mark.parametrize("source", ["kafka", "martlet"])
def test_spark_streaming_example(martlet: Any, tmp_path: Path, source: str) -> None:
    topic = _fill(martlet, 50)
    args = [sys.executable, str(EXAMPLES / "spark_streaming" / "stream_to_parquet.py"), "--source", source,
            "--topic", topic, "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "checkpoint"),
            "--available-now"]
    args += (["--bootstrap", martlet.bootstrap, "--jars", ",".join(spark_kafka_jars())] if source == "kafka"
             else ["--store", str(martlet.data_dir)])
    assert _run(*args).splitlines()[-1] == f"50 records in {tmp_path / 'out'}"
    # a restart from the checkpoint is tested by test_spark_kafka.py and test_spark_source.py


@pytest.mark.flink
def test_flink_exactly_once_example(martlet: Any, flink: Any, tmp_path: Path) -> None:
    source = _fill(martlet, 40)
    output = f"{source}-shouted"
    admin = AdminClient({"bootstrap.servers": martlet.bootstrap})
    admin.create_topics([NewTopic(output, 1)])[output].result(30)
    done = subprocess.run([flink.python, str(EXAMPLES / "flink_exactly_once" / "uppercase_job.py"), "--jar", flink.jar,
                           "--bootstrap", martlet.bootstrap, "--input", source, "--output", output, "--checkpoints",
                           str(tmp_path / "checkpoints"), "--bounded"], capture_output=True, text=True,
                          timeout=RUN_S, env=flink.env(tmp_path / "logs"))
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "done", done.stderr[-3000:] + flink.log_tail()
    consumer = Consumer({"bootstrap.servers": martlet.bootstrap, "group.id": f"check-{output}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe([output])
    got: list[bytes] = []
    try:
        wait_until(lambda: _poll(consumer, got) >= 40, 30)
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"EVENT %d" % number for number in range(40))


def _poll(consumer: Consumer, got: list[bytes]) -> int:
    message = consumer.poll(1)
    if message is not None and message.error() is None:
        got.append(message.value())
    return len(got)


def test_parquet_export_example(martlet: Any, tmp_path: Path) -> None:
    topic = _fill(martlet, 30)
    lake = tmp_path / "lake"
    exported = _run("martlet", "export", topic, "--to", str(lake), "--store", str(martlet.data_dir), "--values", "utf8")
    assert f"exported 30 records of {topic}" in exported
    out = _run(sys.executable, str(EXAMPLES / "parquet_export" / "read_export.py"), str(lake), topic)
    assert out.splitlines()[-1] == f"30 records of {topic}"


def test_native_sdk_example(martlet: Any) -> None:
    out = _run(sys.executable, str(EXAMPLES / "native_sdk" / "sdk_tour.py"), "--bootstrap", martlet.bootstrap)
    assert "wrote 1000 messages; 1000 persisted" in out
    assert "the group member read 1000 messages and committed" in out
