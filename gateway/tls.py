"""TLS on the listeners that ask for it (SSL, and SASL_SSL once SASL is served).

The broker's certificate chain and key are PEM files ([tls] in the config file). Each new
connection takes the context `ServerContexts.current` gives; the files' modification times
are looked at at most once every RELOAD_CHECK_S, and a change builds a new context, so a
certificate replaced on disk is used without a restart (connections already open keep the
one they started with). Files that do not load (a half-written key) keep the old context,
with a log line.

With `client_auth` "requested" or "required" (Kafka's ssl.client.auth) clients present
certificates signed by one of the CAs in `ca`, and the connection's principal is
"User:" + the certificate's subject as an RFC 2253 distinguished name, as Kafka's default
principal builder gives it (ssl.principal.mapping.rules DEFAULT); without one it is
User:ANONYMOUS.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from dataclasses import dataclass

from ..protocol.codec import ANONYMOUS
from .principal_rules import Rule, mapped, parse_rules

logger = logging.getLogger(__name__)

DEFAULT_RULES = parse_rules("DEFAULT")

RELOAD_CHECK_S = 1.0
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Attribute names in a distinguished name as RFC 2253 (and Java's X500Principal) writes them.
SHORT_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
               "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET",
               "domainComponent": "DC", "userId": "UID"}
ESCAPED = ',+"\\<>;'


@dataclass(frozen=True, slots=True)
class TlsSettings:
    certificate: str = ""  # PEM: the broker's certificate chain, its own first
    key: str = ""  # PEM: the private key of that certificate
    key_password: str = ""  # when the key file is encrypted
    ca: str = ""  # PEM: the CAs whose client certificates are accepted
    client_auth: str = "none"  # Kafka's ssl.client.auth: none, requested, required
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # Kafka's ssl.enabled.protocols
    principal_mapping_rules: str = "DEFAULT"  # Kafka's ssl.principal.mapping.rules (gateway/principal_rules.py)


def check(settings: TlsSettings) -> None:
    """Raise ValueError naming the key when the settings cannot make a context."""
    if not settings.certificate or not settings.key:
        raise ValueError("[tls] certificate and key are needed by SSL listeners")
    if settings.client_auth not in CLIENT_AUTH:
        raise ValueError(f"[tls] client_auth: {settings.client_auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    if settings.client_auth != "none" and not settings.ca:
        raise ValueError(f"[tls] client_auth {settings.client_auth!r} needs ca, the CAs client certificates come from")
    try:
        parse_rules(settings.principal_mapping_rules)
    except ValueError as error:
        raise ValueError(f"[tls] principal_mapping_rules: {error}") from None
    unknown = [name for name in settings.protocols if name not in VERSIONS]
    if unknown or not settings.protocols:
        raise ValueError(f"[tls] protocols: {unknown or 'none'}: expected some of {', '.join(VERSIONS)}")
    try:
        build(settings)
    except (OSError, ValueError) as error:
        raise ValueError(f"[tls] cannot load the certificate, key or CAs: {error}") from None


def build(settings: TlsSettings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(VERSIONS[name] for name in settings.protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    context.load_cert_chain(settings.certificate, settings.key, password=settings.key_password or None)
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    if settings.ca:
        context.load_verify_locations(settings.ca)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """What a broker uses to call another on an SSL inter-broker listener: it trusts the CAs in
    `ca` (else the system's) and shows its own certificate, for listeners that require one."""
    context = ssl.create_default_context(cafile=settings.ca or None)
    context.load_cert_chain(settings.certificate, settings.key, password=settings.key_password or None)
    return context


class ServerContexts:
    """The context for the next connection, rebuilt when the PEM files change."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self.rules = parse_rules(settings.principal_mapping_rules)
        self._context = build(settings)
        self._stamps = self._stamp()
        self._checked = time.monotonic()

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if now - self._checked >= RELOAD_CHECK_S:
            self._checked = now
            stamps = self._stamp()
            if stamps != self._stamps:
                self._stamps = stamps
                self._reload()
        return self._context

    def principal(self, peercert: object) -> str:
        """The principal of a connection's client certificate, mapped by the rules;
        NoMatchingRule when none maps it (the connection is refused)."""
        return principal(peercert, self.rules)

    def _reload(self) -> None:
        try:
            self._context = build(self.settings)
        except (OSError, ValueError) as error:
            logger.warning("TLS files changed but do not load (%s): new connections keep the previous certificate",
                           error)
            return
        logger.info("TLS files changed: new connections use the new certificate")

    def _stamp(self) -> tuple[float, ...]:
        stamps = []
        for path in (self.settings.certificate, self.settings.key, self.settings.ca):
            try:
                stamps.append(os.stat(path).st_mtime if path else 0.0)
            except OSError:
                stamps.append(-1.0)
        return tuple(stamps)


def principal(peercert: object, rules: tuple[Rule, ...] = DEFAULT_RULES) -> str:
    """Kafka's principal of a verified client certificate ("User:" and its subject as an RFC
    2253 name, mapped by `rules`), as SSLObject.getpeercert() gives it; User:ANONYMOUS without
    one. NoMatchingRule when no rule maps the name."""
    subject = peercert.get("subject") if isinstance(peercert, dict) else None
    if not subject:
        return ANONYMOUS
    rdns = []
    for rdn in reversed(subject):  # RFC 2253: the most specific first
        rdns.append("+".join(f"{SHORT_NAMES.get(name, name)}={_escaped(value)}" for name, value in rdn))
    return "User:" + mapped(rules, ",".join(rdns))


def _escaped(value: str) -> str:
    out = "".join(f"\\{char}" if char in ESCAPED else char for char in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
