"""`martlet compat perf`: Apache Kafka's own perf tools against Martlet and against the
reference Kafka, one after the other on this machine, reported side by side as ratios.

Both brokers are started fresh (Martlet through its CLI, with a temporary data dir, or with
--hdfs on a reference HDFS started for the run), each
gets one topic, then kafka-producer-perf-test writes N records and
kafka-consumer-perf-test reads them back in a consumer group. Producer settings are the
tool's defaults (acks=all, idempotent, batch.size 16384, linger.ms 5) unless given.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .reference.kafka import ReferenceKafka, run_tool

START_TIMEOUT_S = 60.0
TOOL_TIMEOUT_S = 900.0
PRODUCED = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")
MARTLET_CONFIG = "[groups]\ninitial_rebalance_delay_ms = 0\n"  # as the reference broker's setting


@dataclass(frozen=True, slots=True)
class Throughput:
    produce_mb_s: float
    produce_records_s: float
    consume_mb_s: float
    consume_records_s: float


@contextlib.contextmanager
def martlet_broker(store: str | None = None) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="martlet-perf-") as folder:
        config = Path(folder) / "martlet.toml"
        config.write_text(MARTLET_CONFIG)
        args = [sys.executable, "-m", "martlet.gateway.cli", "serve", "--listen", "127.0.0.1:0",
                "--data-dir", f"{folder}/data", "--config", str(config), *(["--store", store] if store else [])]
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
            try:
                assert proc.stdout is not None
                line = proc.stdout.readline().decode().strip()
                if not line.startswith("martlet listening on "):
                    raise RuntimeError(f"martlet did not start: {line!r}")
                yield line.rsplit(" ", 1)[-1]
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=START_TIMEOUT_S)


def _tool(name: str, args: list[str]) -> str:
    result = run_tool(name, args, TOOL_TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{result.stderr.decode()[-2000:]}")
    return result.stdout.decode()


def measure(bootstrap: str, records: int, record_bytes: int, partitions: int, producer_props: list[str]) -> Throughput:
    topic = "perf"
    _tool("topics", ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", str(partitions),
                     "--replication-factor", "1"])
    extra = [arg for prop in producer_props for arg in ("--command-property", prop)]
    produced = _tool("producer-perf-test", ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
                                            str(records), "--record-size", str(record_bytes), "--throughput", "-1",
                                            *extra])
    match = PRODUCED.findall(produced)[-1]
    consumed = _tool("consumer-perf-test", ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
                                            str(records), "--timeout", "60000", "--group", "perf-group"])
    columns = consumed.strip().splitlines()[-1].split(", ")
    return Throughput(float(match[2]), float(match[1]), float(columns[3]), float(columns[5]))


def compare(records: int, record_bytes: int, partitions: int, producer_props: list[str],
            hdfs: bool = False) -> dict[str, Throughput]:
    """Martlet (on local disk, or with `hdfs` on a reference HDFS started here), then Kafka."""
    results = {}
    with contextlib.ExitStack() as stack:
        store = None
        if hdfs:
            from .reference.hdfs import ReferenceHdfs

            store = f"{stack.enter_context(ReferenceHdfs()).url}/martlet-perf"
        with martlet_broker(store) as bootstrap:
            results["martlet"] = measure(bootstrap, records, record_bytes, partitions, producer_props)
    with ReferenceKafka() as kafka:
        results["kafka"] = measure(kafka.bootstrap, records, record_bytes, partitions, producer_props)
    return results


def report(results: dict[str, Throughput]) -> str:
    martlet, kafka = results["martlet"], results["kafka"]
    rows = [("produce MB/s", martlet.produce_mb_s, kafka.produce_mb_s),
            ("produce records/s", martlet.produce_records_s, kafka.produce_records_s),
            ("consume MB/s", martlet.consume_mb_s, kafka.consume_mb_s),
            ("consume records/s", martlet.consume_records_s, kafka.consume_records_s)]
    lines = [f"{'workload':<20}{'martlet':>14}{'kafka':>14}{'ratio':>8}"]
    lines += [f"{name:<20}{m:>14.1f}{k:>14.1f}{m / k if k else 0:>8.2f}" for name, m, k in rows]
    return "\n".join(lines)
