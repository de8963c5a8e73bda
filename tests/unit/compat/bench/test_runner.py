"""compat/bench: medians, ratios, the regression check and the report, on made-up rows."""

from __future__ import annotations

import pytest

from martlet.compat.bench import cli
from martlet.compat.bench.runner import check, medians, ratios, report
from martlet.compat.bench.workloads import percentile


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
    assert "produce-1k-acks1      MB/s" in text and "1.00  higher" in text
    assert text.count("produce-1k-acks1") == 1 + 6  # the median line and six raw rows


def test_nearest_rank_percentiles() -> None:
    samples = [float(i) for i in range(1, 1001)]
    assert (percentile(samples, 50), percentile(samples, 99), percentile(samples, 99.9)) == (500, 990, 999)
    with pytest.raises(RuntimeError):
        percentile([], 50)


def test_cli_refuses_an_unknown_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--workloads", "produce-1k-acks1,nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err
