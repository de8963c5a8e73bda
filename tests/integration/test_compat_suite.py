"""`martlet compat`'s suite end to end: it must pass completely against the reference Apache
Kafka (that keeps the scenarios honest), and against Martlet every failure must be a known
finding listed in compat/FINDINGS.md, with no listed entry passing.

MARTLET_COMPAT_SCENARIOS=a,b runs only those scenarios (say, the ones being written):
`MARTLET_COMPAT_SCENARIOS=read_committed_lso pytest tests/integration/test_compat_suite.py`.
"""

from __future__ import annotations

import os
import time

import pytest

from martlet.compat import report, runner
from martlet.compat.reference.kafka import ReferenceKafka

pytestmark = pytest.mark.integration

CLIENTS = ["java", "confluent", "kafka-python", "aiokafka"]
SUITE_BUDGET_S = 300.0  # the whole suite against one endpoint (issue: under 5 minutes)


def chosen_scenarios() -> list[str] | None:
    """The scenarios MARTLET_COMPAT_SCENARIOS names (comma-separated), or None: all."""
    names = [n.strip() for n in os.environ.get("MARTLET_COMPAT_SCENARIOS", "").split(",") if n.strip()]
    return names or None


def run_suite(bootstrap: str, findings: list[report.Finding] | None) -> runner.Run:
    started = time.monotonic()
    scenarios = chosen_scenarios()
    if findings is not None and scenarios is not None:
        findings = [f for f in findings if f.scenario in scenarios]
    result = runner.run(bootstrap, CLIENTS, scenarios, findings=findings)
    elapsed = time.monotonic() - started
    print(report.table(result.cells, result.scenarios, result.clients))
    print(f"{report.summary(result.cells)} in {elapsed:.0f}s")
    assert elapsed < SUITE_BUDGET_S, f"the suite took {elapsed:.0f}s"
    unbuilt = [c.reason for c in result.cells if c.client == "java" and "not built" in (c.reason or "")]
    assert not unbuilt, f"the Java driver must run here (CI installs Java and Maven): {unbuilt[:1]}"
    return result


@pytest.mark.java
def test_suite_passes_completely_against_the_reference_kafka() -> None:
    """On a reference broker of its own, as a user would point the suite at a fresh endpoint: the
    session's shared one carries what earlier tests changed (once, late in a CI run, its log
    cleaner compacted nothing for 6 minutes, in all four compaction cells)."""
    with ReferenceKafka() as kafka:
        result = run_suite(kafka.bootstrap, findings=None)
        failed = [f"{c.scenario} / {c.client}: {c.reason}" for c in result.cells if c.status != report.PASS
                  and c.status != report.NOT_APPLICABLE]
        assert not failed, "\n".join(failed) + "\n" + kafka.log_report()
    passed = {c.scenario for c in result.cells if c.status == report.PASS}
    assert passed == set(result.scenarios), f"no client passed: {sorted(set(result.scenarios) - passed)}"


@pytest.mark.java
def test_suite_against_martlet_fails_only_where_findings_say(martlet) -> None:
    result = run_suite(martlet.bootstrap, findings=report.load_findings())
    assert not result.findings_problems, result.findings_problems
    bad = [f"{c.scenario} / {c.client}: {c.status}: {c.reason}" for c in report.unexpected(result.cells)]
    assert not bad, "\n".join(bad)
