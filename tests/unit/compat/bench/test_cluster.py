"""compat/bench --cluster: ratios, scaling, the failover verdict and the exactly-once check,
on made-up rows and acknowledgements (no processes)."""

from __future__ import annotations

import pytest

from martlet.compat.bench import cli
from martlet.compat.bench.cluster import FAILOVER, PRODUCE, ClusterScale, cluster_report, summary
from martlet.compat.bench.failover import Mark, SteadyLoad, check_stored


def produce_rows(**mbps: float) -> list[dict[str, object]]:
    return [{"round": 1, "endpoint": name.replace("_", "-"), "workload": PRODUCE,
             "metrics": {"MB/s": value, "records/s": value * 1000}} for name, value in mbps.items()]


def failover_row(p50_s: float, max_s: float) -> dict[str, object]:
    return {"round": 1, "endpoint": "martlet-3", "workload": FAILOVER,
            "metrics": {"p50 s": p50_s, "max s": max_s, "moved partitions": 9.0, "kills": 3.0, "acknowledged": 5000.0}}


def test_each_martlet_size_is_compared_with_kafka_and_two_brokers_with_one() -> None:
    found = summary(produce_rows(kafka=100.0, martlet_1=40.0, martlet_2=70.0))
    assert found == pytest.approx({"martlet-1 / kafka": 0.4, "martlet-2 / kafka": 0.7, "martlet-2 / martlet-1": 1.75})


@pytest.mark.parametrize(("p50_s", "max_s", "verdict"), [(2.9, 9.5, ": met;"), (3.1, 4.0, ": MISSED;"),
                                                         (1.0, 10.5, ": MISSED;")])
def test_the_failover_line_says_whether_both_targets_are_met(p50_s: float, max_s: float, verdict: str) -> None:
    text = cluster_report([failover_row(p50_s, max_s)], ClusterScale())
    assert verdict in text
    assert "broker.session.timeout.ms = 9 s" in text


def test_a_failed_failover_is_reported_as_failed() -> None:
    row = failover_row(1.0, 1.0) | {"metrics": {}, "error": "RuntimeError: FAILOVER LOST ..."}
    assert "FAILED: RuntimeError: FAILOVER LOST" in cluster_report([row], ClusterScale())


def load_with(acked: dict[int, list[int]]) -> SteadyLoad:
    load = SteadyLoad("127.0.0.1:1", "t", len(acked), 1.0)  # never started
    for partition, sequences in acked.items():
        load.acked[partition] = [(sequence, 0.0) for sequence in sequences]
    return load


def test_failover_time_counts_from_the_kill_to_a_record_produced_after_it() -> None:
    load = load_with({0: [], 1: []})
    # 0 and 1 were produced before the kill; the dead broker's answer to 1 was read after it
    load.acked[0] = [(0, 9.9), (1, 10.004), (2, 11.5), (3, 11.5)]
    load.acked[1] = [(0, 9.9), (1, 12.0)]
    assert load.wait_acks_after(Mark(10.0, (2, 1)), [0, 1], timeout_s=1.0) == pytest.approx({0: 1.5, 1: 2.0})


def logged(sequences: list[int]) -> list[tuple[int, int]]:
    """Records with these sequences at offsets 0, 1, 2, ..."""
    return [(sequence, offset) for offset, sequence in enumerate(sequences)]


def test_every_acknowledged_record_once_in_order_passes() -> None:
    # 3 was sent but never acknowledged: stored or not, both are allowed
    assert check_stored(load_with({0: [0, 1, 2], 1: [0]}), {0: logged([0, 1, 2, 3]), 1: logged([0])}) == []


@pytest.mark.parametrize(("stored", "problem"), [([0, 2], "1 acknowledged records missing"),
                                                 ([0, 1, 1, 2], "1 stored more than once (1 at offsets [1, 2])"),
                                                 ([0, 2, 1], "out of produce order")])
def test_a_lost_duplicated_or_reordered_record_is_a_problem(stored: list[int], problem: str) -> None:
    problems = check_stored(load_with({0: [0, 1, 2]}), {0: logged(stored)})
    assert len(problems) == 1 and problem in problems[0]


@pytest.mark.parametrize("argv", [["--cluster", "--check", "baseline.json"], ["--cluster", "--bootstrap", "h:1"],
                                  ["--kills", "3"], ["--cluster", "--kills", "0"],
                                  ["--cluster", "--workloads", "produce-1k-acks1"]])
def test_options_that_do_not_go_with_the_cluster_bench_are_refused(argv: list[str]) -> None:
    assert cli.main(argv) == 2
