"""Regression guard (issue 6): a short `martlet bench` against a fresh Martlet and a fresh
Apache Kafka on this machine. It fails when a throughput ratio Martlet / Kafka falls below
half of the figure recorded in compat/bench/baseline.json, so a change that makes the hot
path much slower is seen in CI. It is a ratio of two systems measured in the same run, not
a timed test: a slow or busy machine slows both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.java]

BASELINE = Path(__file__).parents[2] / "compat" / "bench" / "baseline.json"
# The 100-byte workload is left out: its ratio swings between runs (0.2 to 1.6 measured),
# as librdkafka's batches at linger.ms=0 grow or shrink with the broker's answer time.
GUARDED = "produce-1k-acks1,produce-1k-acksall,consume-1k"
BENCH_TIMEOUT_S = 900.0


def test_short_bench_keeps_at_least_half_the_recorded_ratios(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "martlet.cli", "bench", "--quick", "--rounds", "3",
         "--workloads", GUARDED, "--check", str(BASELINE), "--json", str(tmp_path / "bench.json")],
        capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    print(result.stdout)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-2000:]}"


CLUSTER_BENCH_TIMEOUT_S = 600.0


def test_a_tiny_cluster_bench_runs_every_workload_and_checks_what_it_read_back(tmp_path) -> None:
    """`martlet bench --cluster` at a tiny scale, so it cannot rot: one round of 10 MB per
    endpoint (Kafka, Martlet clusters of 1 and 2 brokers) and two kills in the failover.
    No figure is asserted (a busy machine moves them all); that every workload measured,
    and that the failover read back each acknowledged record exactly once, is."""
    out = tmp_path / "cluster.json"
    result = subprocess.run(
        [sys.executable, "-m", "martlet.cli", "bench", "--cluster", "--quick", "--rounds", "1",
         "--produce-mb", "10", "--kills", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=CLUSTER_BENCH_TIMEOUT_S)
    print(result.stdout)
    print(result.stderr[-20_000:], file=sys.stderr)  # a broker that ended on its own prints its log there
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
    report = json.loads(out.read_text())
    measured = {(row["workload"], row["endpoint"]) for row in report["rows"] if row["metrics"]}
    assert measured == {("cluster-produce-1k-acksall", "kafka"), ("cluster-produce-1k-acksall", "martlet-1"),
                        ("cluster-produce-1k-acksall", "martlet-2"), ("cluster-failover", "martlet-3")}
    assert set(report["ratios"]) == {"martlet-1 / kafka", "martlet-2 / kafka", "martlet-2 / martlet-1"}
    failover = next(row for row in report["rows"] if row["workload"] == "cluster-failover")
    assert failover["metrics"]["kills"] == 2
    assert len(failover["failover_s"]) == failover["metrics"]["moved partitions"] > 0
    assert "read back exactly once" in result.stdout
