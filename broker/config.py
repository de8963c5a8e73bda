"""`martlet serve` settings: defaults, then the TOML config file, then command-line flags.

The config file has eight sections, [gateway], [http], [udp], [tls], [sasl], [engine], [groups] and
[topic_defaults];
every key is optional. broker/config_keys.py lists each key with its default and meaning, and
`martlet config` prints them as a file.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from ..engine.api import EngineSettings, GroupLimits, TopicConfig, errors
from ..gateway import connection_limits, tls
from ..gateway.broker_dynamic import static_limits
from ..gateway.http.auth import HttpSettings
from ..gateway.listeners import WILDCARD_HOSTS, Listeners, parse_listeners
from ..gateway.sasl import SaslSettings
from ..gateway.settings import GatewaySettings
from ..gateway.tls import TlsSettings

HTTP_DEFAULT = "127.0.0.1:9644"
HTTP_OFF = ("", "off")
UDP_RATE_DEFAULT = 10_000


class ConfigError(Exception):
    """A config file or flag that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    data_dir: str = "./martlet-data"
    advertised: str | None = None
    # Kafka's listeners ([gateway] listeners and the keys beside it); None: one PLAINTEXT
    # listener at `listen` (GatewaySettings.listen_host/port), advertised as `advertised`.
    listeners: Listeners | None = None
    tls: TlsSettings = field(default_factory=TlsSettings)  # [tls]: what SSL listeners serve
    sasl: SaslSettings = field(default_factory=SaslSettings)  # [sasl]: what SASL listeners accept
    insecure: bool = False  # serve plaintext doors on addresses other machines reach (`exposed`)
    store: str | None = None  # "hdfs://HOST:PORT/ROOT"; None keeps the data in data_dir
    zookeeper: str | None = None  # "HOST:PORT[/chroot]": join that cluster; None: the embedded single node
    zookeeper_session_ms: int = 4000  # a broker silent this long is dead and its partitions move
    # The HTTP port (API, metrics, console); "" turns it off. Any address but the default must
    # be bound; the default, when taken, only gives a warning (another broker on this machine).
    http_listen: str = HTTP_DEFAULT
    http: HttpSettings = field(default_factory=HttpSettings)  # [http] tls, login, metrics_open, session_ms
    # The UDP front end (gateway/udp.py): "HOST:PORT", or "" for none (the default).
    udp_listen: str = ""
    udp_rate_per_source: int = UDP_RATE_DEFAULT  # datagrams a second per source address; 0: no limit
    # The topics datagrams may write (None: any). UDP cannot authenticate, so with TLS or SASL
    # on any listener the front end needs this list (`unauthenticated_udp`).
    udp_topics: tuple[str, ...] | None = None


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"address {text!r} is not HOST:PORT")
    return host, int(port)


def load(path: str | None) -> ServeConfig:
    if path is None:
        return ServeConfig()
    try:
        with open(path, "rb") as handle:
            doc = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    return from_document(doc)


def from_document(doc: dict[str, Any]) -> ServeConfig:
    unknown = set(doc) - {"gateway", "http", "udp", "tls", "sasl", "engine", "groups", "topic_defaults"}
    if unknown:
        raise ConfigError(f"unknown config sections: {', '.join(sorted(unknown))}")
    config = ServeConfig()
    gateway = dict(doc.get("gateway", {}))
    config = _apply_locations(config, gateway)
    config = replace(config, gateway=_fill(config.gateway, gateway, "gateway"))
    try:
        connection_limits.parse(static_limits(config.gateway))
    except ValueError as error:
        raise ConfigError(f"[gateway]: {error}") from None
    config = _apply_tls(config, dict(doc.get("tls", {})))
    config = _apply_sasl(config, dict(doc.get("sasl", {})))
    config = _apply_http(config, dict(doc.get("http", {})))
    config = _apply_udp(config, dict(doc.get("udp", {})))
    try:
        topic_section = dict(doc.get("topic_defaults", {}))
        if "kept" in topic_section:  # the gateway's store for Kafka configs without effect, not a key
            raise errors.InvalidConfig("unknown topic config 'kept'")
        topic_defaults = TopicConfig().updated(topic_section)
    except errors.InvalidConfig as error:
        raise ConfigError(f"[topic_defaults]: {error}") from None
    groups = _fill(GroupLimits(), dict(doc.get("groups", {})), "groups")
    engine = _fill(EngineSettings(topic_defaults=topic_defaults, groups=groups), dict(doc.get("engine", {})), "engine")
    return replace(config, engine=engine)


