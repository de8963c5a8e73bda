"""compat/runner.py and the CLI entry, with a fake driver: no sockets, no sleeps."""

from __future__ import annotations

from typing import Any

import pytest

from martlet.compat import cli, runner
from martlet.compat.clients import registry
from martlet.compat.clients.base import Unsupported
from martlet.compat.clients.security import ConfigError, LoginRefused
from martlet.compat.report import FAIL, NOT_APPLICABLE, PASS
from martlet.compat.scenarios import SCENARIOS, Context


class FakeDriver:
    name = "fake"

    def __init__(self, bootstrap: str, security: str | None = None) -> None:
        self.bootstrap, self.security = bootstrap, security
        self.deleted: list[str] = []
        self.closed = False

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> str:
        return "NONE"

    def delete_topic(self, topic: str) -> str:
        self.deleted.append(topic)
        return "NONE"

    def api_versions(self) -> dict[str, list[int]]:
        raise Unsupported("fake has none")

    def close(self) -> None:
        self.closed = True


def passing(driver: Any, ctx: Context) -> dict[str, Any]:
    ctx.topic(driver, "t")
    return {"seen": ctx.bootstrap.endswith(":1"), "_volatile": ctx.bootstrap}


def failing(driver: Any, ctx: Context) -> dict[str, Any]:
    raise AssertionError("expected 1, got 2")


def crashing(driver: Any, ctx: Context) -> dict[str, Any]:
    raise KeyError("surprise")


def not_applicable(driver: Any, ctx: Context) -> dict[str, Any]:
    return {"versions": driver.api_versions()}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[FakeDriver]:
    made: list[FakeDriver] = []

    def make(bootstrap: str, security: str | None = None) -> FakeDriver:
        made.append(FakeDriver(bootstrap, security))
        return made[-1]

    monkeypatch.setitem(registry.FACTORIES, "fake", make)
    for fn in (passing, failing, crashing, not_applicable):
        monkeypatch.setitem(SCENARIOS, fn.__name__, fn)
    return made


def test_each_outcome_becomes_its_status_and_topics_are_deleted(fake: list[FakeDriver]) -> None:
    result = runner.run("h:1", ["fake"], ["passing", "failing", "crashing", "not_applicable"])
    statuses = {c.scenario: (c.status, c.reason) for c in result.cells}
    assert statuses["passing"] == (PASS, "expectations held")
    assert statuses["failing"] == (FAIL, "expected 1, got 2")
    assert statuses["crashing"][0] == FAIL and statuses["crashing"][1].startswith("KeyError: 'surprise'")
    assert statuses["not_applicable"] == (NOT_APPLICABLE, "fake has none")
    [driver] = fake
    assert driver.closed and len(driver.deleted) == 1 and driver.deleted[0].endswith("-passing-t")


def test_reference_differences_ignore_volatile_keys(fake: list[FakeDriver]) -> None:
    same = runner.run("h:1", ["fake"], ["passing"], reference="r:1")
    assert [c.status for c in same.cells] == [PASS]
    different = runner.run("h:1", ["fake"], ["passing"], reference="r:2")
    assert different.cells[0].status == FAIL
    assert different.cells[0].reason == "differs from the reference: seen: true vs false (reference)"


def test_lanes_of_one_client_share_its_scenarios_each_run_once(monkeypatch: pytest.MonkeyPatch,
                                                               fake: list[FakeDriver]) -> None:
    monkeypatch.setitem(runner.LANES, "fake", 2)
    names = ["passing", "failing", "crashing", "not_applicable"]
    result = runner.run("h:1", ["fake"], names, reference="r:1")
    assert [c.scenario for c in result.cells] == names  # in scenario order, one cell each
    assert [c.status for c in result.cells] == [PASS, FAIL, FAIL, NOT_APPLICABLE]
    assert len(fake) == 4 and all(driver.closed for driver in fake)  # two lanes per endpoint
    assert sum(len(driver.deleted) for driver in fake) == 2  # "passing" ran once on each endpoint


def test_an_unavailable_client_is_not_applicable_for_every_scenario(monkeypatch: pytest.MonkeyPatch,
                                                                     fake: list[FakeDriver]) -> None:
    monkeypatch.setattr(registry, "unavailable", lambda name: "java driver not built (test)")
    result = runner.run("h:1", ["java"], ["passing", "failing"])
    assert [(c.client, c.status, c.reason) for c in result.cells] == [
        ("java", NOT_APPLICABLE, "java driver not built (test)")] * 2


def test_unknown_scenarios_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenarios: nope"):
        runner.run("h:1", ["fake"], ["nope"])


