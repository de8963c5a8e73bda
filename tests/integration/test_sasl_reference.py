"""SASL on Martlet and on the reference Apache Kafka configured the same way (issue 39): a
SASL_PLAINTEXT listener with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 beside a PLAINTEXT one
where users are made. The same raw requests and the same clients meet both:
- AlterUserScramCredentials and DescribeUserScramCredentials, each user's result;
- the SASL exchange on raw sockets: SaslHandshake v0 and v1, SaslAuthenticate with good, wrong
  and malformed PLAIN tokens and SCRAM messages, requests out of turn, and whether the
  connection is closed after;
- confluent-kafka producing with each mechanism, with the right password and a wrong one.

Kafka checks PLAIN against a user list in its JAAS configuration, Martlet against the SCRAM
credentials: alice has the same password in both places on both brokers.

Differences, each with its reason (the rest must match), are in DIFFERENCES; each is checked
to be still there, so the list follows.
"""

from __future__ import annotations

import functools
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic, ScramMechanism
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as SaslAuthenticateRequestV0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32

from martlet.compat.reference.kafka import ReferenceKafka
from martlet.compat.reference.process import free_ports
from martlet.protocol.apis import ApiKey
from martlet.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, ClientExchange, salted_password
from tests.fixtures.martlet import wait_until
from tests.integration.raw_client import RawClient, frame, is_closed
from tests.support.sasl import MECHANISMS, PASSWORD, add_user, scram_login, start_secured

pytestmark = [pytest.mark.integration, pytest.mark.java]

WAIT_S = 30.0
ANSWER_WAIT_S = 3.0  # a refusal comes after the failed-authentication delay (Kafka's: 100-300 ms here)
CLOSE_WAIT_S = 2.0
TOPIC = "sasl-reference"
ALTERED = "altered-"  # the users the alteration tests make: left out when all users are described
SHA_256, SHA_512 = 1, 2  # Kafka's ScramMechanism ids on the wire (0 is UNKNOWN)
JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
JAAS_PLAIN = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'

DIFFERENCES = {
    "result order": "Kafka lists the results of AlterUserScramCredentials as accepted deletions, accepted "
                    "upsertions, then refusals, and DescribeUserScramCredentials' results and a user's mechanisms, "
                    "each in the order of a Java HashMap; Martlet lists refusals then changes in request order, "
                    "and all users sorted. Clients match results by user name, so results are compared per user.",
    "mechanism order": "SaslHandshake's mechanisms: Kafka 4.4 lists PLAIN, SCRAM-SHA-512, SCRAM-SHA-256 whatever "
                       "sasl.enabled.mechanisms says; Martlet lists enabled_mechanisms in order. Clients look their "
                       "mechanism up in the list, so it is compared as a set.",
    "a request out of turn": "a request other than SaslAuthenticate after the handshake (Metadata, say): Kafka "
                             "answers it with its own error answer (ILLEGAL_SASL_STATE in it) and closes; Martlet "
                             "closes without an answer, for every API (it has no error answer for each): the client "
                             "sees the connection end either way.",
    "no error, no message": "where the error code is 0, Kafka sends an empty error message (its generated "
                            "default) and Martlet a null one (\"null if no error\", the schema says); clients read "
                            "the message only with an error, so messages are compared only there.",
}

class Listeners(NamedTuple):
    plain: str  # PLAINTEXT: where users and topics are made
    sasl: str  # SASL_PLAINTEXT


class SaslReferenceKafka(ReferenceKafka):
    """The reference Kafka with a SASL_PLAINTEXT listener beside its PLAINTEXT one."""

    def __init__(self, sasl_port: int) -> None:
        super().__init__()
        self.sasl_port = sasl_port

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        broker, controller = f"127.0.0.1:{self.port}", f"127.0.0.1:{self.controller_port}"
        sasl = f"127.0.0.1:{self.sasl_port}"
        props.update({
            "listeners": f"PLAINTEXT://{broker},CONTROLLER://{controller},SASL_PLAINTEXT://{sasl}",
            "advertised.listeners": f"PLAINTEXT://{broker},SASL_PLAINTEXT://{sasl}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS_SCRAM,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": JAAS_SCRAM,
        })
        return props