LISTENER_KEYS = ("listeners", "listener_security_protocol_map", "advertised_listeners", "inter_broker_listener_name")


def listeners_of(config: ServeConfig) -> Listeners:
    """The listeners the broker serves: those configured, else one PLAINTEXT listener at `listen`."""
    if config.listeners is not None:
        return config.listeners
    settings = config.gateway
    host = settings.listen_host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address, as listeners write it
    advertised = [f"PLAINTEXT://{config.advertised}"] if config.advertised else []
    return parse_listeners([f"PLAINTEXT://{host}:{settings.listen_port}"], None, advertised)


def _apply_listeners(config: ServeConfig, gateway: dict[str, object]) -> ServeConfig:
    given = {key: gateway.pop(key) for key in LISTENER_KEYS if key in gateway}
    if not given:
        return config
    if "listeners" not in given:
        raise ConfigError(f"[gateway] {next(iter(given))} needs listeners")
    if "listen" in gateway or "advertised" in gateway:
        raise ConfigError("[gateway]: listeners replaces listen and advertised; name one or the other")
    listeners, advertised = given["listeners"], given.get("advertised_listeners", [])
    protocol_map, inter_broker = given.get("listener_security_protocol_map"), given.get("inter_broker_listener_name")
    if not _strings(listeners) or not _strings(advertised):
        raise ConfigError('[gateway] listeners and advertised_listeners: expected lists of "NAME://HOST:PORT"')
    if not (protocol_map is None or isinstance(protocol_map, str) or _table_of_strings(protocol_map)):
        raise ConfigError('[gateway] listener_security_protocol_map: expected "NAME:PROTOCOL,..." or a table')
    if not (inter_broker is None or isinstance(inter_broker, str)):
        raise ConfigError("[gateway] inter_broker_listener_name: expected a listener's name")
    try:
        parsed = parse_listeners(listeners, protocol_map, advertised, inter_broker)
    except ValueError as error:
        raise ConfigError(f"[gateway] {error}") from None
    return replace(config, listeners=parsed)


def _apply_tls(config: ServeConfig, section: dict[str, object]) -> ServeConfig:
    """[tls], checked (files loaded) when a listener uses it."""
    if "protocols" in section:
        protocols = section["protocols"]
        if not _strings(protocols):
            raise ConfigError('[tls] protocols: expected a list such as ["TLSv1.2", "TLSv1.3"]')
        section["protocols"] = tuple(protocols)
    settings = _fill(TlsSettings(), section, "tls")
    if config.listeners is not None and any(listener.protocol.tls for listener in config.listeners.all):
        try:
            tls.check(settings)
        except ValueError as error:
            raise ConfigError(str(error)) from None
    return replace(config, tls=settings)


def _apply_sasl(config: ServeConfig, section: dict[str, object]) -> ServeConfig:
    """[sasl], checked (the brokers' own login: `missing_inter_broker_login`, once flags are in)."""
    if "enabled_mechanisms" in section:
        mechanisms = section["enabled_mechanisms"]
        if not _strings(mechanisms):
            raise ConfigError('[sasl] enabled_mechanisms: expected a list such as ["SCRAM-SHA-512", "PLAIN"]')
        section["enabled_mechanisms"] = tuple(name.upper() for name in mechanisms)
    if "oauthbearer_expected_audience" in section:
        audience = section["oauthbearer_expected_audience"]
        if not _strings(audience):
            raise ConfigError('[sasl] oauthbearer_expected_audience: expected a list such as ["martlet"]')
        section["oauthbearer_expected_audience"] = tuple(audience)
    settings = _fill(SaslSettings(), section, "sasl")
    try:
        settings.check()
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return replace(config, sasl=settings)


def missing_inter_broker_login(config: ServeConfig) -> str | None:
    """Why brokers of this cluster could not call each other: a SASL inter-broker listener
    without [sasl] inter_broker_user and inter_broker_password. A single broker (no
    ZooKeeper) calls no other, so it needs none."""
    listeners = listeners_of(config)
    sasl = config.sasl
    if (config.zookeeper is not None and listeners.named(listeners.inter_broker).protocol.sasl
            and not (sasl.inter_broker_user and sasl.inter_broker_password)):
        return (f"[sasl] inter_broker_user and inter_broker_password: the inter-broker listener "
                f"{listeners.inter_broker} uses SASL, so the brokers of a cluster need a user of their own")
    return None


