"""`martlet bench --secured`: 1 KB produce and consume over SASL_SSL (SCRAM-SHA-512) on Martlet
and on Apache Kafka configured the same way, beside each one's plaintext listener.

Each system runs one broker with two listeners, so four endpoints alternate round by round:

    martlet           Martlet's PLAINTEXT listener (LOCAL, 127.0.0.1)
    martlet-sasl-ssl  the same Martlet's SASL_SSL listener (localhost, the certificate's name)
    kafka             Kafka's PLAINTEXT listener
    kafka-sasl-ssl    the same Kafka's SASL_SSL listener

A secured endpoint and the plaintext one of its system are the same process, so the broker's
CPU per GB of the two compares directly: their ratio is what TLS and SASL cost that broker.
The certificates come from `martlet certs create` (one throwaway CA per run); both brokers
serve them as PEM, neither asks for a client certificate. One SCRAM-SHA-512 user is made on
each broker through its plaintext listener (AlterUserScramCredentials), and the run starts
once that user can log in (Kafka's broker learns of new credentials a moment after the
controller accepts them). Topics are made and deleted on the plaintext listener, unmeasured.

The report: medians with the ratios martlet/kafka and martlet-sasl-ssl/kafka-sasl-ssl, then
the cost of SASL_SSL per system (secured / plaintext: MB/s and broker CPU-s per GB).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from ..reference.kafka import ReferenceKafka
from ..reference.process import free_ports
from .runner import KAFKA_HEAP, KAFKA_OVERRIDES, Pair, Plan, Rows, martlet_serve, median_table, medians, raw_rows, run, to_json
from .workloads import ADMIN_TIMEOUT_S, METRICS, Endpoint

SECURED_WORKLOADS = ("produce-1k-acks1", "produce-1k-acksall", "consume-1k")
SUFFIX = "-sasl-ssl"  # a secured endpoint's name: its system's and this
SYSTEMS = ("martlet", "kafka")
PAIRS: list[Pair] = [("martlet", "kafka"), (f"martlet{SUFFIX}", f"kafka{SUFFIX}")]
TLS_COST: list[Pair] = [(f"{system}{SUFFIX}", system) for system in SYSTEMS]  # secured / plaintext, one broker
COST_METRICS = ("MB/s", "cpu s/GB")
MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-512
USER, PASSWORD = "martlet-bench", "martlet-bench-secret"  # on brokers that live for the run only
LOGIN_TIMEOUT_S = 60.0
LOGIN_ATTEMPT_S = 5.0
CERTS_TIMEOUT_S = 30.0
JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def run_secured(plan: Plan) -> Rows:
    """Certificates, both brokers with their two listeners, a user on each; then the rounds."""
    with tempfile.TemporaryDirectory(prefix="martlet-bench-certs-") as folder, contextlib.ExitStack() as stack:
        certs = make_certs(Path(folder))
        plan.progress("starting Martlet and Kafka with SASL_SSL listeners")
        endpoints = [*stack.enter_context(martlet_secured(certs)), *stack.enter_context(kafka_secured(certs))]
        return run(plan, endpoints)


def make_certs(folder: Path) -> Path:
    """A development CA and a broker certificate for localhost, from `martlet certs create`."""
    subprocess.run([sys.executable, "-m", "martlet.cli", "certs", "create", str(folder)], check=True,
                   capture_output=True, timeout=CERTS_TIMEOUT_S)
    return folder


def client_settings(certs: Path) -> dict[str, str]:
    """What every librdkafka client of a secured endpoint adds to its settings."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": MECHANISM, "sasl.username": USER,
            "sasl.password": PASSWORD, "ssl.ca.location": str(certs / "ca.pem")}


def martlet_config(certs: Path) -> str:
    """LOCAL (PLAINTEXT on 127.0.0.1: admin and the plaintext side) and SASL_SSL on localhost."""
    return f"""[gateway]
listeners = ["LOCAL://127.0.0.1:0", "SASL_SSL://localhost:0"]
listener_security_protocol_map = "LOCAL:PLAINTEXT,SASL_SSL:SASL_SSL"

[tls]
certificate = "{certs / 'broker.pem'}"
key = "{certs / 'broker.key'}"

[sasl]
enabled_mechanisms = ["{MECHANISM}"]
"""


@contextlib.contextmanager
def martlet_secured(certs: Path) -> Iterator[tuple[Endpoint, Endpoint]]:
    with martlet_serve(martlet_config(certs), "martlet", listeners=2) as served:
        plain = Endpoint("martlet", served.listeners["LOCAL"], served.pid)
        yield plain, secured(plain, served.listeners["SASL_SSL"], certs)