def _prepared(listeners: Listeners) -> Listeners:
    """Users alice (both mechanisms) and carol (SCRAM-SHA-512 only), and TOPIC.
    One mechanism a request: Kafka refuses a user named twice in one."""
    add_user(listeners.plain, "carol", "carol-secret", (ScramMechanism.SCRAM_SHA_512,))
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        add_user(listeners.plain, "alice", PASSWORD, (mechanism,))
    admin = AdminClient({"bootstrap.servers": listeners.plain})
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(WAIT_S)
    for name in (SCRAM_SHA_256, SCRAM_SHA_512):  # Kafka's brokers learn of credentials a moment later
        assert wait_until(functools.partial(_logs_in, listeners.sasl, name), WAIT_S), f"alice cannot log in with {name}"
    return listeners


def _logs_in(address: str, mechanism: str) -> bool:
    with RawClient(address, ANSWER_WAIT_S) as client:
        return bool(scram_login(client, mechanism, "alice", PASSWORD).error_code == 0)


@pytest.fixture(scope="module")
def kafka_sasl() -> Iterator[Listeners]:
    (port,) = free_ports(1)
    kafka = SaslReferenceKafka(port)
    kafka.start()
    try:
        yield _prepared(Listeners(kafka.bootstrap, f"127.0.0.1:{port}"))
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def martlet_sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    secured = start_secured(tmp_path_factory.mktemp("martlet-sasl-reference"))
    try:
        yield _prepared(Listeners(secured.local, secured.addresses["SASL_PLAINTEXT"]))
    finally:
        secured.broker.kill()


@pytest.fixture
def sides(kafka_sasl: Listeners, martlet_sasl: Listeners) -> dict[str, Listeners]:
    return {"martlet": martlet_sasl, "kafka": kafka_sasl}


# -- users


def _upsertion(user: str, mechanism: int = SHA_256, iterations: int = 4096) -> ScramCredentialUpsertion:
    salt = b"reference-salt"
    name = SCRAM_SHA_512 if mechanism == SHA_512 else SCRAM_SHA_256  # an unknown id: any salted password does
    return ScramCredentialUpsertion(name=user, mechanism=i8(mechanism), iterations=i32(iterations), salt=salt,
                                    salted_password=salted_password(name, "secret", salt, 4096))


def _deletion(user: str, mechanism: int = SHA_256) -> ScramCredentialDeletion:
    return ScramCredentialDeletion(name=user, mechanism=i8(mechanism))


def _alter(address: str, deletions: Sequence[ScramCredentialDeletion] = (),
           upsertions: Sequence[ScramCredentialUpsertion] = ()) -> list[tuple[str, int, str | None]]:
    """Each user's (user, error code, error message), in the answer's order."""
    with RawClient(address) as client:
        answer = client.request(AlterUserScramCredentialsRequest(deletions=tuple(deletions),
                                                                 upsertions=tuple(upsertions)))
    return [(result.user, int(result.error_code), result.error_message) for result in answer.results]


def _user(case: str) -> str:
    return ALTERED + case.replace(" ", "-").replace(",", "")


ALTERATIONS: dict[str, list[tuple[list[ScramCredentialDeletion], list[ScramCredentialUpsertion]]]] = {
    "upsert, change, delete": [([], [_upsertion(_user("upsert"))]), ([], [_upsertion(_user("upsert"), iterations=8192)]),
                               ([_deletion(_user("upsert"))], [])],
    "4095 iterations": [([], [_upsertion(_user("4095"), iterations=4095)])],
    "16384 iterations": [([], [_upsertion(_user("16384"), SHA_512, iterations=16384)])],
    "16385 iterations": [([], [_upsertion(_user("16385"), iterations=16385)])],
    "mechanism 0": [([], [_upsertion(_user("mechanism 0"), 0)])],
    "mechanism 3": [([], [_upsertion(_user("mechanism 3"), 3)])],
    "delete mechanism 0": [([_deletion(_user("delete mechanism 0"), 0)], [])],
    "empty user name": [([], [_upsertion("")])],
    "delete an empty user name": [([_deletion("")], [])],
    "one user and mechanism twice": [([], [_upsertion(_user("twice")), _upsertion(_user("twice"))])],
    "one user, both mechanisms": [([], [_upsertion(_user("both")), _upsertion(_user("both"), SHA_512)])],
    "delete what does not exist": [([_deletion(_user("missing"))], [])],
    "upsert and delete one user and mechanism": [([], [_upsertion(_user("churn"))]),
                                                 ([_deletion(_user("churn"))], [_upsertion(_user("churn"))])],
    "upsert and delete a credential that does not exist": [([_deletion(_user("ghost"))], [_upsertion(_user("ghost"))])],
    "one user twice, the first refused": [([], [_upsertion(_user("retry"), iterations=1), _upsertion(_user("retry"))])],
    "delete both mechanisms of one user": [([], [_upsertion(_user("pair"))]), ([], [_upsertion(_user("pair"), SHA_512)]),
                                           ([_deletion(_user("pair")), _deletion(_user("pair"), SHA_512)], [])],
    "several users, some refused": [([_deletion(_user("gone"))],
                                     [_upsertion(_user("m1")), _upsertion(_user("m2"), iterations=1),
                                      _upsertion(_user("m3")), _upsertion(_user("m4"), 5), _upsertion(_user("m5"))])],
}


