"""tools/client_config.py and --command-config: Java properties read as java.util.Properties
reads them, Kafka's client properties translated into librdkafka settings that librdkafka takes
(PEM in properties re-wrapped), what cannot be used refused with a message that never holds a
value, and every tool that talks Kafka taking the file from --command-config or
$MARTLET_COMMAND_CONFIG (exit 2 when it cannot be used, before any connection)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives import serialization

from martlet.tools import certs
from martlet.tools.client_config import ConfigError, load, read_properties, translate
from martlet.tools.common import USAGE, Failed, Refusals, kafka_config, security_settings
from tests.support.tls import pem_one_line

SECRET = "s3cret-Pa55"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A development CA, broker and client certificates (ca.pem, client.pem, client.key, ...)."""
    found = tmp_path_factory.mktemp("certs")
    certs.create(found, ["localhost"], 1)
    return found


# -- java.util.Properties ----------------------------------------------------------------------

def test_properties_as_java_reads_them() -> None:
    text = "\n".join([
        "# a comment",
        "  ! another, after blanks",
        "",
        "equals=one",
        "colon: two",
        "blank three",
        "  spaced   =   four  ",
        "empty=",
        "bare",
        r"tab\tkey=\u0041\t\q",
        r"key\=with\:separators\ and\ blank = five",
        "hash=# not a comment",
    ])
    assert read_properties(text) == {
        "equals": "one", "colon": "two", "blank": "three", "spaced": "four  ", "empty": "", "bare": "",
        "tab\tkey": "A\tq", "key=with:separators and blank": "five", "hash": "# not a comment"}


def test_continued_lines_lose_their_leading_blanks() -> None:
    text = "sasl.jaas.config=Module required \\\n    username=\"a\" \\\n\tpassword=\"b\";\nnext=1\n"
    assert read_properties(text) == {"sasl.jaas.config": 'Module required username="a" password="b";', "next": "1"}


def test_an_even_number_of_backslashes_ends_the_line() -> None:
    assert read_properties("path=C:\\\\\nnext=1") == {"path": "C:\\", "next": "1"}
    assert read_properties("odd=a\\\\\\\n b") == {"odd": "a\\b"}


def test_a_comment_is_not_continued_and_a_continued_line_is_not_a_comment() -> None:
    assert read_properties("# comment \\\nkey=1") == {"key": "1"}
    assert read_properties("key=a\\\n  # b") == {"key": "a# b"}


def test_line_breaks_of_any_kind_and_the_last_value_wins() -> None:
    assert read_properties("a=1\r\nb=2\rc=3\na=4") == {"a": "4", "b": "2", "c": "3"}


def test_escaped_line_breaks_are_line_breaks() -> None:
    assert read_properties(r"pem=-----BEGIN X-----\nAAAA\n-----END X-----") == {
        "pem": "-----BEGIN X-----\nAAAA\n-----END X-----"}


def test_a_file_is_utf_8_or_else_iso_8859_1(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    for encoding in ("utf-8", "iso-8859-1"):
        path.write_bytes("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=jos\u00e9\n"
                         "sasl.password=p\u00e4ss\\u00e9\n".encode(encoding))  # the last one escaped in the file
        assert load(str(path))["sasl.password"] == "p\u00e4ss\u00e9", encoding


def test_a_bad_unicode_escape_names_its_line() -> None:
    with pytest.raises(ConfigError, match=r"line 2: a \\u escape needs four hexadecimal digits"):
        read_properties("a=1\nb=\\u12")


# -- SASL --------------------------------------------------------------------------------------

def jaas(module: str = SCRAM, user: str = "alice", password: str = SECRET) -> str:
    return f'{module} required username="{user}" password="{password}";'


def test_scram_over_ssl_with_a_pem_truststore(folder: Path) -> None:
    properties = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas(),
                  "ssl.truststore.type": "PEM", "ssl.truststore.location": str(folder / "ca.pem"),
                  "ssl.endpoint.identification.algorithm": "https"}
    assert translate(properties) == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": SECRET, "ssl.ca.location": str(folder / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https"}


def test_a_file_with_plain_over_plaintext(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f"sasl.jaas.config={PLAIN} required \\\n  username=\"bob\" \\\n  password=\"{SECRET}\";\n")
    assert load(str(path)) == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                               "sasl.username": "bob", "sasl.password": SECRET}