def secured(config: ServeConfig) -> bool:
    """TLS or SASL on some listener: the broker means to know who its clients are."""
    return any(listener.protocol.tls or listener.protocol.sasl for listener in listeners_of(config).all)


def unauthenticated_udp(config: ServeConfig) -> str | None:
    """Why the UDP front end may not run as configured: with security on, datagrams (which
    cannot authenticate) may only write the topics [udp] topics names."""
    if config.udp_listen and config.udp_topics is None and secured(config):
        return ("[udp] topics: the listeners use TLS or SASL, and the UDP front end cannot authenticate its "
                "senders; name the topics datagrams may write (topics = [...]) or turn it off")
    return None


def open_http(config: ServeConfig) -> str | None:
    """A warning when the listeners know who their clients are but the HTTP port, which can
    create and delete topics too, asks nobody ([http] login off)."""
    if config.http_listen and secured(config) and not config.http.login:
        return (f"the HTTP port {config.http_listen} needs no login while the Kafka listeners use TLS or SASL: "
                "whoever reaches it may create and delete topics; set [http] login = true (and tls) or --http off")
    return None


def exposed(config: ServeConfig) -> list[str]:
    """The doors that let anyone who reaches them do anything (no TLS, no authentication) and
    listen where other machines reach them: `martlet serve` refuses them unless `insecure`."""
    doors = [f"the Kafka listener {listener}" for listener in listeners_of(config).all
             if not listener.protocol.tls and not listener.protocol.sasl and not _loopback(listener.host)]
    if config.http_listen and not _loopback(parse_address(config.http_listen)[0]) and not (
            config.http.tls and config.http.login):  # secured only with both: a login sent in plaintext is no lock
        doors.append(f"the HTTP port {config.http_listen}")
    udp_narrowed = config.udp_topics is not None and secured(config)  # datagrams write only the topics named
    if config.udp_listen and not _loopback(parse_address(config.udp_listen)[0]) and not udp_narrowed:
        doors.append(f"the UDP front end {config.udp_listen}")
    return doors


def _loopback(host: str) -> bool:
    """Only this machine reaches `host` (every address a name resolves to is a loopback one)."""
    host = host.strip("[]")
    if host in WILDCARD_HOSTS:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(str(address[4][0]).split("%")[0]).is_loopback
                               for address in found)


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _table_of_strings(value: object) -> TypeGuard[dict[str, str]]:
    return isinstance(value, dict) and all(isinstance(item, str) for item in (*value, *value.values()))


def _apply_locations(config: ServeConfig, gateway: dict[str, Any]) -> ServeConfig:
    config = _apply_listeners(config, gateway)
    if "listen" in gateway:
        config = with_listen(config, gateway.pop("listen"))
    if "advertised" in gateway:
        config = replace(config, advertised=gateway.pop("advertised"))
    if "data_dir" in gateway:
        config = replace(config, data_dir=gateway.pop("data_dir"))
    if "store" in gateway:
        config = with_store(config, gateway.pop("store"))
    if "zookeeper" in gateway:
        config = replace(config, zookeeper=gateway.pop("zookeeper"))
    if "insecure" in gateway:
        insecure = gateway.pop("insecure")
        if not isinstance(insecure, bool):
            raise ConfigError(f"[gateway] insecure: expected true or false, got {insecure!r}")
        config = replace(config, insecure=insecure)
    if "zookeeper_session_ms" in gateway:
        config = replace(config, zookeeper_session_ms=int(gateway.pop("zookeeper_session_ms")))
    return config


HTTP_SECURITY_KEYS = ("tls", "login", "metrics_open", "session_ms")


def _apply_http(config: ServeConfig, section: dict[str, object]) -> ServeConfig:
    unknown = set(section) - {"listen", "allowed_hosts", *HTTP_SECURITY_KEYS}
    if unknown:
        raise ConfigError(f"[http]: unknown key {sorted(unknown)[0]!r}")
    config = _apply_http_security(config, {key: section[key] for key in HTTP_SECURITY_KEYS if key in section})
    if "allowed_hosts" in section:
        config = with_allowed_hosts(config, section["allowed_hosts"])
    if "listen" not in section:
        return config
    listen = section["listen"]
    if not isinstance(listen, str):
        raise ConfigError(f"[http] listen: expected str, got {listen!r}")
    return with_http(config, listen)


