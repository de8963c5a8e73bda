"""compat/report.py: comparing observations, known findings, the table, JSON and summary."""

from __future__ import annotations

import json

import pytest

from martlet.compat.report import (
    FAIL,
    FIXED,
    KNOWN,
    NOT_APPLICABLE,
    PASS,
    Cell,
    Finding,
    apply_findings,
    combine,
    differences,
    load_findings,
    parse_findings,
    summary,
    table,
    to_json,
    unexpected,
)

FINDINGS_TEXT = """\
# Known gaps

prose that is not parsed: 9 | nope | * | ignored

```findings
# rank | scenario | client | reason
1 | transactions | * | not served
2 | static_membership | java | rebalances
```
"""


def cell(status: str, scenario: str = "s", client: str = "c", **observations: object) -> Cell:
    return Cell(scenario, client, status, "why", observations=dict(observations) or None)


def test_differences_skip_volatile_keys_and_name_the_path() -> None:
    ours = {"offsets": [0, 1, 2], "_topic_id": "a", "nested": {"x": 1, "_ts": 5}}
    theirs = {"offsets": [0, 1, 3], "_topic_id": "b", "nested": {"x": 1, "_ts": 9}}
    assert differences(ours, theirs) == ["offsets[2]: 2 vs 3 (reference)"]


def test_differences_report_missing_keys_and_length_changes() -> None:
    assert differences({"a": 1}, {"b": 1}) == ["a: 1 vs missing (reference)", "b: missing vs 1 (reference)"]
    assert differences({"a": [1]}, {"a": [1, 2]}) == ["a: [1] vs [1, 2] (reference)"]
    assert differences({"a": {"_x": 1}}, {"a": {"_x": 2}}) == []


def test_combine_without_reference_keeps_the_cell() -> None:
    ours = cell(PASS, offsets=[0])
    assert combine(ours, None) is ours and ours.status == PASS


@pytest.mark.parametrize(("ours", "theirs", "status", "reason_start"), [
    (PASS, PASS, PASS, "why"),
    (PASS, FAIL, FAIL, "the reference failed"),
    (FAIL, PASS, FAIL, "why"),
    (NOT_APPLICABLE, PASS, NOT_APPLICABLE, "why"),
    (PASS, NOT_APPLICABLE, NOT_APPLICABLE, "why"),
])
def test_combine_statuses(ours: str, theirs: str, status: str, reason_start: str) -> None:
    combined = combine(cell(ours, offsets=[0]), cell(theirs, offsets=[0]))
    assert combined.status == status and combined.reason.startswith(reason_start)


def test_combine_fails_on_different_observations() -> None:
    combined = combine(cell(PASS, error="NONE", _id="x"), cell(PASS, error="INVALID_PARTITIONS", _id="y"))
    assert combined.status == FAIL
    assert combined.reason == 'differs from the reference: error: "NONE" vs "INVALID_PARTITIONS" (reference)'
    assert combined.reference_observations == {"error": "INVALID_PARTITIONS", "_id": "y"}


def test_parse_findings_reads_only_the_fenced_block() -> None:
    assert parse_findings(FINDINGS_TEXT) == [Finding(1, "transactions", "*", "not served"),
                                             Finding(2, "static_membership", "java", "rebalances")]


def test_parse_findings_rejects_a_malformed_line() -> None:
    with pytest.raises(ValueError, match="rank \\| scenario \\| client \\| reason"):
        parse_findings("```findings\none | transactions | * | x\n```\n")


def test_the_shipped_findings_parse_and_name_real_scenarios() -> None:
    from martlet.compat.scenarios import SCENARIOS

    findings = load_findings()  # empty once every gap is closed
    assert {f.scenario for f in findings} <= set(SCENARIOS)
    assert [f.rank for f in findings] == sorted(f.rank for f in findings)


def test_apply_findings_turns_listed_failures_known_and_listed_passes_fixed() -> None:
    cells = [cell(FAIL, "transactions", "java"), cell(FAIL, "transactions", "aiokafka"),
             cell(PASS, "static_membership", "java"), cell(FAIL, "static_membership", "confluent"),
             cell(NOT_APPLICABLE, "transactions", "kafka-python")]
    problems = apply_findings(cells, parse_findings(FINDINGS_TEXT))
    assert [c.status for c in cells] == [KNOWN, KNOWN, FIXED, FAIL, NOT_APPLICABLE]
    assert cells[0].reason == "finding #1: not served [observed: why]"
    assert "remove the entry" in cells[2].reason
    assert [c.status for c in unexpected(cells)] == [FIXED, FAIL]
    assert problems == []


def test_apply_findings_reports_entries_for_unknown_scenarios() -> None:
    problems = apply_findings([cell(PASS, "s", "c")], [Finding(3, "gone", "*", "r")])
    assert problems == ["finding #3 names unknown scenario 'gone'"]


def test_table_shows_every_cell_and_the_reason_of_each_that_did_not_pass() -> None:
    cells = [cell(PASS, "metadata", "java"), Cell("metadata", "aiokafka", NOT_APPLICABLE, "no such API"),
             Cell("transactions", "java", FAIL, "timed out"), Cell("transactions", "aiokafka", KNOWN, "finding #1")]
    text = table(cells, ["metadata", "transactions"], ["java", "aiokafka"])
    lines = text.splitlines()
    assert lines[0].split() == ["scenario", "java", "aiokafka"]
    assert lines[2].split() == ["metadata", "pass", "n/a"]
    assert lines[3].split() == ["transactions", "FAIL", "known"]
    assert "  metadata / aiokafka: n/a: no such API" in lines
    assert "  transactions / java: fail: timed out" in lines
    assert not any("metadata / java" in line for line in lines)


def test_summary_counts_known_as_failed_and_fixed_as_passed() -> None:
    cells = [cell(PASS), cell(FIXED), cell(FAIL), cell(KNOWN), cell(KNOWN), cell(NOT_APPLICABLE)]
    assert summary(cells) == "2 passed, 3 failed"


def test_json_report_holds_every_cell_and_the_counts() -> None:
    cells = [cell(PASS, offsets=[0, 1]), Cell("t", "java", FAIL, "boom")]
    document = json.loads(to_json(cells, {"bootstrap": "h:1", "reference": None}))
    assert document["bootstrap"] == "h:1" and document["summary"] == "1 passed, 1 failed"
    assert document["counts"][PASS] == 1 and document["counts"][FAIL] == 1
    assert document["results"][0]["observations"] == {"offsets": [0, 1]}
    assert document["results"][1] == {"scenario": "t", "client": "java", "status": FAIL, "reason": "boom",
                                      "seconds": 0.0, "observations": None, "reference_observations": None,
                                      "differences": []}