@pytest.mark.parametrize("case", ALTERATIONS)
def test_alter_user_scram_credentials_answers_each_user_as_kafka(sides: dict[str, Listeners], case: str) -> None:
    ours, theirs = ([sorted(_alter(listeners.plain, *request)) for request in ALTERATIONS[case]]
                    for listeners in sides.values())  # sorted: DIFFERENCES["result order"]
    assert ours == theirs, "Martlet answers otherwise than Kafka"


def _describe(address: str, users: list[str] | None) -> tuple[int, dict[str, tuple[int, str | None, list[Any]]]]:
    """The error code, and each user's (error code, message where there is an error, sorted
    (mechanism, iterations)) but the ALTERED users'."""
    named = None if users is None else tuple(UserName(name=user) for user in users)
    with RawClient(address) as client:
        answer = client.request(DescribeUserScramCredentialsRequest(users=named))
    results = {result.user: (int(result.error_code), result.error_message if result.error_code else None,
                             sorted((int(info.mechanism), info.iterations) for info in result.credential_infos))
               for result in answer.results if not result.user.startswith(ALTERED)}
    return int(answer.error_code), results


DESCRIPTIONS: dict[str, list[str] | None] = {
    "all users (null)": None, "all users (empty list)": [], "an unknown user": ["nobody"],
    "a user named twice": ["alice", "alice"], "a mix": ["nobody", "carol", "alice", "alice", ""],
}


@pytest.mark.parametrize("case", DESCRIPTIONS)
def test_describe_user_scram_credentials_answers_each_user_as_kafka(sides: dict[str, Listeners], case: str) -> None:
    ours, theirs = (_describe(listeners.plain, DESCRIPTIONS[case]) for listeners in sides.values())
    assert ours == theirs, "Martlet answers otherwise than Kafka"
    if DESCRIPTIONS[case] is None:
        assert theirs[1]["carol"] == (0, None, [(SHA_512, 4096)]), theirs  # the users are there to compare


# -- the SASL exchange on raw connections


class Answer(NamedTuple):
    """An answer as both brokers must give it (DIFFERENCES: mechanisms as a set, the message
    only where there is an error)."""

    api: str
    error_code: int
    error_message: str | None
    mechanisms: frozenset[str] | None


def _summary(answer: Any) -> Answer:
    code = int(getattr(answer, "error_code", 0))
    mechanisms = getattr(answer, "mechanisms", None)
    return Answer(ApiKey(answer.__api_key__).name, code, getattr(answer, "error_message", None) if code else None,
                  None if mechanisms is None else frozenset(mechanisms))


CLOSES = "closes?"  # a step: is the connection closed within CLOSE_WAIT_S?


def _step(client: RawClient, step: object) -> object:
    """What the broker does with one step: a kio request (its answer), bytes (a bare token
    frame, as after SaslHandshake v0: the frame it answers), or CLOSES."""
    if isinstance(step, str):  # CLOSES
        return "closed" if is_closed(client.sock, CLOSE_WAIT_S) else "open"
    try:
        if isinstance(step, bytes):
            client.send_bytes(frame(step))
            return ("token", client.read_frame())
        return _summary(client.request(step))
    except TimeoutError:
        return "no answer"
    except OSError:  # the end of the stream, a reset, a broken pipe
        return "closed"


def _exchange(address: str, steps: Sequence[object]) -> list[object]:
    """What each step gets on one connection, in order, until it is closed."""
    seen: list[object] = []
    with RawClient(address, ANSWER_WAIT_S) as client:
        for step in steps:
            seen.append(_step(client, step))
            if seen[-1] == "closed":
                break
    return seen


