"""The bench's probe: the broker's, the store's and the machine's CPU over a workload."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from martlet.compat.bench.probe import Probe
from martlet.compat.bench.workloads import CORES, _broker
from tests.unit.compat.bench.spinner import SPIN_CPU_S, SPINNER, WAIT_S, wait_spun


def test_the_store_and_the_machine_are_counted_beside_the_broker() -> None:
    with subprocess.Popen([sys.executable, "-c", SPINNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as store:
        assert store.stdout is not None and store.stdin is not None
        try:
            with Probe(os.getpid(), store.pid) as probe:
                wait_spun(store.stdout)
            assert probe.store_cpu_s is not None
            assert SPIN_CPU_S - 0.05 <= probe.store_cpu_s <= SPIN_CPU_S + 0.2  # its start-up and the loop
            assert probe.busy_cpu_s >= probe.store_cpu_s - 0.02  # the machine's includes the store's
            assert 0 < probe.busy_cpu_s <= probe.seconds * CORES + 0.02
            assert probe.cpu_s is not None and probe.cpu_s >= 0
        finally:
            store.stdin.close()
            store.wait(WAIT_S)


def test_an_endpoint_without_a_store_process_reports_none_for_it() -> None:
    with Probe(os.getpid()) as probe:
        pass
    assert probe.store_cpu_s is None
    assert probe.busy_cpu_s >= 0 and probe.seconds > 0


def test_throughput_metrics_per_gigabyte_for_broker_store_and_machine() -> None:
    probe = Probe(1, 2)
    probe.cpu_s, probe.peak_rss_bytes, probe.store_cpu_s = 1.5, 300 << 20, 3.0
    probe.busy_cpu_s, probe.seconds = 2.0 * CORES, 4.0
    metrics = _broker(probe, 2_000_000_000)
    assert metrics["cpu s/GB"] == pytest.approx(0.75)
    assert metrics["store cpu s/GB"] == pytest.approx(1.5)
    assert metrics["machine cpu s/GB"] == pytest.approx(CORES)
    assert metrics["machine busy %"] == pytest.approx(50.0)
    probe.store_cpu_s = None
    assert "store cpu s/GB" not in _broker(probe, 2_000_000_000)
