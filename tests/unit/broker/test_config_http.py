"""[http]'s security keys (issue 39): tls, login, metrics_open and session_ms are read and
checked; HTTPS needs the [tls] certificate and key; an HTTP port other machines reach counts as
secured only with both TLS and login; a port without login beside authenticating listeners is
warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from martlet.broker.config import ConfigError, exposed, from_document, open_http
from martlet.gateway.http.auth import HttpSettings
from tests.support.tls import make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_section(certs: Path) -> dict[str, str]:
    return {"certificate": str(certs / "broker.pem"), "key": str(certs / "broker.key")}


def test_the_defaults_leave_the_port_as_it_was() -> None:
    assert from_document({}).http == HttpSettings(tls=False, login=False, metrics_open=False, session_ms=3_600_000)


def test_the_keys_are_read(certs: Path) -> None:
    config = from_document({"tls": tls_section(certs),
                            "http": {"tls": True, "login": True, "metrics_open": True, "session_ms": 60_000}})
    assert config.http == HttpSettings(tls=True, login=True, metrics_open=True, session_ms=60_000)


@pytest.mark.parametrize(("http", "message"), [
    ({"tls": True}, r"\[http\] tls: HTTPS is served with \[tls\] certificate and key"),
    ({"login": "yes"}, r"\[http\] login: expected bool"),
    ({"session_ms": 0}, r"\[http\] session_ms: expected > 0"),
    ({"session_ms": 1.5}, r"\[http\] session_ms: expected int"),
    ({"logins": True}, "unknown key 'logins'"),
])
def test_bad_values_are_refused(http: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_document({"http": http})


def test_https_with_files_that_do_not_load_is_refused(tmp_path: Path) -> None:
    (tmp_path / "broker.pem").write_text("not a certificate")
    (tmp_path / "broker.key").write_text("not a key")
    with pytest.raises(ConfigError, match=r"\[http\] tls: \[tls\] cannot load"):
        from_document({"tls": tls_section(tmp_path), "http": {"tls": True}})


def test_a_port_other_machines_reach_is_secured_only_with_tls_and_login(certs: Path) -> None:
    def doors(**http: object) -> list[str]:
        return exposed(from_document({"tls": tls_section(certs), "http": {"listen": "0.0.0.0:9644", **http}}))

    assert doors() == ["the HTTP port 0.0.0.0:9644"]
    assert doors(tls=True) == ["the HTTP port 0.0.0.0:9644"]
    assert doors(login=True) == ["the HTTP port 0.0.0.0:9644"]  # a password in plaintext is no lock
    assert doors(tls=True, login=True) == []
    assert exposed(from_document({"http": {"listen": "127.0.0.1:9644"}})) == []  # loopback: as before


def test_a_port_without_login_beside_authenticating_listeners_is_warned_about(certs: Path) -> None:
    sasl = {"listeners": ["SASL_PLAINTEXT://127.0.0.1:1", "LOCAL://127.0.0.1:2"],
            "listener_security_protocol_map": "SASL_PLAINTEXT:SASL_PLAINTEXT,LOCAL:PLAINTEXT",
            "inter_broker_listener_name": "LOCAL"}
    assert open_http(from_document({})) is None  # no security settings: nothing to warn about
    assert "needs no login" in (open_http(from_document({"gateway": sasl})) or "")
    assert open_http(from_document({"gateway": sasl, "http": {"login": True}})) is None
    assert open_http(from_document({"gateway": sasl, "http": {"listen": "off"}})) is None
