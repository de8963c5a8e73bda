"""--security-config FILE: one Kafka client properties file (the Java client's names:
security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.*,
ssl.endpoint.identification.algorithm) that every driver applies to every client it makes:

    java          the JVM reads the file itself and merges it into every client's config
    confluent     librdkafka's settings, from tools/client_config.py
    kafka-python  keyword arguments made here from those same settings, so the file is read,
    aiokafka      checked and refused (never showing a value) one way for the Python clients

kafka-python and aiokafka take the same arguments: security_protocol, sasl_mechanism,
sasl_plain_username, sasl_plain_password and ssl_context. The SSLContext is built here, as
kafka-python builds its own (TLS 1.2 at least, the CA file or the system's CAs, a client
certificate when given), because aiokafka takes nothing else and because a PEM held in the
properties file itself (ssl.truststore.certificates, ssl.keystore.key) has no file of its own.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from martlet.tools import client_config
from martlet.tools.client_config import ConfigError

__all__ = ["ConfigError", "LoginRefused", "check_readable", "keyword_arguments", "python_settings", "ssl_context"]


class LoginRefused(RuntimeError):
    """The endpoint answered but refused the login or the TLS handshake (the message says why)."""


def check_readable(path: str) -> None:
    """ConfigError unless `path` is a file this process can read (what the JVM will load)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise ConfigError(f"{path}: cannot read it: {error.strerror or error}") from None


def python_settings(path: str) -> dict[str, Any]:
    """kafka-python's and aiokafka's keyword arguments from the properties file at `path`."""
    settings = client_config.load(path)
    try:
        return keyword_arguments(settings)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def keyword_arguments(settings: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python's and aiokafka's keyword arguments for librdkafka `settings` (what
    client_config.translate makes of a properties file)."""
    protocol = settings.get("security.protocol", "PLAINTEXT")
    found: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        found |= {"sasl_mechanism": settings["sasl.mechanisms"], "sasl_plain_username": settings["sasl.username"],
                  "sasl_plain_password": settings["sasl.password"]}
    if protocol.endswith("SSL"):
        found["ssl_context"] = ssl_context(settings)
    return found


def ssl_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The client's TLS context: the broker's certificate checked against the CA given (else
    the system's), its name checked unless ssl.endpoint.identification.algorithm was empty,
    and the client's own certificate and key when given."""
    if "ssl.keystore.location" in settings:
        raise ConfigError("kafka-python and aiokafka read no PKCS12 keystore: give ssl.keystore.type=PEM (a file "
                          "with the certificate and its key) or ssl.keystore.certificate.chain and ssl.keystore.key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the name by default
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm", "https") != "none"
    _trust(context, settings)
    _identity(context, settings)
    return context


def _trust(context: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    location, pem = settings.get("ssl.ca.location"), settings.get("ssl.ca.pem")
    try:
        if location is not None and os.path.isdir(location):
            context.load_verify_locations(capath=location)
        elif location is not None:
            context.load_verify_locations(cafile=location)
        elif pem is not None:
            context.load_verify_locations(cadata=pem)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError) as error:
        key = "ssl.truststore.location" if location is not None else "ssl.truststore.certificates"
        raise ConfigError(f"{key}: the certificates could not be loaded: {_why(error)}") from None


def _identity(context: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    """The client certificate and key, from files, or from PEM text written for a moment into
    a private temporary folder (SSLContext loads a certificate chain from files only)."""
    password = settings.get("ssl.key.password")
    if "ssl.certificate.pem" in settings:
        with tempfile.TemporaryDirectory(prefix="martlet-compat-") as folder:  # mode 0700
            certificate, key = Path(folder, "certificate.pem"), Path(folder, "key.pem")
            certificate.write_text(settings["ssl.certificate.pem"])
            _write_private(key, settings["ssl.key.pem"])
            _load_chain(context, str(certificate), str(key), password, "ssl.keystore")
    elif "ssl.certificate.location" in settings:
        _load_chain(context, settings["ssl.certificate.location"], settings.get("ssl.key.location"), password,
                    "ssl.certificate.location")
    elif "ssl.key.location" in settings:
        raise ConfigError("ssl.key.location needs ssl.certificate.location")


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


def _load_chain(context: ssl.SSLContext, certificate: str, key: str | None, password: str | None, what: str) -> None:
    try:
        context.load_cert_chain(certificate, key, password)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"{what}: the client certificate and key could not be loaded: {_why(error)}") from None


def _why(error: OSError | ssl.SSLError) -> str:
    """OpenSSL's reason or the system's, never a path's contents or a password."""
    if isinstance(error, ssl.SSLError):
        return str(error.reason or error.library or "an SSL error")
    return str(error.strerror or type(error).__name__)