def test_librdkafka_names_are_taken_as_they_are() -> None:
    assert translate({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "SCRAM-SHA-256",
                      "sasl.username": "alice", "sasl.password": SECRET}) == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": SECRET}


def test_jaas_values_quoted_with_escapes_or_bare() -> None:
    settings = translate({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.endpoint.identification.algorithm": "",
                          "sasl.jaas.config": f'{PLAIN} required\n username=bob password="a \\"quoted\\" ; = b"'})
    assert (settings["sasl.username"], settings["sasl.password"]) == ("bob", 'a "quoted" ; = b')
    assert settings["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize(("properties", "message"), [
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas()}, "SASL_SSL needs sasl.mechanism .*GSSAPI"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas()},
     "sasl.mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER are not supported"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas(SCRAM)},
     "ScramLoginModule does not log in with PLAIN"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": jaas("com.sun.security.auth.module.Krb5LoginModule")}, "only .*PlainLoginModule and"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required username="a";'},
     "sasl.jaas.config must be .*: it has username$"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{PLAIN} required username="a" password="{SECRET}" tokenauth="true";'},
     "it has password, tokenauth, username"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": f'password="{SECRET}"'},
     "sasl.jaas.config must be"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required password="{SECRET}'},
     "sasl.jaas.config must be"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "SASL_SSL needs a user"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.password": SECRET}, "SASL_SSL needs a user"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas(PLAIN)},
     "sasl.username, sasl.password, sasl.mechanisms given, but security.protocol is PLAINTEXT"),
    ({"security.protocol": "SSL", "sasl.username": "alice", "sasl.password": SECRET}, "security.protocol is SSL"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas(PLAIN),
      "sasl.password": SECRET}, "give sasl.jaas.config or sasl.password, not both"),
    ({"security.protocol": "TLS"}, "security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "must be https .* or empty"),
    ({"sasl.login.callback.handler.class": "x", "bootstrap.servers": "k:9092", SECRET: ""},
     "unknown or unsupported: bootstrap.servers, sasl.login.callback.handler.class and 1 more line that names no property"),
])
def test_what_cannot_be_used_is_refused_without_showing_a_secret(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        translate(properties)
    assert SECRET not in str(refused.value)


# -- TLS ---------------------------------------------------------------------------------------

def test_a_truststore_without_its_type_is_taken_when_it_is_pem(folder: Path) -> None:
    settings = translate({"security.protocol": "SSL", "ssl.truststore.location": str(folder / "ca.pem")})
    assert settings == {"security.protocol": "SSL", "ssl.ca.location": str(folder / "ca.pem")}


@pytest.mark.parametrize(("properties", "message"), [
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type must be PEM: librdkafka reads no JKS"),
    ({"ssl.truststore.type": "PKCS12"}, "ssl.truststore.type must be PEM"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.password": SECRET}, "ssl.truststore.password is not used with a PEM"),
])
def test_what_librdkafka_cannot_trust_is_refused(folder: Path, properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        translate({"security.protocol": "SSL", "ssl.truststore.location": str(folder / "ca.pem"), **properties})
    assert SECRET not in str(refused.value)


def test_a_store_that_is_not_pem_needs_its_type(tmp_path: Path) -> None:
    store = tmp_path / "truststore.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    with pytest.raises(ConfigError, match="ssl.truststore.location is not PEM and ssl.truststore.type is not set"):
        translate({"security.protocol": "SSL", "ssl.truststore.location": str(store)})
    with pytest.raises(ConfigError, match="ssl.keystore.type must be PEM or PKCS12"):
        translate({"security.protocol": "SSL", "ssl.keystore.location": str(store), "ssl.keystore.type": "JKS"})
    with pytest.raises(ConfigError, match="ssl.truststore.location: cannot read .*missing.pem"):
        translate({"security.protocol": "SSL", "ssl.truststore.location": str(tmp_path / "missing.pem")})


def test_a_pkcs12_keystore_is_librdkafkas_own(tmp_path: Path) -> None:
    store = tmp_path / "client.p12"
    store.write_bytes(b"\x30\x82")
    assert translate({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                      "ssl.keystore.password": SECRET}) == {
        "security.protocol": "SSL", "ssl.keystore.location": str(store), "ssl.keystore.password": SECRET}


def continued(pem: str) -> str:
    """A PEM as Kafka's documentation writes it in a properties file: one line per line, each but
    the last ending in a backslash (the reader joins them, leading blanks dropped)."""
    return " \\\n  ".join(pem.strip().splitlines())


@pytest.mark.parametrize("written", ["escaped", "continued"])
def test_pem_in_properties_comes_out_as_openssl_reads_it(folder: Path, tmp_path: Path, written: str) -> None:
    chain, key = (folder / "client.pem").read_text(), (folder / "client.key").read_text()
    if written == "escaped":
        lines = [f"ssl.keystore.certificate.chain={pem_one_line(folder / 'client.pem')}",
                 f"ssl.keystore.key={pem_one_line(folder / 'client.key')}",
                 f"ssl.truststore.certificates={pem_one_line(folder / 'ca.pem')}"]
    else:
        lines = [f"ssl.keystore.certificate.chain={continued(chain)}", f"ssl.keystore.key={continued(key)}",
                 f"ssl.truststore.certificates={continued((folder / 'ca.pem').read_text())}"]
    path = tmp_path / "client.properties"
    path.write_text("\n".join(["security.protocol=SSL", "ssl.keystore.type=PEM", "ssl.truststore.type=PEM", *lines]))
    settings = load(str(path))
    assert (settings["ssl.certificate.pem"], settings["ssl.key.pem"]) == (chain, key)
    assert settings["ssl.ca.pem"] == (folder / "ca.pem").read_text()
    accepted(settings)


def test_a_pem_keystore_file_is_split_into_certificate_and_key(folder: Path, tmp_path: Path) -> None:
    store = tmp_path / "client-keystore.pem"
    store.write_text((folder / "client.key").read_text() + (folder / "client.pem").read_text())
    settings = translate({"security.protocol": "SSL", "ssl.keystore.location": str(store),
                          "ssl.truststore.location": str(folder / "ca.pem")})
    assert settings["ssl.certificate.pem"] == (folder / "client.pem").read_text()
    assert settings["ssl.key.pem"] == (folder / "client.key").read_text()
    accepted(settings)


def test_an_encrypted_key_with_its_password(folder: Path) -> None:
    key = serialization.load_pem_private_key((folder / "client.key").read_bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(SECRET.encode())).decode()
    settings = translate({"security.protocol": "SSL", "ssl.keystore.certificate.chain": (folder / "client.pem").read_text(),
                          "ssl.keystore.key": encrypted, "ssl.key.password": SECRET})
    assert settings["ssl.key.pem"].startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
    accepted(settings)


def accepted(settings: dict[str, str]) -> None:
    """librdkafka takes the settings: it loads the certificates and the key when the client is
    made (no bootstrap servers, so it connects nowhere) and raises on what it cannot use."""
    Producer({**settings, "log_level": 0})


@pytest.mark.parametrize(("properties", "message"), [
    ({"ssl.keystore.key": "KEY"}, "ssl.keystore.key needs ssl.keystore.certificate.chain"),
    ({"ssl.keystore.certificate.chain": "CHAIN"}, "ssl.keystore.certificate.chain needs ssl.keystore.key"),
    ({"ssl.keystore.certificate.chain": "no pem", "ssl.keystore.key": "KEY"},
     "ssl.keystore.certificate.chain holds no PEM CERTIFICATE"),
    ({"ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\nA?A\n-----END CERTIFICATE-----",
      "ssl.keystore.key": "KEY"}, "its CERTIFICATE is not base64"),
    ({"ssl.keystore.certificate.chain": "CHAIN", "ssl.keystore.key": "KEY", "ssl.keystore.type": "PKCS12"},
     "ssl.keystore.certificate.chain is PEM text: ssl.keystore.type must be PEM"),
    ({"ssl.keystore.certificate.chain": "CHAIN", "ssl.keystore.key": "KEY", "ssl.keystore.password": SECRET},
     "ssl.keystore.password is not used with a PEM keystore"),
])
def test_keystores_that_cannot_be_used(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        translate({"security.protocol": "SSL", **properties})
    assert SECRET not in str(refused.value)


def test_a_ca_or_a_key_said_twice_is_refused(folder: Path) -> None:
    with pytest.raises(ConfigError, match="give ssl.truststore.location or ssl.ca.location, not both"):
        translate({"security.protocol": "SSL", "ssl.truststore.location": str(folder / "ca.pem"),
                   "ssl.ca.location": str(folder / "ca.pem")})
    with pytest.raises(ConfigError, match="give ssl.keystore.certificate.chain or ssl.key.location, not both"):
        translate({"security.protocol": "SSL", "ssl.keystore.certificate.chain": (folder / "client.pem").read_text(),
                   "ssl.keystore.key": (folder / "client.key").read_text(), "ssl.key.location": "client.key"})


def test_two_private_keys_are_refused(folder: Path) -> None:
    key = (folder / "client.key").read_text()
    with pytest.raises(ConfigError, match="ssl.keystore.key holds more than one private key"):
        translate({"security.protocol": "SSL", "ssl.keystore.certificate.chain": (folder / "client.pem").read_text(),
                   "ssl.keystore.key": key + key})


# -- --command-config on the tools -------------------------------------------------------------

TOOLS = {"topic": ["list"], "group": ["list"], "produce": ["t"], "consume": ["t"], "status": [], "user": ["list"]}


def tool_args(tool: str, *more: str) -> argparse.Namespace:
    module = importlib.import_module(f"martlet.tools.{tool}")
    make = getattr(module, "parser", None) or module._parser
    args: argparse.Namespace = make().parse_args([*TOOLS[tool], *more])
    return args


@pytest.fixture
def bad_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("MARTLET_COMMAND_CONFIG", raising=False)
    path = tmp_path / "bad.properties"
    path.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.password={SECRET}\n")
    yield path


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_takes_the_file_from_the_option_or_the_environment(tool: str, bad_file: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert tool_args(tool).command_config is None
    assert tool_args(tool, "--command-config", str(bad_file)).command_config == str(bad_file)
    monkeypatch.setenv("MARTLET_COMMAND_CONFIG", str(bad_file))
    assert tool_args(tool).command_config == str(bad_file)
    assert tool_args(tool, "--command-config", "other.properties").command_config == "other.properties"


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_file_that_cannot_be_used_is_bad_usage_before_any_connection(tool: str, bad_file: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"martlet.tools.{tool}")
    closed = ["--bootstrap", "127.0.0.1:1", "--timeout", "30"]  # it must not get as far as waiting for it
    assert module.main([*TOOLS[tool], *closed, "--command-config", str(bad_file)]) == USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"martlet: --command-config {bad_file}: sasl.mechanism must be one of") and SECRET not in err


def test_the_environment_is_named_when_the_file_came_from_it(bad_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MARTLET_COMMAND_CONFIG", str(bad_file))
    with pytest.raises(Failed, match=r"\(from \$MARTLET_COMMAND_CONFIG\)$") as failed:
        security_settings(tool_args("topic"))
    assert failed.value.code == USAGE


def test_the_settings_reach_the_client_and_the_tool_keeps_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MARTLET_COMMAND_CONFIG", raising=False)
    path = tmp_path / "client.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={jaas(PLAIN)}\n")
    config = kafka_config(tool_args("topic", "--command-config", str(path), "--bootstrap", "k:9092"), log_level=0)
    assert {key: config[key] for key in ("bootstrap.servers", "security.protocol", "sasl.username", "log_level")} == {
        "bootstrap.servers": "k:9092", "security.protocol": "SASL_PLAINTEXT", "sasl.username": "alice", "log_level": 0}


def test_a_refused_login_reads_as_one_line_without_librdkafkas_prefix() -> None:
    refusals = Refusals()
    args = argparse.Namespace(bootstrap="k:9093")
    assert refusals.failed(args) is None
    refusals.note(KafkaError(KafkaError._TRANSPORT, "sasl_ssl://k:9093/bootstrap: Disconnected"))
    assert refusals.failed(args) is None  # not a refusal: librdkafka goes on trying until --timeout
    refusals.note(KafkaError(KafkaError._AUTHENTICATION, "sasl_ssl://k:9093/bootstrap: SASL authentication error: "
                                                         "Authentication failed"))
    refusals.note(KafkaError(KafkaError._SSL, "ssl://k:9093/bootstrap: SSL handshake failed"))
    failed = refusals.failed(args)
    assert failed is not None and failed.code == 1
    assert str(failed) == "login refused at k:9093: SASL authentication error: Authentication failed (_AUTHENTICATION)"
