"""compat/bench/secured.py (`martlet bench --secured`): the brokers' configs, the clients'
settings in the load specs, the ratios and the cost of SASL_SSL, on made-up rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from martlet.broker.config import load
from martlet.compat.bench import cli, workloads
from martlet.compat.bench.runner import bound_listeners
from martlet.compat.bench.secured import (
    SaslSslKafka,
    client_settings,
    martlet_config,
    secured_json,
    secured_report,
    tls_cost,
)
from martlet.compat.bench.workloads import QUICK, WORKLOADS, Context, Endpoint
from martlet.tools.certs import create

ENDPOINTS = ("martlet", "martlet-sasl-ssl", "kafka", "kafka-sasl-ssl")


def one_round(mbps: tuple[float, float, float, float], cpu: tuple[float, float, float, float],
              workload: str = "produce-1k-acks1") -> list[dict[str, Any]]:
    """One round of `bench --secured` for one workload, in its run order."""
    return [{"round": 1, "endpoint": endpoint, "workload": workload, "metrics": {"MB/s": m, "cpu s/GB": c}}
            for endpoint, m, c in zip(ENDPOINTS, mbps, cpu, strict=True)]


def test_the_secured_endpoints_are_compared_with_each_other_and_with_their_plaintext_side() -> None:
    rows = one_round((200, 100, 100, 80), (4, 6, 10, 12))
    cost = tls_cost(rows)
    assert cost["martlet"] == {("produce-1k-acks1", "MB/s"): 0.5, ("produce-1k-acks1", "cpu s/GB"): 1.5}
    assert cost["kafka"] == {("produce-1k-acks1", "MB/s"): 0.8, ("produce-1k-acks1", "cpu s/GB"): 1.2}
    [entry, _] = json.loads(secured_json(rows))["medians"]
    assert entry["ratios"] == {"martlet/kafka": 2.0, "martlet-sasl-ssl/kafka-sasl-ssl": 1.25,
                               "martlet-sasl-ssl/martlet": 0.5, "kafka-sasl-ssl/kafka": 0.8}


def test_the_report_has_both_ratios_then_the_cost_per_system_then_the_raw_rows() -> None:
    lines = secured_report(one_round((200, 100, 100, 80), (4, 6, 10, 12))).splitlines()
    assert lines[1].split() == ["workload", "metric", *ENDPOINTS, "martlet/kafka", "martlet-sasl-ssl/kafka-sasl-ssl",
                                "better"]
    assert lines[2].split()[2:] == ["200.00", "100.00", "100.00", "80.00", "2.00", "1.25", "higher"]
    at = next(i for i, line in enumerate(lines) if line.startswith("cost of SASL_SSL"))
    assert lines[at + 1].split() == ["workload", "metric", "martlet", "kafka", "better"]
    assert lines[at + 2].split() == ["produce-1k-acks1", "MB/s", "0.50", "0.80", "higher"]
    assert lines[at + 3].split() == ["produce-1k-acks1", "cpu", "s/GB", "1.50", "1.20", "lower"]
    assert any(line.startswith("1     martlet-sasl-ssl  produce-1k-acks1  ") for line in lines)  # raw rows, apart


class Recorded:
    """Stands in for the bench's admin calls and load processes: records where each went."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.admin: list[str] = []
        self.specs: list[dict[str, Any]] = []
        monkeypatch.setattr(workloads, "create_topic", lambda bootstrap, *_, **__: self.admin.append(bootstrap))
        monkeypatch.setattr(workloads, "_wait_readable", lambda bootstrap, *_: self.admin.append(bootstrap))
        monkeypatch.setattr(workloads, "run_load", self.run_load)

    def run_load(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.specs.append(spec)
        return {"records": spec.get("records", 0), "bytes": 1000 * spec.get("records", 0), "seconds": 1.0, "failed": 0}


def test_a_secured_endpoints_clients_carry_its_settings_and_its_topics_are_made_on_the_plaintext_side(
        monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = Recorded(monkeypatch)
    settings = client_settings(Path("/certs"))
    endpoint = Endpoint("martlet-sasl-ssl", "localhost:9093", None, client=settings, admin_bootstrap="127.0.0.1:9092")
    ctx = Context(endpoint, QUICK, 1)
    for name in ("produce-1k-acks1", "produce-1k-acksall", "consume-1k"):
        WORKLOADS[name](ctx)
    assert recorded.admin == ["127.0.0.1:9092"] * 3
    assert [spec["bootstrap"] for spec in recorded.specs] == ["localhost:9093"] * 3
    assert all(spec["config"].items() >= settings.items() for spec in recorded.specs)
    assert [spec["config"].get("acks") for spec in recorded.specs] == ["1", "all", None]
    assert settings == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                        "sasl.username": "martlet-bench", "sasl.password": "martlet-bench-secret",
                        "ssl.ca.location": "/certs/ca.pem"}
    assert recorded.specs[0]["topic"] == "bench-martlet-sasl-ssl-produce-1k-acks1-r1"  # not the plaintext side's


def test_a_plaintext_endpoint_is_left_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = Recorded(monkeypatch)
    WORKLOADS["produce-1k-acks1"](Context(Endpoint("kafka", "127.0.0.1:9092", None), QUICK, 1))
    assert recorded.admin == ["127.0.0.1:9092"]
    assert "security.protocol" not in recorded.specs[0]["config"]


def test_martlets_config_serves_local_plaintext_and_sasl_ssl_with_scram_sha_512(tmp_path: Path) -> None:
    create(tmp_path, ["localhost", "127.0.0.1"], 1)
    (tmp_path / "martlet.toml").write_text(martlet_config(tmp_path))
    config = load(str(tmp_path / "martlet.toml"))
    assert config.listeners is not None
    assert [(listener.name, listener.protocol.tls, listener.protocol.sasl) for listener in config.listeners.all] == [
        ("LOCAL", False, False), ("SASL_SSL", True, True)]
    assert config.sasl.enabled_mechanisms == ("SCRAM-SHA-512",)


def test_kafkas_properties_add_a_sasl_ssl_listener_with_scram_sha_512(tmp_path: Path) -> None:
    for name in ("broker.pem", "broker.key"):
        (tmp_path / name).write_text(f"-----BEGIN {name}-----\nabc\n-----END {name}-----\n")
    kafka = SaslSslKafka(tmp_path, 9093)
    kafka.workdir, kafka.port, kafka.controller_port = tmp_path, 9092, 9094
    props = kafka.server_properties()
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094,SASL_SSL://localhost:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://localhost:9093"
    assert props["listener.security.protocol.map"].endswith(",SASL_SSL:SASL_SSL")
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert "ScramLoginModule required" in props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert props["ssl.keystore.key"] == "-----BEGIN broker.key-----\\nabc\\n-----END broker.key-----"
    assert props["file.delete.delay.ms"] == "0"  # the bench's own overrides still apply


def test_the_listener_lines_of_martlet_serve_are_read_by_name() -> None:
    lines = ["martlet listener LOCAL on 127.0.0.1:40001", "martlet listener SASL_SSL on localhost:40002"]
    assert bound_listeners(lines) == {"LOCAL": "127.0.0.1:40001", "SASL_SSL": "localhost:40002"}
    with pytest.raises(RuntimeError, match="did not name its listeners"):
        bound_listeners(["martlet http on 127.0.0.1:8080"])


@pytest.mark.parametrize("flag", [["--hdfs"], ["--bootstrap", "127.0.0.1:9092"], ["--check", "baseline.json"],
                                  ["--martlet-config", "martlet.toml"], ["--cluster"], ["--native"], ["--udp"]])
def test_cli_refuses_what_does_not_go_with_secured(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--secured", *flag]) == 2
    assert f"--secured starts its own brokers with SASL_SSL listeners; it does not take {flag[0]}" in capsys.readouterr().err


def test_cli_with_secured_runs_the_1k_produce_and_consume_workloads_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--secured", "--workloads", "produce-1k-acks1,produce-1k-txn"]) == 2
    assert "choose from produce-1k-acks1, produce-1k-acksall, consume-1k" in capsys.readouterr().err