AV = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
RIGHT = b"\0alice\0" + PASSWORD.encode()


def _hs(mechanism: str) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(mechanism=mechanism)


def _plain(token: bytes) -> list[object]:
    """SaslHandshake v1 for PLAIN, the token in SaslAuthenticate v2, then what becomes of the
    connection: a Metadata request answered, or closed."""
    return [_hs("PLAIN"), SaslAuthenticateRequest(auth_bytes=token), CLOSES]


# case -> (listener, steps)
EXCHANGES: dict[str, tuple[str, list[object]]] = {
    **{f"SaslHandshake {mechanism}": ("sasl", [AV, _hs(mechanism)]) for mechanism in MECHANISMS},
    "an unknown mechanism": ("sasl", [AV, _hs("GSSAPI"), CLOSES]),
    "an unknown mechanism, SaslHandshake v0": ("sasl", [SaslHandshakeRequestV0(mechanism="NOPE"), CLOSES]),
    "SaslHandshake v0, a bare PLAIN token": ("sasl", [SaslHandshakeRequestV0(mechanism="PLAIN"), RIGHT, METADATA]),
    "SaslHandshake v0, a bare PLAIN token, wrong password": (
        "sasl", [SaslHandshakeRequestV0(mechanism="PLAIN"), b"\0alice\0wrong", CLOSES]),
    "PLAIN": ("sasl", [_hs("PLAIN"), SaslAuthenticateRequest(auth_bytes=RIGHT), METADATA]),
    "PLAIN, SaslAuthenticate v0": ("sasl", [_hs("PLAIN"), SaslAuthenticateRequestV0(auth_bytes=RIGHT), METADATA]),
    "PLAIN, wrong password": ("sasl", _plain(b"\0alice\0wrong")),
    "PLAIN, wrong password, SaslAuthenticate v0": (
        "sasl", [_hs("PLAIN"), SaslAuthenticateRequestV0(auth_bytes=b"\0alice\0wrong"), CLOSES]),
    "PLAIN, unknown user": ("sasl", _plain(b"\0nobody\0wrong")),
    "PLAIN, authzid the user": ("sasl", [_hs("PLAIN"), SaslAuthenticateRequest(auth_bytes=b"alice" + RIGHT), METADATA]),
    "PLAIN, another authzid": ("sasl", _plain(b"bob" + RIGHT)),
    "PLAIN, another authzid, wrong password": ("sasl", _plain(b"bob\0alice\0wrong")),
    "PLAIN, 2 fields": ("sasl", _plain(b"alice\0" + PASSWORD.encode())),
    "PLAIN, 4 fields": ("sasl", _plain(RIGHT + b"\0more")),
    "PLAIN, 5 fields": ("sasl", _plain(RIGHT + b"\0more\0more")),
    "PLAIN, empty password": ("sasl", _plain(b"\0alice\0")),
    "PLAIN, empty user": ("sasl", _plain(b"\0\0" + PASSWORD.encode())),
    "PLAIN, empty token": ("sasl", _plain(b"")),
    "PLAIN, not UTF-8": ("sasl", _plain(b"\0al\xffice\0" + PASSWORD.encode())),
    "a second SaslHandshake": ("sasl", [_hs("PLAIN"), _hs("PLAIN"), CLOSES]),
    "Metadata first": ("sasl", [METADATA, CLOSES]),
    "Metadata after ApiVersions": ("sasl", [AV, METADATA, CLOSES]),
    "ApiVersions twice": ("sasl", [AV, AV, CLOSES]),
    "SaslAuthenticate first": ("sasl", [SaslAuthenticateRequest(auth_bytes=RIGHT), CLOSES]),
    "SaslAuthenticate after authenticating": (
        "sasl", [_hs("PLAIN"), SaslAuthenticateRequest(auth_bytes=RIGHT), SaslAuthenticateRequest(auth_bytes=RIGHT),
                 METADATA]),
    "SaslHandshake after authenticating": (
        "sasl", [_hs("PLAIN"), SaslAuthenticateRequest(auth_bytes=RIGHT), _hs("PLAIN"), METADATA]),
    "SaslHandshake v0 and v1 on PLAINTEXT": ("plain", [_hs("PLAIN"), SaslHandshakeRequestV0(mechanism="PLAIN"), AV]),
    "SaslAuthenticate v2 and v0 on PLAINTEXT": (
        "plain", [SaslAuthenticateRequest(auth_bytes=RIGHT), SaslAuthenticateRequestV0(auth_bytes=RIGHT), AV]),
}


