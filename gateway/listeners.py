"""Kafka's listeners: the doors of a broker, each with a name, a security protocol and the
address clients are told.

    listeners = ["CLIENT://0.0.0.0:9093", "LOCAL://127.0.0.1:9092"]
    listener_security_protocol_map = "CLIENT:SSL,LOCAL:PLAINTEXT"   (or a table)
    advertised_listeners = ["CLIENT://broker1.example.com:9093"]
    inter_broker_listener_name = "LOCAL"

as Kafka reads `listeners`, `listener.security.protocol.map`, `advertised.listeners` and
`inter.broker.listener.name`: names are unique, and so are ports (but 0, "any free port");
without a map a name must be a protocol's own name (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL); an empty host binds every interface; a listener not named in
advertised_listeners advertises where it listens (the bound address once it is bound), and
no advertised address may be the unroutable 0.0.0.0. Brokers talk to each other on the
inter-broker listener (default: the first). A configuration error is a ValueError whose text
names the setting, as Kafka's ConfigException does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})  # listening on every address: none a client can be told


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper case, as Kafka keeps listener names
    protocol: SecurityProtocol
    host: str  # "" : every interface
    port: int  # 0: a free port, known once bound
    advertised: tuple[str, int] | None = None  # None: where it listens

    def __str__(self) -> str:
        return f"{self.name}://{join_address(self.host, self.port)}"


class Listeners(NamedTuple):
    all: tuple[Listener, ...]  # in the order the settings name them
    inter_broker: str  # the name of the one brokers talk to each other on

    def named(self, name: str) -> Listener:
        return next(listener for listener in self.all if listener.name == name)


def parse_listeners(listeners: Iterable[str], protocol_map: str | Mapping[str, str] | None = None,
                    advertised: Iterable[str] = (), inter_broker: str | None = None) -> Listeners:
    """The listeners these settings name."""
    protocols = _protocol_map(protocol_map)
    found: dict[str, Listener] = {}
    ports: set[int] = set()
    for text in listeners:
        name, host, port = parse_endpoint(text, "listeners")
        if name in found:
            raise ValueError(f"listeners: {name} is named twice")
        if port and port in ports:
            raise ValueError(f"listeners: port {port} is used twice")
        ports.add(port)
        protocol = protocols.get(name) if protocols else _default_protocol(name)
        if protocol is None:
            raise ValueError(f"listeners: {name} has no security protocol in listener_security_protocol_map")
        found[name] = Listener(name, protocol, host, port)
    if not found:
        raise ValueError("listeners: at least one listener is needed")
    for text in advertised:
        _advertise(found, text)
    first = inter_broker.upper() if inter_broker else next(iter(found))
    if first not in found:
        raise ValueError(f"inter_broker_listener_name: {inter_broker} is not one of the listeners ({', '.join(found)})")
    return Listeners(tuple(found.values()), first)


def _advertise(found: dict[str, Listener], text: str) -> None:
    name, host, port = parse_endpoint(text, "advertised_listeners")
    listener = found.get(name)
    if listener is None:
        raise ValueError(f"advertised_listeners: {name} is not one of the listeners ({', '.join(found)})")
    if listener.advertised is not None:
        raise ValueError(f"advertised_listeners: {name} is named twice")
    if host in WILDCARD_HOSTS:
        raise ValueError(f"advertised_listeners: {text} is not an address a client can reach "
                         "(the unroutable meta-address, or no host)")
    if port == 0:
        raise ValueError(f"advertised_listeners: {text} needs a port")
    found[name] = Listener(listener.name, listener.protocol, listener.host, listener.port, (host, port))


def _protocol_map(given: str | Mapping[str, str] | None) -> dict[str, SecurityProtocol]:
    if not given:
        return {}
    pairs: Iterable[tuple[str, str]]
    if isinstance(given, str):
        pairs = [_pair(item) for item in given.split(",") if item.strip()]
    else:
        pairs = given.items()
    protocols = {}
    for name, protocol in pairs:
        try:
            protocols[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            known = ", ".join(p.value for p in SecurityProtocol)
            raise ValueError(f"listener_security_protocol_map: {protocol!r} is no security protocol ({known})") from None
    return protocols


def _pair(item: str) -> tuple[str, str]:
    name, sep, protocol = item.partition(":")
    if not sep or not name.strip() or not protocol.strip():
        raise ValueError(f'listener_security_protocol_map: {item!r} is not "NAME:PROTOCOL"')
    return name, protocol


def _default_protocol(name: str) -> SecurityProtocol | None:
    try:
        return SecurityProtocol(name)
    except ValueError:
        return None


def parse_endpoint(text: str, setting: str = "listener") -> tuple[str, str, int]:
    """(NAME, host, port) of "NAME://host:port"; an IPv6 host in brackets."""
    name, sep, address = text.strip().partition("://")
    if not sep or not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f'{setting}: {text!r} is not "NAME://HOST:PORT"')
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f'{setting}: {text!r} is not "NAME://HOST:PORT" (a port 0-65535)')
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{setting}: {text!r}: an IPv6 host goes in brackets")
    return name.upper(), host, int(port)


def join_address(host: str, port: int) -> str:
    """"host:port", an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
