"""--command-config FILE: a Kafka client properties file (what kafka-topics.sh --command-config
and the Java client read) as librdkafka settings for the `martlet` commands.

The file is java.util.Properties text: `key=value`, `key: value` or `key value` lines, `#` and
`!` comments, a line ending in an odd number of backslashes continued on the next (its leading
blanks dropped), and the escapes \\t \\n \\r \\f \\uXXXX (any other escaped character stands for
itself). It is read as UTF-8, or as ISO-8859-1 (what Properties.load reads) when it is not
UTF-8; \\uXXXX reads the same in both. Kafka's PEM-in-properties values (ssl.keystore.key,
ssl.keystore.certificate.chain, ssl.truststore.certificates) come with their line breaks escaped
as \\n or as continued lines: both are re-wrapped here into the PEM OpenSSL reads.

Translated (Kafka's name -> librdkafka's):
  security.protocol                    PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, as it is
  sasl.mechanism                       sasl.mechanisms: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
  sasl.jaas.config                     sasl.username and sasl.password, from PlainLoginModule or
                                       ScramLoginModule `required username="..." password="...";`
  ssl.truststore.location (PEM)        ssl.ca.location
  ssl.truststore.certificates (PEM)    ssl.ca.pem
  ssl.keystore.location (PEM)          ssl.certificate.pem and ssl.key.pem, read from the file
  ssl.keystore.location (PKCS12)       ssl.keystore.location and ssl.keystore.password
  ssl.keystore.certificate.chain, ssl.keystore.key (PEM)   ssl.certificate.pem, ssl.key.pem
  ssl.key.password                     ssl.key.password
  ssl.endpoint.identification.algorithm   "https" as it is, "" (Kafka's "off") as "none"
librdkafka's own sasl.username, sasl.password, sasl.mechanisms, ssl.ca.location,
ssl.certificate.location and ssl.key.location are taken as they are.

Anything else is an error (ConfigError), as is what librdkafka cannot do: GSSAPI (Kafka's
default sasl.mechanism, so a SASL protocol needs sasl.mechanism), OAUTHBEARER, JKS stores, a
PKCS12 truststore; also SASL or SSL settings under a protocol that would not use them (Kafka
ignores them: here they are taken for a mistake). No message says a value, so no secret ever
reaches the terminal or a log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

COMMAND_CONFIG_ENV = "MARTLET_COMMAND_CONFIG"
FILE_BYTES_MAX = 1 << 20  # a properties file, or a PEM store it names, larger than this is refused unread

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOGIN_MODULES = {  # sasl.jaas.config's login module -> the mechanisms it logs in with
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
PASSED_ON = ("sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
             "ssl.key.password")  # librdkafka's names, taken as they are
SASL_SETTINGS = ("sasl.username", "sasl.password", "sasl.mechanisms")
SSL_SETTINGS = ("ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.key.location", "ssl.certificate.pem",
                "ssl.key.pem", "ssl.key.password", "ssl.keystore.location", "ssl.keystore.password",
                "ssl.endpoint.identification.algorithm")


class ConfigError(ValueError):
    """A properties file that cannot be used; the message names keys and lines, never a value."""


# -- java.util.Properties ----------------------------------------------------------------------

_BLANKS = " \t\f"
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,4}|.|$)", re.DOTALL)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(text: str) -> dict[str, str]:
    """The keys and values of a properties file's text, as java.util.Properties.load reads
    them (a key given twice keeps its last value)."""
    found: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        found[_unescape(key, number)] = _unescape(value, number)
    return found


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of its first line, text) of each logical line that is not blank or a comment."""
    lines = re.split(r"\r\n|\r|\n", text)
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continued(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip(_BLANKS)
            index += 1
        yield number, line[:-1] if _continued(line) else line


def _continued(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """The key (up to the first unescaped "=", ":" or blank) and the value of a logical line."""
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANKS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return line[:end], rest


def _unescape(text: str, number: int) -> str:
    def one(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped.startswith("u"):
            if len(escaped) != 5:
                raise ConfigError(f"line {number}: a \\u escape needs four hexadecimal digits")
            return chr(int(escaped[1:], 16))
        return _ESCAPED.get(escaped, escaped)

    return _ESCAPE.sub(one, text)


# -- Kafka's client properties as librdkafka's -------------------------------------------------

def load(path: str) -> dict[str, str]:
    """librdkafka settings from the Kafka client properties file at `path`; ConfigError (its
    message starting with the file's name) when it cannot be read or used."""
    try:
        return translate(read_properties(_properties_text(Path(path))))
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def translate(properties: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings for Kafka client `properties` (see the module's header)."""
    left = dict(properties)
    settings: dict[str, str] = {}
    origins: dict[str, str] = {}  # librdkafka setting -> the property it came from
    for key, translator in TRANSLATORS.items():
        if key in left:
            _add(settings, origins, key, translator(left.pop(key), left))
    for key in PASSED_ON:
        if key in left:
            _add(settings, origins, key, {key: left.pop(key)})
    _check_all_used(left)
    module = settings.pop(JAAS_MODULE, None)
    protocol = settings.get("security.protocol", "PLAINTEXT")
    if protocol.startswith("SASL_"):
        _check_login(settings, module)
    _check_used_by(protocol, settings)
    return settings


# librdkafka settings that say the same thing (a CA, a certificate, a key) in other ways: two
# properties leading to one group would say it twice, perhaps differently.
SAME_THING = (("ssl.ca.location", "ssl.ca.pem"),
              ("ssl.certificate.location", "ssl.certificate.pem", "ssl.keystore.location"),
              ("ssl.key.location", "ssl.key.pem", "ssl.keystore.location"))


def _add(settings: dict[str, str], origins: dict[str, str], key: str, found: Mapping[str, str]) -> None:
    """`found`, what property `key` translates to, into `settings`; ConfigError when an earlier
    property already said it."""
    for name, value in found.items():
        rivals = {name}.union(*(group for group in SAME_THING if name in group))
        earlier = sorted({origins[rival] for rival in rivals if rival in origins})
        if earlier:
            raise ConfigError(f"give {earlier[0]} or {key}, not both")
        settings[name], origins[name] = value, key


def _check_all_used(left: dict[str, str]) -> None:
    """What no translator took: a store's type (PEM, which says nothing librdkafka needs) is
    let go; anything else is refused, named when it looks like a property (a line of the file
    that is something else, a password pasted alone, is only counted)."""
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        left.pop(key, None)
    if not left:
        return
    named = sorted(key for key in left if PROPERTY_NAME.fullmatch(key))
    others = len(left) - len(named)
    unnamed = "1 more line that names" if others == 1 else f"{others} more lines that name"
    listed = ", ".join(named) + (f"{' and ' if named else ''}{unnamed} no property" if others else "")
    raise ConfigError(f"unknown or unsupported: {listed} (supported: {', '.join(sorted({*TRANSLATORS, *PASSED_ON}))})")


PROPERTY_NAME = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+")


def _protocol(value: str, _left: dict[str, str]) -> dict[str, str]:
    protocol = value.strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}")
    return {"security.protocol": protocol}


def _mechanism(value: str, _left: dict[str, str]) -> dict[str, str]:
    mechanism = value.strip().upper()
    if mechanism not in MECHANISMS:
        raise ConfigError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)} (GSSAPI and OAUTHBEARER are not "
                          "supported here)")
    return {"sasl.mechanisms": mechanism}


# -- sasl.jaas.config: `<login module> <flag> name="value" ...;` (Kafka's JaasConfig) ---------

JAAS_MODULE = "jaas.module"  # where _jaas leaves the login module for _check_login (not a librdkafka setting)
JAAS_EXAMPLE = '<PlainLoginModule or ScramLoginModule> required username="..." password="...";'
JAAS_SHAPE = f"sasl.jaas.config must be `{JAAS_EXAMPLE}`"
_JAAS = re.compile(r"\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<options>(?:\s.*?)?);?\s*",
                   re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*(?P<name>[\w.$-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s;"=]+))',
                          re.DOTALL)


def _jaas(value: str, _left: dict[str, str]) -> dict[str, str]:
    entry = _JAAS.fullmatch(value)
    if entry is None:
        raise ConfigError(JAAS_SHAPE)
    module = entry.group("module")
    if module not in LOGIN_MODULES:
        raise ConfigError(f"sasl.jaas.config: only {' and '.join(LOGIN_MODULES)} are supported")
    options = _jaas_options(entry.group("options"))
    if set(options) != {"username", "password"}:
        raise ConfigError(f"{JAAS_SHAPE}: it has {', '.join(sorted(options)) or 'no options'}")
    return {"sasl.username": options["username"], "sasl.password": options["password"], JAAS_MODULE: module}


def _jaas_options(text: str) -> dict[str, str]:
    """name -> value of a JAAS entry's options (a quoted value's backslash escapes undone)."""
    options: dict[str, str] = {}
    position = 0
    while text[position:].strip():
        option = _JAAS_OPTION.match(text, position)
        if option is None:
            raise ConfigError(JAAS_SHAPE)
        quoted = option.group("quoted")
        options[option.group("name")] = option.group("word") if quoted is None else re.sub(r"\\(.)", r"\1", quoted)
        position = option.end()
    return options


def _check_login(settings: dict[str, str], module: str | None) -> None:
    """A SASL protocol needs a mechanism (Kafka's default, GSSAPI, is not here), a user, and a
    login module, if given, that logs in with that mechanism."""
    mechanism = settings.get("sasl.mechanisms")
    if mechanism is None:
        raise ConfigError(f"{settings['security.protocol']} needs sasl.mechanism ({', '.join(MECHANISMS)}; Kafka's "
                          "default, GSSAPI, is not supported)")
    if module is not None and mechanism not in LOGIN_MODULES[module]:
        raise ConfigError(f"sasl.jaas.config's {module.rsplit('.', 1)[-1]} does not log in with {mechanism}")
    if "sasl.username" not in settings or "sasl.password" not in settings:
        raise ConfigError(f"{settings['security.protocol']} needs a user: sasl.jaas.config (`{JAAS_EXAMPLE}`) or "
                          "sasl.username and sasl.password")


def _check_used_by(protocol: str, settings: Mapping[str, str]) -> None:
    """SASL settings under a protocol without SASL, or SSL settings under one without TLS, are
    taken for a mistake (Kafka would ignore them, and connect with less than was meant)."""
    for wanted, keys, protocols in (("SASL_", SASL_SETTINGS, "SASL_SSL or SASL_PLAINTEXT"),
                                    ("SSL", SSL_SETTINGS, "SSL or SASL_SSL")):
        given = [key for key in keys if key in settings]
        if given and wanted not in protocol:
            raise ConfigError(f"{', '.join(given)} given, but security.protocol is {protocol}: set it to {protocols}")


# -- TLS: truststores, keystores, PEM ----------------------------------------------------------

def _truststore(value: str, left: dict[str, str]) -> dict[str, str]:
    if _store_type(left.get("ssl.truststore.type"), Path(value), "ssl.truststore") != "PEM":
        raise ConfigError("ssl.truststore.type must be PEM: librdkafka reads no JKS or PKCS12 truststore (export its "
                          "certificates with `keytool -exportcert -rfc` into a PEM file)")
    _no_password(left, "ssl.truststore.password", "a PEM truststore")
    if "-----BEGIN CERTIFICATE-----" not in _text(Path(value), "ssl.truststore.location"):
        raise ConfigError("ssl.truststore.location holds no PEM certificate")
    return {"ssl.ca.location": value}


def _truststore_certificates(value: str, left: dict[str, str]) -> dict[str, str]:
    _pem_type(left, "ssl.truststore.type", "ssl.truststore.certificates")
    _no_password(left, "ssl.truststore.password", "a PEM truststore")
    return {"ssl.ca.pem": _pem(value, "CERTIFICATE", "ssl.truststore.certificates")}


def _keystore(value: str, left: dict[str, str]) -> dict[str, str]:
    kind = _store_type(left.get("ssl.keystore.type"), Path(value), "ssl.keystore")
    if kind == "PKCS12":  # librdkafka's ssl.keystore.* are PKCS#12 only
        password = left.pop("ssl.keystore.password", None)
        return {"ssl.keystore.location": value, **({} if password is None else {"ssl.keystore.password": password})}
    if kind != "PEM":
        raise ConfigError("ssl.keystore.type must be PEM or PKCS12: librdkafka reads no JKS keystore")
    _no_password(left, "ssl.keystore.password", "a PEM keystore (its key's password is ssl.key.password)")
    text = _text(Path(value), "ssl.keystore.location")
    return {"ssl.certificate.pem": _pem(text, "CERTIFICATE", "ssl.keystore.location"),
            "ssl.key.pem": _pem(text, "PRIVATE KEY", "ssl.keystore.location")}


def _certificate_chain(value: str, left: dict[str, str]) -> dict[str, str]:
    _pem_type(left, "ssl.keystore.type", "ssl.keystore.certificate.chain")
    _no_password(left, "ssl.keystore.password", "a PEM keystore (its key's password is ssl.key.password)")
    if "ssl.keystore.key" not in left:
        raise ConfigError("ssl.keystore.certificate.chain needs ssl.keystore.key")
    return {"ssl.certificate.pem": _pem(value, "CERTIFICATE", "ssl.keystore.certificate.chain"),
            "ssl.key.pem": _pem(left.pop("ssl.keystore.key"), "PRIVATE KEY", "ssl.keystore.key")}


def _keystore_key(_value: str, _left: dict[str, str]) -> dict[str, str]:
    raise ConfigError("ssl.keystore.key needs ssl.keystore.certificate.chain")  # which takes it when given


def _endpoint_identification(value: str, _left: dict[str, str]) -> dict[str, str]:
    algorithm = value.strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError("ssl.endpoint.identification.algorithm must be https (the default) or empty (no check)")
    return {"ssl.endpoint.identification.algorithm": algorithm or "none"}


def _store_type(given: str | None, path: Path, prefix: str) -> str:
    """The store's type as given, else PEM for a file that holds PEM: Kafka's default, JKS,
    would fail anyway, and a PEM file is taken for what it is."""
    if given is not None and given.strip():
        return given.strip().upper()
    if b"-----BEGIN " in _bytes(path, f"{prefix}.location"):
        return "PEM"
    raise ConfigError(f"{prefix}.location is not PEM and {prefix}.type is not set: Kafka's default type, JKS, is not "
                      f"supported: set {prefix}.type=PEM (or PKCS12 for a keystore)")


def _pem_type(left: dict[str, str], key: str, value_key: str) -> None:
    if left.get(key, "PEM").strip().upper() != "PEM":
        raise ConfigError(f"{value_key} is PEM text: {key} must be PEM")


def _no_password(left: dict[str, str], key: str, what: str) -> None:
    if key in left:  # Kafka refuses it too
        raise ConfigError(f"{key} is not used with {what}: remove it")


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_BASE64 = re.compile(r"[A-Za-z0-9+/=]+")
PEM_LINE_CHARS = 64


def _pem(text: str, label: str, key: str) -> str:
    """The PEM blocks of `text` whose label ends with `label` (CERTIFICATE; PRIVATE KEY also
    finds ENCRYPTED, RSA and EC PRIVATE KEY), each as OpenSSL writes it: the base64 wrapped at
    64 characters, whatever blanks or line breaks the properties file left in it."""
    blocks = [_pem_block(name, body, key) for name, body in _PEM_BLOCK.findall(text) if name.endswith(label)]
    if not blocks:
        raise ConfigError(f"{key} holds no PEM {label}")
    if label == "PRIVATE KEY" and len(blocks) > 1:
        raise ConfigError(f"{key} holds more than one private key")
    return "\n".join(blocks) + "\n"


def _pem_block(name: str, body: str, key: str) -> str:
    data = re.sub(r"\s+", "", body)
    if not _BASE64.fullmatch(data):
        raise ConfigError(f"{key}: its {name} is not base64 (a PEM with headers, such as an OpenSSL legacy "
                          "encrypted key, is not supported: use PKCS#8)")
    lines = [data[start:start + PEM_LINE_CHARS] for start in range(0, len(data), PEM_LINE_CHARS)]
    return "\n".join([f"-----BEGIN {name}-----", *lines, f"-----END {name}-----"])


def _bytes(path: Path, key: str) -> bytes:
    """The file's bytes, refused unread above FILE_BYTES_MAX."""
    try:
        with path.open("rb") as file:
            data = file.read(FILE_BYTES_MAX + 1)
    except OSError as error:
        raise ConfigError(f"{key}: cannot read {path}: {error.strerror or error}") from None
    if len(data) > FILE_BYTES_MAX:
        raise ConfigError(f"{key}: {path} is larger than {FILE_BYTES_MAX} bytes")
    return data


def _properties_text(path: Path) -> str:
    data = _bytes(path, "the file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def _text(path: Path, key: str) -> str:
    try:
        return _bytes(path, key).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{key}: {path} is not UTF-8 text") from None


TRANSLATORS: dict[str, Callable[[str, dict[str, str]], dict[str, str]]] = {
    "security.protocol": _protocol,
    "sasl.mechanism": _mechanism,
    "sasl.mechanisms": _mechanism,  # librdkafka's name
    "sasl.jaas.config": _jaas,
    "ssl.truststore.location": _truststore,
    "ssl.truststore.certificates": _truststore_certificates,
    "ssl.keystore.location": _keystore,
    "ssl.keystore.certificate.chain": _certificate_chain,
    "ssl.keystore.key": _keystore_key,
    "ssl.endpoint.identification.algorithm": _endpoint_identification,
}