OUT_OF_TURN = [_hs("PLAIN"), METADATA, CLOSES]  # Metadata after the handshake: see DIFFERENCES


@pytest.mark.parametrize("case", EXCHANGES)
def test_the_sasl_exchange_goes_as_on_kafka(sides: dict[str, Listeners], case: str) -> None:
    listener, steps = EXCHANGES[case]
    ours, theirs = (_exchange(getattr(listeners, listener), steps) for listeners in sides.values())
    assert ours == theirs, "Martlet answers otherwise than Kafka"


def _scram(address: str, mechanism: str, user: str, password: str) -> list[object]:
    """A SCRAM exchange (ClientExchange's messages): each answer, then whether the server's
    signature checks out and a Metadata request is answered, or whether the connection closes."""
    exchange = ClientExchange(mechanism, user, password)
    with RawClient(address, ANSWER_WAIT_S) as client:
        seen: list[object] = [_step(client, _hs(mechanism))]
        answer = client.request(SaslAuthenticateRequest(auth_bytes=exchange.first()))
        seen.append(_summary(answer))
        if answer.error_code == 0:
            answer = client.request(SaslAuthenticateRequest(auth_bytes=exchange.final(answer.auth_bytes)))
            seen.append(_summary(answer))
        if answer.error_code == 0:
            exchange.verify(answer.auth_bytes)  # ScramError if the server's signature is wrong
            seen.append(_step(client, METADATA))
        else:
            seen.append(_step(client, CLOSES))
    return seen


SCRAM_CASES = {
    **{mechanism: (mechanism, "alice", PASSWORD) for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512)},
    "SCRAM, an unknown user": (SCRAM_SHA_256, "nobody", PASSWORD),
    "SCRAM, a user without this mechanism": (SCRAM_SHA_256, "carol", "carol-secret"),
    "SCRAM, a wrong proof": (SCRAM_SHA_512, "alice", "wrong"),
}


@pytest.mark.parametrize("case", SCRAM_CASES)
def test_scram_goes_as_on_kafka(sides: dict[str, Listeners], case: str) -> None:
    ours, theirs = (_scram(listeners.sasl, *SCRAM_CASES[case]) for listeners in sides.values())
    assert ours == theirs, "Martlet answers otherwise than Kafka"


# -- a client


SHOWN = re.compile(r"SASL authentication error: (.*) \(after \d+ms in state")


def _produce(address: str, mechanism: str, password: str) -> object:
    """What confluent-kafka makes of producing one message as alice: "delivered", or the
    first error it reports (code, and its text without the broker's address and timing)."""
    errors: list[KafkaError] = []
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                         "sasl.username": "alice", "sasl.password": password, "error_cb": errors.append,
                         "log_level": 0})
    producer.produce(TOPIC, mechanism.encode(), on_delivery=lambda error, _message: reports.append(error))
    deadline = time.monotonic() + WAIT_S
    while not (reports or errors) and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()  # a refused producer still holds its message
    if errors:
        shown = SHOWN.search(errors[0].str())
        return errors[0].code(), shown.group(1) if shown else errors[0].str()
    return "delivered" if reports == [None] else reports


@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_meets_the_same_sasl(sides: dict[str, Listeners], mechanism: str, password: str) -> None:
    ours, theirs = (_produce(listeners.sasl, mechanism, password) for listeners in sides.values())
    assert ours == theirs
    if password == PASSWORD:
        assert theirs == "delivered"
    else:
        assert isinstance(theirs, tuple) and theirs[0] == KafkaError._AUTHENTICATION, theirs


