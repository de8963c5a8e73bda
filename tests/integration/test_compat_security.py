"""`martlet compat --security-config FILE` (issue 39): the suite's four clients run scenarios
over Martlet's SASL_SSL listener from one Kafka client properties file (SCRAM-SHA-512, the
development CA as a PEM truststore), each client applying it its own way; with a wrong password
the run ends at once, before any client starts, with the broker's reason and without the
password."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sasl import PASSWORD, Secured, add_user, start_secured

pytestmark = [pytest.mark.integration, pytest.mark.java]

CLIENTS = ["java", "confluent", "kafka-python", "aiokafka"]
# Quick ones that make every kind of client: admin, producer, consumer, transactional producer,
# read_committed consumer committing for a group, and group members.
SCENARIOS = ["api_versions", "metadata", "produce_consume_gzip", "transactions", "read_committed_position",
             "cooperative_sticky"]
NOT_APPLICABLE = {  # as over plaintext: what these clients cannot express
    ("api_versions", "java"), ("api_versions", "confluent"), ("api_versions", "aiokafka"),
    ("cooperative_sticky", "aiokafka"),
}
RUN_TIMEOUT_S = 300.0  # a bound, not a budget: a cold cache builds the Java driver with Maven first
REFUSED_WITHIN_S = 15.0  # the refused login, from the command's start (Python and librdkafka imports included)
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    found = start_secured(tmp_path_factory.mktemp("martlet-compat-security"))
    try:
        add_user(found.local, "alice", PASSWORD)
        yield found
    finally:
        found.broker.kill()


def security_config(path: Path, secured: Secured, password: str) -> Path:
    path.write_text("\n".join([
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        f'sasl.jaas.config={SCRAM} required username="alice" password="{password}";',
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={secured.certs / 'ca.pem'}",
        "ssl.endpoint.identification.algorithm=https",
    ]) + "\n")
    return path


def compat(secured: Secured, config: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "martlet.cli", "compat", "run", "--bootstrap", secured.addresses["SASL_SSL"],
         "--security-config", str(config), "--clients", ",".join(CLIENTS), "--scenarios", ",".join(SCENARIOS),
         *more],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_the_scenarios_pass_over_sasl_ssl_with_scram(secured: Secured, tmp_path: Path) -> None:
    config = security_config(tmp_path / "client.properties", secured, PASSWORD)
    report = tmp_path / "report.json"
    started = time.monotonic()
    result = compat(secured, config, "--json", str(report))
    print(f"{result.stdout}\nsecured run: {time.monotonic() - started:.1f}s")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    found = json.loads(report.read_text())
    assert found["security_config"] == str(config)
    statuses = {(cell["scenario"], cell["client"]): (cell["status"], cell["reason"]) for cell in found["results"]}
    wrong = {key: why for key, (status, why) in statuses.items()
             if status != ("n/a" if key in NOT_APPLICABLE else "pass")}
    assert not wrong, wrong
    assert set(statuses) == {(scenario, client) for scenario in SCENARIOS for client in CLIENTS}


def test_a_wrong_password_ends_the_run_at_once_with_the_reason(secured: Secured, tmp_path: Path) -> None:
    wrong = "not-" + PASSWORD
    config = security_config(tmp_path / "wrong.properties", secured, wrong)
    started = time.monotonic()
    result = compat(secured, config)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"martlet compat: login refused at {secured.addresses['SASL_SSL']}: "), line
    assert "Authentication failed" in line and "SCRAM-SHA-512" in line, line
    assert result.stdout == "" and wrong not in result.stderr  # no client started; no password shown
    assert elapsed < REFUSED_WITHIN_S, f"refused after {elapsed:.1f}s"