class SaslSslKafka(ReferenceKafka):
    """The reference Kafka with a SASL_SSL listener (SCRAM-SHA-512, PEM certificates) beside
    its PLAINTEXT one, on localhost as Martlet's."""

    def __init__(self, certs: Path, sasl_ssl_port: int) -> None:
        super().__init__(heap=KAFKA_HEAP, config_overrides=KAFKA_OVERRIDES)
        self.certs, self.sasl_ssl_port = certs, sasl_ssl_port

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        broker, controller = f"{self.host}:{self.port}", f"{self.host}:{self.controller_port}"
        sasl_ssl = f"localhost:{self.sasl_ssl_port}"
        props.update({
            "listeners": f"PLAINTEXT://{broker},CONTROLLER://{controller},SASL_SSL://{sasl_ssl}",
            "advertised.listeners": f"PLAINTEXT://{broker},SASL_SSL://{sasl_ssl}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": JAAS_SCRAM,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pem_one_line(self.certs / "broker.pem"),
            "ssl.keystore.key": pem_one_line(self.certs / "broker.key"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.certs / "ca.pem"),
        })
        return props


def pem_one_line(path: Path) -> str:
    """A PEM file as a Java properties value (its line breaks escaped)."""
    return path.read_text().strip().replace("\n", "\\n")


@contextlib.contextmanager
def kafka_secured(certs: Path) -> Iterator[tuple[Endpoint, Endpoint]]:
    (port,) = free_ports(1)
    with SaslSslKafka(certs, port) as kafka:
        assert kafka.pid is not None
        plain = Endpoint("kafka", kafka.bootstrap, kafka.pid)
        yield plain, secured(plain, f"localhost:{port}", certs)


def secured(plain: Endpoint, bootstrap: str, certs: Path) -> Endpoint:
    """The SASL_SSL endpoint of `plain`'s broker, once the bench's user can log in there."""
    endpoint = Endpoint(f"{plain.name}{SUFFIX}", bootstrap, plain.pid, client=client_settings(certs),
                        admin_bootstrap=plain.bootstrap)
    made = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
                                        PASSWORD.encode())
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    admin.alter_user_scram_credentials([made], request_timeout=ADMIN_TIMEOUT_S)[USER].result(ADMIN_TIMEOUT_S)
    wait_login(endpoint)
    return endpoint


def wait_login(endpoint: Endpoint) -> None:
    """Until a client with the endpoint's settings gets Metadata (bounded): Kafka's broker
    accepts a new user's login a moment after its controller took the credentials."""
    deadline = time.monotonic() + LOGIN_TIMEOUT_S
    while True:
        client = AdminClient({"bootstrap.servers": endpoint.bootstrap, **endpoint.client})
        try:
            client.list_topics(timeout=LOGIN_ATTEMPT_S)
            return
        except KafkaException as error:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{endpoint.name}: no login as {USER} in {LOGIN_TIMEOUT_S:.0f} s: {error}") from None
        time.sleep(0.2)  # a fresh client each try: librdkafka backs off after a failed login


def tls_cost(rows: Rows) -> dict[str, dict[tuple[str, str], float]]:
    """system -> (workload, metric) -> its secured median / its plaintext median, for COST_METRICS."""
    table = medians(rows)
    return {plain: {key: by_ep[secure] / by_ep[plain] for key, by_ep in table.items()
                    if key[1] in COST_METRICS and secure in by_ep and by_ep.get(plain)}
            for secure, plain in TLS_COST}


def secured_report(rows: Rows) -> str:
    """The medians with the two ratios, then the cost of SASL_SSL per system, then the raw rows."""
    cost = tls_cost(rows)
    lines = [f"cost of SASL_SSL ({MECHANISM}): secured / plaintext medians on one broker per system "
             "(MB/s below 1 and cpu s/GB above 1 are what it costs)",
             f"{'workload':<24}{'metric':<14}" + "".join(f"{system:>14}" for system in cost) + "  better"]
    for workload, metric in [key for key in medians(rows) if any(key in by_key for by_key in cost.values())]:
        lines.append(f"{workload:<24}{metric:<14}"
                     + "".join(f"{by_key.get((workload, metric), float('nan')):>14.2f}" for by_key in cost.values())
                     + f"  {'higher' if METRICS[metric].higher_is_better else 'lower'}")
    return "\n".join([*median_table(rows, PAIRS), "", *lines, "", *raw_rows(rows)])


def secured_json(rows: Rows) -> str:
    """to_json() with the two ratios and the cost pairs (martlet-sasl-ssl/martlet ...) among the ratios."""
    return to_json(rows, [*PAIRS, *TLS_COST])
