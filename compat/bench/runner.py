"""Rounds, medians and the report of `martlet bench`.

Both brokers are started once, fresh, and stay up for the whole run; each round runs every
workload against Martlet, then every workload against Kafka (A, B, A, B ...), so a slow
minute on the machine lands on both. Topics are new per round and deleted after it.
The report gives each metric's median over the rounds and the ratio Martlet / Kafka, and
the raw per-round rows beneath; `--json` writes all of it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..reference.kafka import ReferenceKafka
from .workloads import METRICS, QUICK, WORKLOADS, Context, Endpoint, Scale, cleanup

START_TIMEOUT_S = 60.0
KAFKA_HEAP = "1g"  # kafka-server-start.sh's default
Rows = list[dict[str, Any]]  # one per (round, endpoint, workload): name, metrics


@dataclass(slots=True)
class Plan:
    rounds: int
    workloads: list[str]
    scale: Scale
    progress: Callable[[str], None] = field(default=lambda line: None)


@contextlib.contextmanager
def martlet_broker(store: str | None = None, config: str = "") -> Iterator[Endpoint]:
    """A fresh `martlet serve` on a free loopback port and a temporary data dir."""
    with tempfile.TemporaryDirectory(prefix="martlet-bench-") as folder:
        config_file = Path(folder) / "martlet.toml"
        config_file.write_text(config)
        args = [sys.executable, "-m", "martlet.gateway.cli", "serve", "--listen", "127.0.0.1:0",
                "--data-dir", f"{folder}/data", "--config", str(config_file),
                *(["--store", store] if store else [])]
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
            try:
                assert proc.stdout is not None
                line = proc.stdout.readline().decode().strip()
                if not line.startswith("martlet listening on "):
                    raise RuntimeError(f"martlet did not start: {line!r}")
                yield Endpoint("martlet", line.rsplit(" ", 1)[-1], proc.pid)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=START_TIMEOUT_S)


@contextlib.contextmanager
def kafka_broker() -> Iterator[Endpoint]:
    with ReferenceKafka(heap=KAFKA_HEAP) as kafka:
        assert kafka.pid is not None
        yield Endpoint("kafka", kafka.bootstrap, kafka.pid)


def run(plan: Plan, endpoints: Sequence[Endpoint]) -> Rows:
    rows: Rows = []
    for round_no in range(1, plan.rounds + 1):
        for endpoint in endpoints:
            ctx = Context(endpoint, plan.scale, round_no)
            for name in plan.workloads:
                plan.progress(f"round {round_no}/{plan.rounds}  {endpoint.name:<8} {name}")
                started = time.monotonic()
                metrics = WORKLOADS[name](ctx)
                rows.append({"round": round_no, "endpoint": endpoint.name, "workload": name,
                             "seconds": round(time.monotonic() - started, 1), "metrics": metrics})
            cleanup(ctx)
    return rows


def medians(rows: Rows) -> dict[tuple[str, str], dict[str, float]]:
    """(workload, metric) -> endpoint -> median over the rounds."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in rows:
        for metric, value in row["metrics"].items():
            values.setdefault((row["workload"], metric), {}).setdefault(row["endpoint"], []).append(value)
    return {key: {ep: statistics.median(vs) for ep, vs in by_ep.items()} for key, by_ep in values.items()}


def ratios(rows: Rows) -> dict[tuple[str, str], float]:
    """(workload, metric) -> Martlet's median / Kafka's median."""
    return {key: m["martlet"] / m["kafka"] for key, m in medians(rows).items()
            if "martlet" in m and "kafka" in m and m["kafka"]}


def report(rows: Rows) -> str:
    table = medians(rows)
    endpoints = list(dict.fromkeys(row["endpoint"] for row in rows))
    both = endpoints == ["martlet", "kafka"]
    head = f"{'workload':<22}{'metric':<14}" + "".join(f"{ep:>12}" for ep in endpoints)
    lines = ["medians over %d round(s)" % max(row["round"] for row in rows),
             head + (f"{'ratio':>8}  better" if both else "")]
    for (workload, metric), by_ep in table.items():
        line = f"{workload:<22}{metric:<14}" + "".join(f"{by_ep.get(ep, float('nan')):>12.2f}" for ep in endpoints)
        if both and by_ep.get("kafka"):
            line += f"{by_ep['martlet'] / by_ep['kafka']:>8.2f}  {'higher' if METRICS[metric].higher_is_better else 'lower'}"
        lines.append(line)
    lines += ["", "raw rows", f"{'round':<6}{'endpoint':<10}{'workload':<22}metrics"]
    for row in rows:
        shown = ", ".join(f"{k} {v:.2f}" for k, v in row["metrics"].items())
        lines.append(f"{row['round']:<6}{row['endpoint']:<10}{row['workload']:<22}{shown}")
    return "\n".join(lines)


def check(rows: Rows, baseline: dict[str, float]) -> list[str]:
    """Regression guard: every recorded ratio ("workload metric" -> ratio) must hold at least
    half its value (for lower-is-better metrics: at most twice). Returns what failed."""
    got = ratios(rows)
    failures = []
    for key, recorded in baseline.items():
        workload, metric = key.split(" ", 1)
        ratio = got.get((workload, metric))
        if ratio is None:
            failures.append(f"{key}: not measured")
        elif METRICS[metric].higher_is_better and ratio < recorded / 2:
            failures.append(f"{key}: ratio {ratio:.2f} is below half the recorded {recorded:.2f}")
        elif not METRICS[metric].higher_is_better and ratio > recorded * 2:
            failures.append(f"{key}: ratio {ratio:.2f} is above twice the recorded {recorded:.2f}")
    return failures


def to_json(rows: Rows) -> str:
    table = [{"workload": w, "metric": m, "medians": by_ep} for (w, m), by_ep in medians(rows).items()]
    return json.dumps({"medians": table, "rows": rows}, indent=2)


__all__ = ["QUICK", "Plan", "Scale", "check", "kafka_broker", "martlet_broker", "report", "run", "to_json"]