def _apply_http_security(config: ServeConfig, section: dict[str, object]) -> ServeConfig:
    """[http] tls, login, metrics_open and session_ms; tls needs [tls] certificate and key."""
    settings = _fill(HttpSettings(), section, "http")
    try:
        settings.check()
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if settings.tls and not (config.tls.certificate and config.tls.key):
        raise ConfigError("[http] tls: HTTPS is served with [tls] certificate and key; set both")
    if settings.tls:
        try:
            tls.check(config.tls)
        except ValueError as error:
            raise ConfigError(f"[http] tls: {error}") from None
    return replace(config, http=settings)


def _apply_udp(config: ServeConfig, section: dict[str, object]) -> ServeConfig:
    unknown = set(section) - {"listen", "rate_per_source", "topics"}
    if unknown:
        raise ConfigError(f"[udp]: unknown key {sorted(unknown)[0]!r}")
    if "topics" in section:
        topics = section["topics"]
        if not _strings(topics) or not topics:
            raise ConfigError('[udp] topics: expected a list of topic names such as ["metrics"]')
        config = replace(config, udp_topics=tuple(topics))
    rate = section.get("rate_per_source", config.udp_rate_per_source)
    if type(rate) is not int or rate < 0:
        raise ConfigError(f"[udp] rate_per_source: expected an int >= 0, got {rate!r}")
    config = replace(config, udp_rate_per_source=rate)
    listen = section.get("listen", config.udp_listen)
    if not isinstance(listen, str):
        raise ConfigError(f"[udp] listen: expected str, got {listen!r}")
    return with_udp(config, listen)


def with_udp(config: ServeConfig, text: str) -> ServeConfig:
    """The UDP front end at `text` ("HOST:PORT", or "" / "off" for none)."""
    if text not in HTTP_OFF:
        parse_address(text)
    return replace(config, udp_listen="" if text in HTTP_OFF else text)


def with_http(config: ServeConfig, text: str) -> ServeConfig:
    """The HTTP port at `text` ("HOST:PORT", or "" / "off" for none)."""
    if text not in HTTP_OFF:
        parse_address(text)
    return replace(config, http_listen="" if text in HTTP_OFF else text)


def with_allowed_hosts(config: ServeConfig, names: object) -> ServeConfig:
    """[http] allowed_hosts: a list of host names ("*": any) the HTTP port's Host field may give."""
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise ConfigError(f"[http] allowed_hosts: expected a list of host names, got {names!r}")
    return replace(config, gateway=replace(config.gateway, http_allowed_hosts=tuple(names)))


def with_store(config: ServeConfig, url: str) -> ServeConfig:
    split_hdfs_url(url)
    return replace(config, store=url)


def split_hdfs_url(url: str) -> tuple[str, str]:
    """("hdfs://host:port", "/root") from "hdfs://host:port/root"."""
    scheme, sep, rest = url.partition("://")
    authority, _, path = rest.partition("/")
    if scheme != "hdfs" or not sep or not authority:
        raise ConfigError(f"store {url!r} is not hdfs://HOST:PORT/PATH")
    return f"hdfs://{authority}", "/" + (path.strip("/") or "martlet")


def with_advertised(config: ServeConfig, text: str) -> ServeConfig:
    if config.listeners is not None:
        raise ConfigError("--advertised: the config file names listeners; change advertised_listeners there")
    return replace(config, advertised=text)


def with_listen(config: ServeConfig, text: str) -> ServeConfig:
    if config.listeners is not None:
        raise ConfigError("--listen: the config file names listeners; change them there")
    host, port = parse_address(text)
    return replace(config, gateway=replace(config.gateway, listen_host=host, listen_port=port))


# Keys renamed since they were first documented: the file gets a clear error, not a guess.
RENAMED = {"commit_bytes": "flush_bytes", "commit_ms": "flush_ms", "persist_threads": "flush_threads"}


def _fill(settings: Any, values: dict[str, Any], section: str) -> Any:
    known = {f.name: f for f in dataclasses.fields(settings)}
    for name, value in values.items():
        if name in RENAMED:
            raise ConfigError(f"[{section}]: {name!r} is now called {RENAMED[name]!r}")
        if name not in known or name in ("topic_defaults", "groups", "http_allowed_hosts", "endpoints", "bound"):
            raise ConfigError(f"[{section}]: unknown key {name!r}")
        if type(value) is not type(getattr(settings, name)):
            raise ConfigError(f"[{section}] {name}: expected {type(getattr(settings, name)).__name__}, got {value!r}")
    return replace(settings, **values)
