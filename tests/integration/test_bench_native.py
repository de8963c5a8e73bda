"""`martlet bench --native` end to end at its smallest: one round of every workload with the
native SDK and with confluent-kafka on one Martlet. No figure is asserted (a busy machine moves
them all); that every run measured, and that the report gives each ratio native / confluent, is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

BENCH_TIMEOUT_S = 120.0


def test_native_bench_reports_throughput_latency_and_ratios(tmp_path) -> None:
    out = tmp_path / "native.json"
    done = subprocess.run([sys.executable, "-m", "martlet.cli", "bench", "--native", "--quick", "--rounds", "1",
                           "--produce-mb", "5", "--json", str(out)],
                          capture_output=True, text=True, timeout=BENCH_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    report = json.loads(out.read_text())
    measured = {(row["endpoint"], row["workload"]): row["metrics"] for row in report["rows"]}
    assert set(measured) == {(client, workload) for client in ("native", "confluent")
                             for workload in ("produce-1k", "produce-100b", "latency-1k")}
    assert all(metrics["cpu s"] >= 0 for metrics in measured.values())
    assert {"p50 ms", "p99 ms", "max ms", "persisted p50 ms", "persisted p99 ms"} <= set(measured["native", "latency-1k"])
    ratios = {(entry["workload"], entry["metric"]): entry["native/confluent"]
              for entry in report["medians"] if "native/confluent" in entry}
    targeted = {("produce-1k", "MB/s"), ("produce-100b", "records/s"), ("latency-1k", "p99 ms")}
    assert targeted <= set(ratios)
    # Only the targeted figures must be positive: at --quick's few megabytes the broker's CPU time
    # of a round can read 0.00 s (clock ticks of 10 ms), so a cpu ratio of 0 is a true reading.
    assert all(ratios[key] > 0 for key in targeted)
    assert all(ratio >= 0 for ratio in ratios.values())
    assert "native/confluent" in done.stdout and "produce-1k" in done.stdout


def test_native_bench_refuses_what_it_cannot_take() -> None:
    refused = subprocess.run([sys.executable, "-m", "martlet.cli", "bench", "--native", "--udp"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--native starts its own broker" in refused.stderr
