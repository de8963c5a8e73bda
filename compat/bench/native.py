"""`martlet bench --native`: the native SDK's producer beside confluent-kafka acks=all (issue 16, point 6).

One fresh Martlet broker (runner.martlet_broker) serves both clients; every run gets a new topic
of PARTITIONS partitions. Each round runs every workload with the native client, then with
confluent-kafka (the clients alternate, so a slow minute lands on both); the report gives the
medians over the rounds and the ratio native / confluent. Every client runs in its own process:
the native ones are this module's roles (`python -m martlet.compat.bench.native JSON`, the
same contract as load.py: one JSON line out), the confluent ones are load.py's.

- produce-1k, produce-100b: `records` keyless records of 1,000 (100) random bytes as fast as
  possible. Native: AsyncProducer (round robin over the partitions), done when
  `wait_persisted()` returns, that is when C covers every record (persisted: what acks=all
  promises). Confluent: load.py's produce role with the produce workloads' settings (acks=all,
  idempotent, linger.ms 5, batch.size 1 MB), done when every delivery report arrived.
- latency-1k: LATENCY_RATE records of 1,000 bytes a second for `latency_seconds`, paced by a
  fixed schedule on the monotonic clock (record i is due at start + i / rate, so a late record
  does not push the later ones back). Per record, send to acknowledgement: native
  `on_written` (in the broker's memory, its offset known) and `on_persisted` (C covers it);
  confluent: load.py's spread-produce role (acks=all, idempotent, linger.ms 0, record i to
  partition i mod PARTITIONS), its delivery report.

Beside every run, the broker's CPU seconds over it (probe.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...client.message import Message
from ...client.producer import AsyncProducer
from . import load
from .probe import Probe
from .runner import Rows, martlet_broker, medians, settle
from .workloads import Endpoint, create_topic, percentile, run_load

PARTITIONS = 4
LATENCY_RATE = 1000  # records a second
NATIVE_MODULE = "martlet.compat.bench.native"  # its roles run as `python -m` of this module
NATIVE, CONFLUENT = "native", "confluent"
CLIENTS = (NATIVE, CONFLUENT)
MB = 1_000_000
# confluent-kafka as the bench's produce-1k-acksall (workloads._producer("all", True))
CONFLUENT_PRODUCE = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 1_000_000,
                     "compression.type": "none", "sticky.partitioning.linger.ms": 0}
CONFLUENT_LATENCY = {"acks": "all", "enable.idempotence": True, "linger.ms": 0}
HIGHER_IS_BETTER = {"MB/s", "records/s"}
TARGETS = {("produce-1k", "MB/s"): (1.0, True), ("latency-1k", "p99 ms"): (0.5, False)}  # ratio, higher is better


@dataclass(frozen=True, slots=True)
class NativeScale:
    records_1k: int = 500_000
    records_100b: int = 2_000_000
    latency_seconds: int = 10


QUICK_NATIVE = NativeScale(records_1k=20_000, records_100b=50_000, latency_seconds=1)


def main(scale: NativeScale, rounds: int, progress: Callable[[str], None] = print, json_path: str | None = None) -> int:
    with martlet_broker() as endpoint:
        rows = run_native(endpoint, scale, rounds, progress)
    progress("")
    print(native_report(rows))
    if json_path:
        Path(json_path).write_text(json.dumps({"medians": _table(rows), "rows": rows}, indent=2))
    failed = [row for row in rows if "error" in row]
    for row in failed:
        print(f"ERROR round {row['round']} {row['endpoint']} {row['workload']}: {row['error']}", file=sys.stderr)
    return 1 if failed else 0


def run_native(endpoint: Endpoint, scale: NativeScale, rounds: int, progress: Callable[[str], None]) -> Rows:
    """Every workload with each client in turn, round after round; one row per run."""
    rows: Rows = []
    for round_no in range(1, rounds + 1):
        for workload in WORKLOADS:
            for client in CLIENTS:
                progress(f"round {round_no}/{rounds}  {workload:<14} {client}")
                settle([endpoint])
                rows.append(_measure(endpoint, scale, workload, client, round_no))
    return rows


def _measure(endpoint: Endpoint, scale: NativeScale, workload: str, client: str, round_no: int) -> dict[str, Any]:
    started = time.monotonic()
    row: dict[str, Any] = {"round": round_no, "endpoint": client, "workload": workload, "metrics": {}}
    topic = f"native-bench-{workload}-{client}-r{round_no}"
    try:
        create_topic(endpoint.bootstrap, topic, PARTITIONS)
        row["metrics"] = WORKLOADS[workload](endpoint, scale, client, topic)
    except Exception as error:  # reported in its row; the other runs still go on
        row["error"] = f"{type(error).__name__}: {error}"
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def _throughput(record_bytes: int) -> Callable[[Endpoint, NativeScale, str, str], dict[str, float]]:
    def run(endpoint: Endpoint, scale: NativeScale, client: str, topic: str) -> dict[str, float]:
        records = scale.records_1k if record_bytes == 1000 else scale.records_100b
        spec = {"role": "produce" if client == CONFLUENT else "native-produce", "bootstrap": endpoint.bootstrap,
                "topic": topic, "records": records, "record_bytes": record_bytes, "config": CONFLUENT_PRODUCE}
        with Probe(endpoint.pid) as probe:
            result = run_load(spec) if client == CONFLUENT else run_load(spec, module=NATIVE_MODULE)
        if result["failed"]:
            raise RuntimeError(f"{result['failed']} of {records} records were not delivered")
        return {"MB/s": result["bytes"] / MB / result["seconds"], "records/s": result["records"] / result["seconds"],
                "cpu s": probe.cpu_s or 0.0}
    return run


def _latency(endpoint: Endpoint, scale: NativeScale, client: str, topic: str) -> dict[str, float]:
    spec = {"role": "spread-produce" if client == CONFLUENT else "native-latency", "bootstrap": endpoint.bootstrap,
            "topic": topic, "partitions": PARTITIONS, "rate": LATENCY_RATE, "seconds": scale.latency_seconds,
            "record_bytes": 1000, "config": CONFLUENT_LATENCY}
    with Probe(endpoint.pid) as probe:
        result = run_load(spec) if client == CONFLUENT else run_load(spec, module=NATIVE_MODULE)
    if result["failed"]:
        raise RuntimeError(f"{result['failed']} of {result['records']} records refused: {result.get('errors')}")
    metrics = _percentiles(result["acked_us"])
    if "persisted_us" in result:
        persisted = sorted(result["persisted_us"])
        metrics |= {"persisted p50 ms": percentile(persisted, 50) / 1000, "persisted p99 ms": percentile(persisted, 99) / 1000}
    return metrics | {"cpu s": probe.cpu_s or 0.0}


def _percentiles(samples_us: list[float]) -> dict[str, float]:
    samples = sorted(samples_us)
    return {"p50 ms": percentile(samples, 50) / 1000, "p99 ms": percentile(samples, 99) / 1000,
            "max ms": samples[-1] / 1000}


WORKLOADS: dict[str, Callable[[Endpoint, NativeScale, str, str], dict[str, float]]] = {
    "produce-1k": _throughput(1000), "produce-100b": _throughput(100), "latency-1k": _latency}


# -- the report

def _table(rows: Rows) -> list[dict[str, Any]]:
    table = []
    for (workload, metric), by_client in medians(rows).items():
        entry: dict[str, Any] = {"workload": workload, "metric": metric, "medians": by_client}
        if by_client.get(NATIVE) is not None and by_client.get(CONFLUENT):
            entry["native/confluent"] = by_client[NATIVE] / by_client[CONFLUENT]
        table.append(entry)
    return table


def native_report(rows: Rows) -> str:
    rounds = max((row["round"] for row in rows), default=0)
    lines = [f"native SDK (AsyncProducer) vs confluent-kafka acks=all, one Martlet broker, topics of {PARTITIONS} "
             f"partitions, medians of {rounds} round(s)",
             f"{'workload':<14}{'metric':<18}{NATIVE:>12}{CONFLUENT:>12}{'native/confluent':>18}  target"]
    for entry in _table(rows):
        by_client = entry["medians"]
        ratio = entry.get("native/confluent")
        lines.append(f"{entry['workload']:<14}{entry['metric']:<18}{by_client.get(NATIVE, float('nan')):>12.2f}"
                     f"{by_client.get(CONFLUENT, float('nan')):>12.2f}"
                     f"{'' if ratio is None else f'{ratio:.2f}':>18}  {_target(entry['workload'], entry['metric'], ratio)}")
    lines += ["", "native: produce done when C covers every record (wait_persisted); latency to on_written "
              "(in broker memory), 'persisted p99' to on_persisted (C covers it). confluent: every delivery report.",
              "", "raw rows", f"{'round':<6}{'client':<11}{'workload':<14}metrics"]
    for row in rows:
        shown = row.get("error") or ", ".join(f"{k} {v:.2f}" for k, v in row["metrics"].items())
        lines.append(f"{row['round']:<6}{row['endpoint']:<11}{row['workload']:<14}{shown}")
    return "\n".join(lines)


def _target(workload: str, metric: str, ratio: float | None) -> str:
    target = TARGETS.get((workload, metric))
    if target is None or ratio is None:
        return ""
    bound, higher = target
    met = ratio >= bound if higher else ratio <= bound
    return f"{'>=' if higher else '<='} {bound:.1f}x: {'met' if met else 'MISSED'}"


# -- the native load processes

class _Failures:
    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def __call__(self, _message: Message, error: Exception) -> None:
        self.count += 1
        self.first = self.first or str(error)


async def _warmed(producer: AsyncProducer, sequence: int) -> None:
    """Start the producer and write one record to every partition, persisted, before the clock
    starts: connections, the producer id and each partition's first (V, S) are learnt."""
    await producer.start()
    for partition in range(PARTITIONS):
        await producer.send(b"warm-up", partition=partition, sequence=sequence + partition)
    await producer.wait_persisted()


