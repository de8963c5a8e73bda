"""TLS settings and principals (gateway/tls.py), and the config file's [tls] section."""

import pytest

from martlet.broker.config import ConfigError, from_document
from martlet.gateway.tls import ANONYMOUS, TlsSettings, check, principal
from martlet.protocol.framing import FrameError, FrameReader


def test_a_client_certificate_names_its_principal_as_kafka_does():
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
               (("organizationalUnitName", "eng"), ("organizationalUnitName", "ops")), (("commonName", " client#1 "),))
    assert principal({"subject": subject}) == r"User:CN=\ client#1\ ,OU=eng+OU=ops,O=Acme\, Inc.,C=US"
    assert principal({}) == principal(None) == ANONYMOUS  # no certificate (client_auth none or requested)


@pytest.mark.parametrize(("settings", "message"), [
    (TlsSettings(), "certificate and key are needed"),
    (TlsSettings("c.pem", "k.pem", client_auth="always"), "client_auth: 'always' is not one of"),
    (TlsSettings("c.pem", "k.pem", client_auth="required"), "needs ca"),
    (TlsSettings("c.pem", "k.pem", protocols=("TLSv1.1",)), "protocols"),
    (TlsSettings("/nonexistent/c.pem", "/nonexistent/k.pem"), "cannot load"),
])
def test_settings_that_cannot_serve_tls_are_refused_naming_the_key(settings, message):
    with pytest.raises(ValueError, match=message):
        check(settings)


def test_an_ssl_listener_needs_tls_settings_that_load():
    gateway = {"listeners": ["SSL://127.0.0.1:0"]}
    with pytest.raises(ConfigError, match="certificate and key are needed"):
        from_document({"gateway": gateway})
    with pytest.raises(ConfigError, match="protocols"):
        from_document({"gateway": gateway, "tls": {"protocols": "TLSv1.3"}})
    with pytest.raises(ConfigError, match="unknown key"):
        from_document({"tls": {"keystore": "x"}})
    assert from_document({"tls": {"client_auth": "required"}}).tls.client_auth == "required"  # unused: not checked


def test_a_tls_handshake_on_a_plaintext_listener_is_named_as_such():
    reader = FrameReader(1 << 20, bytearray(1 << 16))
    buffer = reader.get_buffer()
    hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC])
    buffer[:len(hello)] = hello
    with pytest.raises(FrameError, match="a TLS client on a plaintext listener"):
        reader.filled(len(hello))


def test_tls_files_that_change_into_something_unloadable_keep_the_previous_context(tmp_path, caplog, monkeypatch):
    import os

    from martlet.gateway import tls
    from martlet.tools.certs import create

    create(tmp_path, ["localhost"], 1)
    contexts = tls.ServerContexts(TlsSettings(str(tmp_path / "broker.pem"), str(tmp_path / "broker.key")))
    first = contexts.current()
    monkeypatch.setattr(tls, "RELOAD_CHECK_S", 0.0)  # look at the files on every call
    assert contexts.current() is first  # unchanged files: the same context
    (tmp_path / "broker.key").write_text("-----BEGIN PRIVATE KEY-----\nhalf writ")
    os.utime(tmp_path / "broker.key", (1, 1))  # a new modification time, whatever the clock's resolution
    with caplog.at_level("WARNING"):
        assert contexts.current() is first
    assert "do not load" in caplog.text
    create(tmp_path, ["localhost"], 1)  # whole files again
    os.utime(tmp_path / "broker.key", (2, 2))
    assert contexts.current() is not first
