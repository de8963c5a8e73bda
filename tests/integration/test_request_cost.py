"""compat/bench/request_cost.py (issue 47): the in-process CPU cost per request runs, and the
frames it falls back to on trees older than the codec's request writer and records/ are the
bytes those write. No figure is asserted: a few requests on a busy machine say nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from martlet.compat.bench import request_cost
from martlet.protocol.codec import build, encode_request, request_type
from martlet.records.build import NewRecord, build_batch

pytestmark = pytest.mark.integration

RUN_TIMEOUT_S = 60.0
MEASURED = ("produce", "fetch", "fetch-uncommitted", "metadata")


def test_a_short_run_gives_a_positive_cost_for_every_kind(tmp_path) -> None:
    out = tmp_path / "cost.json"
    result = subprocess.run(
        [sys.executable, "-m", "martlet.compat.bench.request_cost", "--requests", "50", "--repeats", "3",
         "--warmup", "20", "--json", str(out)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    figures = json.loads(out.read_text())
    assert set(figures["kinds"]) == set(MEASURED)
    for kind in MEASURED:
        assert figures["kinds"][kind]["cpu_us"] > 0, kind
        assert figures["kinds"][kind]["best_us"] > 0, kind
        assert kind in result.stdout


def test_the_hand_built_batch_is_the_one_records_builds() -> None:
    values = [bytes([i]) * request_cost.RECORD_BYTES for i in range(request_cost.RECORDS_PER_BATCH)]
    now_ms = int(time.time() * 1000)
    expected = bytes(build_batch([NewRecord(None, value, now_ms) for value in values]))
    assert request_cost.hand_built_batch(values, now_ms) == expected


def test_the_kio_request_is_the_one_the_codec_writes() -> None:
    body = build(request_type(request_cost.METADATA, request_cost.METADATA_VERSION),
                 {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
    assert request_cost.kio_request(body, 7) == encode_request(body, 7, request_cost.CLIENT_ID)[4:]


BASELINE = Path(__file__).parents[2] / "compat" / "bench" / "request_cost_baseline.json"
GUARD_TIMEOUT_S = 120.0


def test_cpu_per_request_stays_within_a_quarter_of_the_recorded_figures(tmp_path) -> None:
    """The guard (issue 47, point 3): CPU per Produce, Fetch and Metadata request in-process, in
    units of a fixed piece of pure-Python work timed beside it (so a slower or busier machine
    moves both), against compat/bench/request_cost_baseline.json; 25% above it fails. The
    baseline changes only in a commit that says why."""
    result = subprocess.run(
        [sys.executable, "-m", "martlet.compat.bench.request_cost", "--requests", "300", "--repeats", "9",
         "--check", str(BASELINE)],
        capture_output=True, text=True, timeout=GUARD_TIMEOUT_S)
    print(result.stdout)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def test_the_guard_fails_a_cost_above_the_margin() -> None:
    figure = request_cost.Figure(cpu_us=60.0, best_us=60.0, loop_thread_us=60.0, samples_us=[60.0, 60.0, 60.0])
    measured = request_cost.Measured({"produce": figure}, 1.0, 1000.0, 1000.0, [1000.0, 1000.0, 1000.0])
    assert request_cost.check(measured, {"per_reference": {"produce": 0.05}}) == []  # 1.2x: within
    assert request_cost.check(measured, {"per_reference": {"produce": 0.04}})  # 1.5x: above


def test_idle_between_requests_is_taken_off_with_the_harness(tmp_path) -> None:
    """--idle-us blocks the thread after each request; the harness blocks as long, so what
    is left is still the requests' own CPU (a positive figure), not the pause."""
    out = tmp_path / "cold.json"
    result = subprocess.run(
        [sys.executable, "-m", "martlet.compat.bench.request_cost", "--requests", "30", "--repeats", "3",
         "--warmup", "10", "--kinds", "metadata", "--idle-us", "200", "--json", str(out)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    figures = json.loads(out.read_text())
    assert figures["harness_us"] > 0 and figures["kinds"]["metadata"]["best_us"] > 0
