"""compat/bench: medians, ratios, the regression check and the report, on made-up rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from martlet.compat.bench import cli
from martlet.compat.bench.runner import check, logged_trouble, medians, ratios, report, to_json
from martlet.compat.bench.workloads import WORKLOADS, percentile, transaction_metrics


def rows(martlet: list[float], kafka: list[float], metric: str = "MB/s",
         workload: str = "produce-1k-acks1") -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for round_no, (m, k) in enumerate(zip(martlet, kafka), start=1):
        out.append({"round": round_no, "endpoint": "martlet", "workload": workload, "metrics": {metric: m}})
        out.append({"round": round_no, "endpoint": "kafka", "workload": workload, "metrics": {metric: k}})
    return out


def test_medians_take_the_middle_round_per_endpoint() -> None:
    table = medians(rows([10, 90, 30], [100, 50, 70]))
    assert table[("produce-1k-acks1", "MB/s")] == {"martlet": 30, "kafka": 70}


def test_ratio_is_martlet_over_kafka() -> None:
    assert ratios(rows([45, 45, 45], [50, 50, 50]))[("produce-1k-acks1", "MB/s")] == pytest.approx(0.9)


def test_check_fails_below_half_the_recorded_ratio() -> None:
    recorded = {"produce-1k-acks1 MB/s": 1.0}
    assert check(rows([51, 51, 51], [100, 100, 100]), recorded) == []
    failures = check(rows([49, 49, 49], [100, 100, 100]), recorded)
    assert len(failures) == 1 and "below half" in failures[0]


def test_check_for_lower_is_better_fails_above_twice_the_recorded_ratio() -> None:
    recorded = {"latency-1k p99 ms": 1.5}
    assert check(rows([2.9], [1.0], "p99 ms", "latency-1k"), recorded) == []
    assert check(rows([3.1], [1.0], "p99 ms", "latency-1k"), recorded)


def test_check_names_a_recorded_metric_that_was_not_measured() -> None:
    assert check(rows([1], [1]), {"consume-1k MB/s": 1.0}) == ["consume-1k MB/s: not measured"]


def test_report_shows_medians_ratios_and_raw_rows() -> None:
    text = report(rows([10, 20, 30], [20, 20, 20]))
    assert "produce-1k-acks1        MB/s" in text and "1.00  higher" in text
    assert "martlet/kafka" in text and "hdfs" not in text
    assert text.count("produce-1k-acks1") == 1 + 6  # the median line and six raw rows


def three(hdfs: float, martlet: float, kafka: float, metric: str = "MB/s",
          workload: str = "produce-1k-acksall-16p") -> list[dict[str, object]]:
    """One round of `bench --hdfs`, in its run order."""
    return [{"round": 1, "endpoint": endpoint, "workload": workload, "metrics": {metric: value}}
            for endpoint, value in (("martlet-hdfs", hdfs), ("martlet", martlet), ("kafka", kafka))]


def test_with_hdfs_each_martlet_gets_its_own_ratio_to_kafka() -> None:
    rows = three(20, 60, 80)
    key = ("produce-1k-acksall-16p", "MB/s")
    assert ratios(rows)[key] == pytest.approx(0.75)  # --check still means Martlet on local disk
    assert ratios(rows, "martlet-hdfs")[key] == pytest.approx(0.25)
    [entry] = json.loads(to_json(rows))["medians"]
    assert entry["ratios"] == {"martlet-hdfs/kafka": pytest.approx(0.25), "martlet/kafka": pytest.approx(0.75)}


def test_check_with_hdfs_guards_martlet_on_local_disk() -> None:
    recorded = {"produce-1k-acksall-16p MB/s": 1.0}
    assert check(three(10, 60, 100), recorded) == []  # HDFS at 0.1x does not trip the local guard
    assert check(three(100, 40, 100), recorded)


def test_report_with_hdfs_has_a_column_and_a_ratio_per_endpoint() -> None:
    text = report(three(20, 60, 80) + three(2, 6, 4, "p99 ms"))
    head, mbps, p99 = text.splitlines()[1:4]
    assert head.split() == ["workload", "metric", "martlet-hdfs", "martlet", "kafka",
                            "martlet-hdfs/kafka", "martlet/kafka", "better"]
    assert mbps.split()[2:] == ["20.00", "60.00", "80.00", "0.25", "0.75", "higher"]
    assert p99.split()[3:] == ["2.00", "6.00", "4.00", "0.50", "1.50", "lower"]
    assert "martlet-hdfs  produce-1k-acksall-16p" in text  # the raw rows keep their columns apart


def test_report_of_one_outside_endpoint_has_no_ratio() -> None:
    text = report([{"round": 1, "endpoint": "endpoint", "workload": "consume-1k", "metrics": {"MB/s": 5.0}}])
    assert "/kafka" not in text and "better" not in text


def test_nearest_rank_percentiles() -> None:
    samples = [float(i) for i in range(1, 1001)]
    assert (percentile(samples, 50), percentile(samples, 99), percentile(samples, 99.9)) == (500, 990, 999)
    with pytest.raises(RuntimeError):
        percentile([], 50)


def test_cli_refuses_an_unknown_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--workloads", "produce-1k-acks1,nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


@pytest.mark.parametrize("workloads", ["consume-1k", "consume-1k,produce-1k-acks1", "produce-1k-acksall,consume-1k"])
def test_cli_refuses_consume_without_the_produce_it_reads_back_before_it(
        workloads: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--workloads", workloads]) == 2  # at once, not after every other workload ran
    assert "list produce-1k-acks1 before it" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--hdfs"], ["--martlet-config", "martlet.toml"]])
def test_cli_refuses_options_for_brokers_it_does_not_start_with_bootstrap(
        flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bootstrap", "127.0.0.1:9092", *flag]) == 2
    assert f"does not take {flag[0]}" in capsys.readouterr().err


def test_the_16_partition_workload_follows_the_1_partition_one() -> None:
    names = list(WORKLOADS)
    assert names.index("produce-1k-acksall-16p") == names.index("produce-1k-acksall") + 1


def test_transactional_produce_reports_throughput_and_commit_percentiles() -> None:
    result = {"records": 4000, "bytes": 4_000_000, "seconds": 2.0, "commit_us": [float(i) * 1000 for i in range(100, 0, -1)]}
    assert transaction_metrics(result) == {"MB/s": 2.0, "records/s": 2000.0,
                                           "commit p50 ms": 50.0, "commit p99 ms": 99.0}


def test_commit_percentiles_are_better_lower_and_shown_in_the_report() -> None:
    text = report(rows([12.0], [6.0], "commit p99 ms", "produce-1k-txn"))
    assert "produce-1k-txn          commit p99 ms" in text and "2.00  lower" in text


def test_a_brokers_warnings_and_errors_are_counted_with_the_first_distinct_ones(tmp_path: Path) -> None:
    log = tmp_path / "martlet.log"
    lines = [{"level": "info", "message": "martlet listening"},
             {"level": "warning", "message": "t/0: persisting failed, retrying"},
             {"level": "warning", "message": "t/0: persisting failed, retrying"},
             {"level": "error", "message": "the store lost persisted data"},
             {"level": "warning", "message": "t/1: persisting failed, retrying"},
             {"level": "warning", "message": "t/2: persisting failed, retrying"}]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\nthread panicked (not JSON)\n")
    said = logged_trouble(log)
    assert said.startswith("4 warning lines, 1 error line; first:")
    assert said.splitlines()[1:] == ["  warning: t/0: persisting failed, retrying",
                                     "  error: the store lost persisted data",
                                     "  warning: t/1: persisting failed, retrying"]
    log.write_text(json.dumps(lines[0]) + "\n")
    assert logged_trouble(log) == ""
