"""Helpers for SASL tests: a broker with LOCAL (PLAINTEXT, loopback), SASL_PLAINTEXT and SASL_SSL
listeners, users made through AlterUserScramCredentials, and a SCRAM login on a raw connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from martlet.protocol.scram import ClientExchange
from tests.integration.raw_client import RawClient
from tests.support.tls import listener_addresses, make_certs

WAIT_S = 30.0
PASSWORD = "alice-secret-1"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def sasl_config(certs: Path, more: str = "") -> str:
    """Three listeners: LOCAL (PLAINTEXT, loopback: where users are made), SASL_PLAINTEXT and
    SASL_SSL (on localhost, the name the broker certificate holds)."""
    return f"""[gateway]
listeners = ["LOCAL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0", "SASL_SSL://localhost:0"]
listener_security_protocol_map = "LOCAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

[tls]
certificate = "{certs / 'broker.pem'}"
key = "{certs / 'broker.key'}"

[sasl]
{more}
"""


class Secured:
    def __init__(self, broker: Any, certs: Path) -> None:
        self.broker, self.certs = broker, certs
        self.addresses = listener_addresses(broker, 3)
        self.local = self.addresses["LOCAL"]

    def settings(self, listener: str, mechanism: str, user: str = "alice", password: str = PASSWORD) -> dict[str, Any]:
        settings = {"bootstrap.servers": self.addresses[listener], "security.protocol": listener,
                    "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
        if listener == "SASL_SSL":
            settings["ssl.ca.location"] = str(self.certs / "ca.pem")
        return settings


def start_secured(folder: Path, more: str = "") -> Secured:
    from tests.fixtures.martlet import MartletProcess

    certs = make_certs(folder / "certs")
    config = folder / "sasl.toml"
    config.write_text(sasl_config(certs, more))
    broker = MartletProcess(folder / "data", ["--config", str(config)], "off", listen=False)
    broker.start()
    return Secured(broker, certs)


def add_user(local: str, user: str, password: str, mechanisms: tuple[ScramMechanism, ...] = (
        ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)) -> None:
    admin = AdminClient({"bootstrap.servers": local})
    for mechanism in mechanisms:  # one request each: Kafka's controller takes one alteration per user in a request
        made = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        admin.alter_user_scram_credentials([made])[user].result(WAIT_S)


def handshake(client: RawClient, mechanism: str) -> Any:
    return client.request(SaslHandshakeRequest(mechanism=mechanism))


def scram_login(client: RawClient, mechanism: str, user: str, password: str) -> Any:
    """SCRAM on a raw connection (SaslHandshake v1, SaslAuthenticate v2): the last answer."""
    assert handshake(client, mechanism).error_code == 0
    exchange = ClientExchange(mechanism, user, password)
    first = client.request(SaslAuthenticateRequest(auth_bytes=exchange.first()))
    if first.error_code != 0:
        return first
    final = client.request(SaslAuthenticateRequest(auth_bytes=exchange.final(first.auth_bytes)))
    if final.error_code == 0:
        exchange.verify(final.auth_bytes)
    return final
