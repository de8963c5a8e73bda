"""Regression guard (issue 6): a short `martlet bench` against a fresh Martlet and a fresh
Apache Kafka on this machine. It fails when a throughput ratio Martlet / Kafka falls below
half of the figure recorded in compat/bench/baseline.json, so a change that makes the hot
path much slower is seen in CI. It is a ratio of two systems measured in the same run, not
a timed test: a slow or busy machine slows both."""

from __future__ import annotations

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
        [sys.executable, "-m", "martlet.gateway.cli", "bench", "--quick", "--rounds", "3",
         "--workloads", GUARDED, "--check", str(BASELINE), "--json", str(tmp_path / "bench.json")],
        capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    print(result.stdout)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