def _python_clients(address: str, mechanism: str, password: str) -> dict[str, str]:
    """What kafka-python and aiokafka make of sending one message as alice: "delivered" or the
    name of the error each raises."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    common: dict[str, Any] = {"bootstrap_servers": address, "security_protocol": "SASL_PLAINTEXT",
                              "sasl_mechanism": mechanism, "sasl_plain_username": "alice",
                              "sasl_plain_password": password}
    outcomes: dict[str, str] = {}
    try:
        # the versions given, so that a refused login ends after max_block_ms instead of a 30 s version probe
        producer = KafkaProducer(**common, api_version=(3, 0), max_block_ms=2000)
        producer.send(TOPIC, b"kafka-python").get(WAIT_S)
        producer.close()
        outcomes["kafka-python"] = "delivered"
    except Exception as error:  # noqa: BLE001 - the error each broker makes the client raise is compared
        outcomes["kafka-python"] = type(error).__name__

    async def aiokafka_send() -> str:
        producer = AIOKafkaProducer(**common)
        try:
            await producer.start()
            await producer.send_and_wait(TOPIC, b"aiokafka")
            return "delivered"
        except Exception as error:  # noqa: BLE001 - compared as above
            return type(error).__name__
        finally:
            await producer.stop()

    outcomes["aiokafka"] = asyncio.run(asyncio.wait_for(aiokafka_send(), WAIT_S))
    return outcomes


@pytest.mark.parametrize("password", [PASSWORD, "wrong"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_and_aiokafka_meet_the_same_sasl(sides: dict[str, Listeners], mechanism: str,
                                                      password: str) -> None:
    ours, theirs = (_python_clients(listeners.sasl, mechanism, password) for listeners in sides.values())
    assert ours == theirs
    if password == PASSWORD:
        assert set(theirs.values()) == {"delivered"}


JAAS = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _java_round(kafka_tool: Any, folder: Path, listeners: Listeners, mechanism: str, password: str) -> object:
    """Kafka's console producer then consumer as alice, on a topic of their own: the lines
    read back, or the producer's failure (its exit code and whether it names an
    authentication failure)."""
    topic = f"java-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": listeners.plain})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(WAIT_S)
    address = listeners.sasl
    properties = folder / f"{mechanism}-{password}.properties"
    properties.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                          f'sasl.jaas.config={JAAS[mechanism]} required username="alice" password="{password}";\n')
    common = ["--bootstrap-server", address, "--command-config", str(properties)]
    produced = kafka_tool("console-producer", [*common, "--topic", topic], 120.0, input=f"java-{mechanism}\n".encode())
    if produced.returncode != 0 or b"SaslAuthenticationException" in produced.stderr:
        return produced.returncode, b"SaslAuthenticationException" in produced.stderr + produced.stdout
    consumed = kafka_tool("console-consumer", [*common, "--topic", topic, "--partition", "0", "--offset", "earliest",
                                               "--max-messages", "1", "--timeout-ms", "30000"], 120.0)
    return consumed.stdout.decode().splitlines()


@pytest.mark.java
@pytest.mark.parametrize(("mechanism", "password"), [("PLAIN", PASSWORD), (SCRAM_SHA_512, PASSWORD),
                                                     (SCRAM_SHA_512, "wrong")])
def test_the_java_console_tools_meet_the_same_sasl(sides: dict[str, Listeners], kafka_tool: Any, tmp_path: Path,
                                                   mechanism: str, password: str) -> None:
    ours, theirs = (_java_round(kafka_tool, tmp_path, listeners, mechanism, password)
                    for listeners in sides.values())
    assert ours == theirs
    if password == PASSWORD:
        assert theirs == [f"java-{mechanism}"]
    else:  # the console producer names the refusal (and exits 0 on both: it only logs send failures)
        assert isinstance(theirs, tuple) and theirs[1] is True, theirs


# -- the differences


def _raw_differences(listeners: Listeners) -> dict[str, object]:
    """What DIFFERENCES names, as each broker answers it, unnormalised."""
    with RawClient(listeners.sasl, ANSWER_WAIT_S) as client:
        mechanisms = client.request(_hs("PLAIN")).mechanisms
        message = client.request(SaslAuthenticateRequest(auth_bytes=RIGHT)).error_message
    users = [_user(f"order {name}") for name in ("anna", "bert", "cleo", "dirk", "emma")]
    answered = _alter(listeners.plain, [_deletion(users[0])],
                      [_upsertion(users[1], iterations=1), *map(_upsertion, users[2:])])
    return {"result order": [user for user, *_ in answered], "mechanism order": mechanisms,
            "no error, no message": message, "a request out of turn": _exchange(listeners.sasl, OUT_OF_TURN)}


def test_the_listed_differences_are_still_there(sides: dict[str, Listeners]) -> None:
    ours, theirs = (_raw_differences(listeners) for listeners in sides.values())
    for name in DIFFERENCES:
        assert ours[name] != theirs[name], f"{name!r} is the same on both now: remove it from DIFFERENCES"