async def native_produce(spec: dict[str, Any]) -> dict[str, Any]:
    failures = _Failures()
    records, record_bytes = spec["records"], spec["record_bytes"]
    producer = AsyncProducer(spec["bootstrap"], spec["topic"], on_failed=failures)
    await _warmed(producer, records)
    value = os.urandom(record_bytes)
    start = time.perf_counter()
    for sequence in range(records):
        await producer.send(value, sequence=sequence)
    await producer.wait_persisted()
    seconds = time.perf_counter() - start
    await producer.close()
    return {"records": records, "bytes": records * record_bytes, "seconds": seconds, "failed": failures.count,
            "errors": [failures.first] if failures.first else []}


async def native_latency(spec: dict[str, Any]) -> dict[str, Any]:
    """Paced sends; per record the microseconds from send to on_written and to on_persisted."""
    total, rate = spec["rate"] * spec["seconds"], spec["rate"]
    sent_ns = [0] * total
    acked_us: list[float] = []
    persisted_us: list[float] = []

    def since_sent(into: list[float]) -> Callable[[Message], None]:
        def record(message: Message) -> None:
            if message.sequence < total:  # not a warm-up record
                into.append((time.perf_counter_ns() - sent_ns[message.sequence]) / 1000)
        return record

    failures = _Failures()
    producer = AsyncProducer(spec["bootstrap"], spec["topic"], on_written=since_sent(acked_us),
                             on_persisted=since_sent(persisted_us), on_failed=failures)
    await _warmed(producer, total)
    value = bytes(spec["record_bytes"])
    start = time.perf_counter()
    for sequence in range(total):
        due = start + sequence / rate
        if (pause := due - time.perf_counter()) > 0:
            await asyncio.sleep(pause)  # pacing to a fixed schedule, not synchronisation
        sent_ns[sequence] = time.perf_counter_ns()
        await producer.send(value, sequence=sequence)
    await producer.wait_persisted()
    seconds = time.perf_counter() - start
    await producer.close()
    return {"records": total, "failed": failures.count, "errors": [failures.first] if failures.first else [],
            "acked_us": acked_us, "persisted_us": persisted_us, "seconds": seconds}


ROLES = {"native-produce": lambda spec: asyncio.run(native_produce(spec)),
         "native-latency": lambda spec: asyncio.run(native_latency(spec))}


if __name__ == "__main__":
    sys.exit(load.main(sys.argv[1:], ROLES))
