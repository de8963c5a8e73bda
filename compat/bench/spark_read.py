"""`martlet bench --spark`: one topic read by Spark twice over, with the stock Kafka source
through the gateway and with `format("martlet")` from the store, in the same local[2]
session on the same broker; time and CPU per read, medians over rounds, and the ratio.

The topic is `--produce-mb` of 1 KB records (default 2,000) over four partitions, produced
with librdkafka; the reads start once the broker has published its last stable offset
past all of them. Each read is `count(*)` and `sum(length(value))`, so every value crosses
into Spark. CPU is the whole machine's busy time during the read (/proc/stat: Spark's JVM,
its Python workers and the broker, which serves only the Kafka source's reads), and the
broker's own share beside it, and the CPU-s of everything else on the machine in the
meantime (the machine's less this process's tree: other work sharing the cores). The native
read is CPU-bound (its time is about its CPU-s over the cores it gets) while the Kafka
source waits on fetches, so other work slows the native read more and lowers the ratio.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..reference.spark import spark_kafka_jars
from .probe import machine_cpu_seconds
from .runner import MARTLET_CMD

PARTITIONS = 4
RECORD_BYTES = 1000
PUBLISHED_TIMEOUT_S = 300.0
START_TIMEOUT_S = 60.0
TICKS = os.sysconf("SC_CLK_TCK")
Sample = tuple[float, float, float, float]  # seconds, machine CPU-s, broker CPU-s, others' CPU-s


def main(produce_mb: int, rounds: int, progress: Callable[[str], None] = print) -> int:
    with tempfile.TemporaryDirectory(prefix="martlet-spark-bench-") as folder, _broker(Path(folder)) as (bootstrap,
                                                                                                        pid):
        data = str(Path(folder) / "data")
        progress(f"producing {produce_mb} MB")
        records = _produce(bootstrap, "bench", produce_mb * 1_000_000 // RECORD_BYTES)
        _wait_published(data, "bench", records)
        spark = _session(Path(folder))
        try:
            sources = {"kafka": lambda: spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                       .option("subscribe", "bench").option("startingOffsets", "earliest").load(),
                       "martlet": lambda: spark.read.format("martlet").option("store", data)
                       .option("topic", "bench").load()}
            times: dict[str, list[Sample]] = {name: [] for name in sources}
            for round_ in range(rounds + 1):  # a first round warms the JVM and the Python workers up
                for name, frame in sources.items():
                    progress(f"round {round_}/{rounds} {name}")
                    taken = _read(frame, records, pid)
                    if round_:
                        times[name].append(taken)
        finally:
            spark.stop()
    print(_report(times, produce_mb))
    return 0


def _report(times: dict[str, list[Sample]], produce_mb: int) -> str:
    medians = {name: [statistics.median(sample[i] for sample in samples) for i in range(4)]
               for name, samples in times.items()}
    lines = [f"spark read of {produce_mb} MB (1 KB records, {PARTITIONS} partitions), medians of "
             f"{len(times['kafka'])} rounds", f"{'source':10} {'seconds':>8} {'MB/s':>7} {'CPU s':>7} {'broker CPU s':>13} "
                                              f"{'others CPU s':>13}"]
    for name, (seconds, cpu, broker, others) in medians.items():
        lines.append(f"{name:10} {seconds:8.1f} {produce_mb / seconds:7.0f} {cpu:7.1f} {broker:13.1f} {others:13.1f}")
    kafka, martlet = medians["kafka"], medians["martlet"]
    lines.append(f"format(\"martlet\") against the Kafka source: {kafka[0] / martlet[0]:.2f}x faster, "
                 f"{kafka[1] / martlet[1]:.2f}x less CPU")
    lines += [f"  {name} rounds: " + ", ".join(f"{s:.1f} s / {c:.1f} CPU-s" for s, c, _, _ in samples)
              for name, samples in times.items()]
    return "\n".join(lines)


def _read(frame: Callable[[], Any], records: int, pid: int) -> Sample:
    machine, broker, ours, started = machine_cpu_seconds(), _process_cpu(pid), _tree_cpu(os.getpid()), time.monotonic()
    row = frame().selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
    seconds, machine, broker = time.monotonic() - started, machine_cpu_seconds() - machine, _process_cpu(pid) - broker
    taken = seconds, machine, broker, max(0.0, machine - (_tree_cpu(os.getpid()) - ours))
    if row.n != records or row.b != records * RECORD_BYTES:
        raise RuntimeError(f"read {row.n} records of {row.b} bytes, produced {records} of {records * RECORD_BYTES}")
    return taken


def _process_cpu(pid: int) -> float:
    return _stat(pid)[1]


def _stat(pid: int) -> tuple[int, float]:
    """(parent pid, CPU-s) of a process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def _tree_cpu(root: int) -> float:
    """CPU-s of `root` and its live descendants (Spark's JVM and Python workers, the broker)."""
    found: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                found[int(name)] = _stat(int(name))
            except (OSError, IndexError, ValueError):
                continue  # it ended meanwhile
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in found.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += found.get(pid, (0, 0.0))[1]
        todo += children.get(pid, [])
    return total


@contextmanager
def _broker(folder: Path) -> Iterator[tuple[str, int]]:
    with subprocess.Popen([*MARTLET_CMD, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(folder / "data")],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode().strip()
            if not line.startswith("martlet listening on "):
                raise RuntimeError(f"martlet did not start: {line!r}")
            yield line.rsplit(" ", 1)[-1], proc.pid
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=START_TIMEOUT_S)


def _produce(bootstrap: str, topic: str, records: int) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20})
    value = os.urandom(RECORD_BYTES)
    for number in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=number % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("the producer did not deliver everything within 120 s")
    return records


def _wait_published(data: str, topic: str, records: int) -> None:
    from ...connectors.arrow import open_store, span_end
    from ...engine.api import stored_topic

    store = open_store(data)
    deadline = time.monotonic() + PUBLISHED_TIMEOUT_S
    while time.monotonic() < deadline:
        found = stored_topic(store, topic)
        if sum(span_end(store, found, p)[1] for p in range(PARTITIONS)) >= records:
            return
        time.sleep(0.5)  # polling the published offsets, bounded by the deadline
    raise RuntimeError(f"the broker did not publish {records} records within {PUBLISHED_TIMEOUT_S:.0f} s")


def _session(folder: Path) -> Any:
    from pyspark.sql import SparkSession

    from ...connectors.spark import register

    builder = SparkSession.builder.appName("martlet-bench-spark")
    for key, value in {"spark.master": "local[2]", "spark.jars": ",".join(spark_kafka_jars()),
                       "spark.driver.memory": "2g", "spark.ui.enabled": "false",
                       "spark.ui.showConsoleProgress": "false", "spark.driver.host": "127.0.0.1",
                       "spark.driver.bindAddress": "127.0.0.1", "spark.local.dir": str(folder / "spark"),
                       "spark.sql.warehouse.dir": str(folder / "warehouse")}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    register(session)
    return session