def test_cli_treats_leading_flags_as_the_run_command(fake: list[FakeDriver], capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Any) -> None:
    report = tmp_path / "report.json"
    code = cli.main(["compat", "--bootstrap", "h:1", "--clients", "fake", "--scenarios", "passing,failing",
                     "--json", str(report)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[-1] == "1 passed, 1 failed"
    assert '"summary": "1 passed, 1 failed"' in report.read_text()


def test_cli_expect_findings_accepts_listed_failures(fake: list[FakeDriver], capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Any) -> None:
    findings = tmp_path / "FINDINGS.md"
    findings.write_text("```findings\n1 | failing | fake | a known gap\n```\n")
    args = ["--bootstrap", "h:1", "--clients", "fake", "--scenarios", "passing,failing", "--expect-findings",
            "--findings", str(findings)]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 1 failed"
    findings.write_text("```findings\n1 | passing | fake | fixed meanwhile\n2 | failing | fake | gap\n```\n")
    assert cli.main(args) == 1  # a listed entry that passes must be removed


def test_default_clients_are_all_four() -> None:
    assert runner.default_clients() == ["java", "confluent", "kafka-python", "aiokafka"]


# -- --security-config ------------------------------------------------------------------------

@pytest.fixture
def logins(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (endpoint, security config) pairs the run logs in with before its lanes start."""
    made: list[tuple[str, str]] = []
    monkeypatch.setattr(registry, "check_login", lambda bootstrap, security: made.append((bootstrap, security)))
    return made


@pytest.mark.parametrize(("flags", "reference_security"), [
    ([], "main.properties"),
    (["--reference-security-config", "none"], None),
    (["--reference-security-config", "ref.properties"], "ref.properties"),
])
def test_every_client_of_an_endpoint_gets_its_security_config(fake: list[FakeDriver], logins: list[tuple[str, str]],
                                                              tmp_path: Any, flags: list[str],
                                                              reference_security: str | None) -> None:
    for name in ("main.properties", "ref.properties"):
        (tmp_path / name).write_text("security.protocol=PLAINTEXT\n")
    files = {name: str(tmp_path / name) for name in ("main.properties", "ref.properties")}
    flags = [files.get(flag, flag) for flag in flags]
    report = tmp_path / "report.json"
    code = cli.main(["--bootstrap", "h:1", "--reference", "r:1", "--clients", "fake", "--scenarios", "passing",
                     "--security-config", files["main.properties"], "--json", str(report), *flags])
    assert code == 0
    expected = {"h:1": files["main.properties"], "r:1": files.get(reference_security or "")}
    assert {driver.bootstrap: driver.security for driver in fake} == expected
    assert logins == [(endpoint, security) for endpoint, security in expected.items() if security]
    assert f'"security_config": "{files["main.properties"]}"' in report.read_text()


def test_without_a_security_config_nothing_is_checked(fake: list[FakeDriver], logins: list[tuple[str, str]]) -> None:
    assert [c.status for c in runner.run("h:1", ["fake"], ["passing"]).cells] == [PASS]
    assert fake[0].security is None and logins == []


def test_a_file_a_client_cannot_use_is_a_usage_error_before_any_client_starts(
        fake: list[FakeDriver], logins: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    def refuse(client: str, security: str) -> None:
        raise ConfigError(f"{security}: ssl.keystore.type must be PEM")

    monkeypatch.setattr(registry, "check_security", refuse)
    path = tmp_path / "client.properties"
    code = cli.main(["--bootstrap", "h:1", "--clients", "fake", "--scenarios", "passing", "--security-config", str(path)])
    assert code == 2 and fake == [] and logins == []
    assert capsys.readouterr().err.strip() == (
        f"martlet compat: fake cannot use the security config {path}: ssl.keystore.type must be PEM")


def test_a_missing_file_is_a_usage_error(fake: list[FakeDriver], logins: list[tuple[str, str]],
                                         capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    code = cli.main(["--bootstrap", "h:1", "--clients", "fake", "--scenarios", "passing",
                     "--security-config", str(tmp_path / "missing.properties")])
    assert code == 2 and fake == []
    assert "cannot read it" in capsys.readouterr().err


def test_a_refused_login_ends_the_run_before_any_client_starts(fake: list[FakeDriver], monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    def refuse(bootstrap: str, security: str) -> None:
        raise LoginRefused(f"login refused at {bootstrap}: Authentication failed")

    monkeypatch.setattr(registry, "check_login", refuse)
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=PLAINTEXT\n")
    code = cli.main(["--bootstrap", "h:1", "--clients", "fake", "--scenarios", "passing", "--security-config", str(path)])
    assert code == 1 and fake == []
    assert capsys.readouterr().err.strip() == "martlet compat: login refused at h:1: Authentication failed"


def unauthorized(driver: Any, ctx: Context) -> dict[str, Any]:
    raise AssertionError("create topic t (1 partitions, {}): TOPIC_AUTHORIZATION_FAILED")


def test_over_a_secured_endpoint_a_refused_authorization_is_not_applicable(
        fake: list[FakeDriver], logins: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The endpoint's ACLs, not the client or the broker, decide it; without a security config
    it stays a failure."""
    monkeypatch.setitem(SCENARIOS, "unauthorized", unauthorized)
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=PLAINTEXT\n")
    secured = runner.run("h:1", ["fake"], ["unauthorized", "failing"], security=str(path))
    assert [(c.status, c.reason) for c in secured.cells] == [
        (NOT_APPLICABLE, "the security config's user is not authorized for this (TOPIC_AUTHORIZATION_FAILED): "
                         "create topic t (1 partitions, {}): TOPIC_AUTHORIZATION_FAILED"),
        (FAIL, "expected 1, got 2")]
    assert [c.status for c in runner.run("h:1", ["fake"], ["unauthorized"]).cells] == [FAIL]
