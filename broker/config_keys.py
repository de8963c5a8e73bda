"""Every key of the `martlet serve --config` file, with its default and what it does.

`martlet config` prints this as a TOML file whose values are the defaults, and README.md's
configuration section is that output (tests/unit/broker/test_config_keys.py holds the two
together and fails on a settings field without a note here).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..engine.api import EngineSettings, GroupLimits, TopicConfig
from ..gateway.http.auth import HttpSettings
from ..gateway.sasl import SaslSettings
from ..gateway.settings import GatewaySettings
from ..gateway.tls import TlsSettings
from .config import ServeConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# [gateway]: the file's names; listen/advertised are HOST:PORT, data_dir and store are paths.
GATEWAY_NOTES = {
    "listen": "address to listen on; port 0 picks a free port",
    "advertised": "address written into Metadata answers (default: the listen address)",
    "listeners": 'Kafka\'s listeners, "NAME://HOST:PORT" each; replaces listen and advertised',
    "listener_security_protocol_map": 'Kafka\'s listener.security.protocol.map, "NAME:PROTOCOL,..." or a table '
                                      "(default: each name is its protocol; PLAINTEXT only for now)",
    "advertised_listeners": "what Metadata tells clients of each listener they came in on (default: where it listens)",
    "inter_broker_listener_name": "the listener brokers reach each other on, its address the node's own (default: the first)",
    "data_dir": "where data lives; a second broker on a data dir in use refuses to start",
    "store": 'keep the data on HDFS instead ("hdfs://HOST:PORT/PATH"); the data dir keeps the lock',
    "frame_bytes_max": "larger requests close the connection (Kafka's socket.request.max.bytes)",
    "auto_create_topics": "Kafka's auto.create.topics.enable",
    "default_partitions": "partitions of an auto-created topic (Kafka's num.partitions)",
    "fetch_wait_ms_max": "the longest a Fetch waits for data, whatever max_wait_ms asks",
    "max_connections": "Kafka's max.connections: at it, new connections wait until one ends",
    "max_connections_per_ip": "Kafka's max.connections.per.ip: one more from that address is closed at once",
    "max_connections_per_ip_overrides": 'Kafka\'s max.connections.per.ip.overrides: "IP:count,IP:count"',
    "insecure": "serve plaintext, unauthenticated ports on addresses other machines reach (else refused)",
    "zookeeper": 'join the cluster coordinated there ("HOST:PORT[/chroot]"); unset: the embedded single node',
    "zookeeper_session_ms": "in a cluster: a broker silent this long is dead, and its partitions move",
}
ENGINE_NOTES = {
    "owner": "owner part of resource names (owner#topic#uuid)",
    "index_interval_bytes": "bytes of batches between two sparse index entries",
    "retention_check_ms": "how often retention and offset expiry run",
    "compaction_check_ms": "how often compacted logs are checked for a pass (Kafka's log.cleaner.backoff.ms)",
    "compaction_map_bytes": "memory one compaction pass maps keys in; a larger log takes several passes",
    "topic_partitions_max": "the most partitions one topic may have",
    "offsets_retention_ms": "committed offsets of empty groups expire after this (Kafka's offsets.retention.minutes)",
    "offsets_shards": "shards of committed offsets and group records; fixed when a data dir is first used",
    "memory_bytes": "memory for unpersisted and cached data, shared by all partitions",
    "flush_bytes": "the most one partition's flush (a group commit to the store) writes",
    "flush_ms": "how long a flush waits to gather more writes (0: the next loop turn)",
    "flush_threads": "flushes running at once (store round trips)",
    "read_threads": "reads from the store running at once",
    "drain_ms": "how long a graceful stop waits for everything to be persisted",
    "checkpoint_publish_ms": "how often each partition's C is published for outside readers",
    "hdfs_writers_max": "HDFS files open for writing at most (DataNode pipelines); beyond it those due to be written last close",
    "hdfs_writer_idle_ms": "an HDFS file not written for this long is closed; its next write reopens it",
}
HTTP_NOTES = {
    "listen": 'JSON API, /metrics, web console ("": none); this default only warns when taken, another address must bind',
    "allowed_hosts": 'names a request\'s Host may give besides the port\'s own (a proxy\'s, a DNS alias); "*": any',
    "tls": "serve HTTPS with [tls] certificate and key (replaced files serve new connections, as on the listeners)",
    "login": "the API, /metrics and the console's data need a login: Basic (SASL users), Bearer (OAUTHBEARER), the console's",
    "metrics_open": "with login: /metrics answers without one (for Prometheus scrapers)",
    "session_ms": "a console login lasts this long",
}
TLS_NOTES = {
    "certificate": "PEM: the broker's certificate chain, its own first (`martlet certs create DIR` makes one to try)",
    "key": "PEM: the private key of that certificate",
    "key_password": "the key file's password, when it is encrypted",
    "ca": "PEM: the CAs whose client certificates are accepted",
    "client_auth": "Kafka's ssl.client.auth: none, requested or required (the principal: User:<subject DN>)",
    "protocols": "Kafka's ssl.enabled.protocols",
    "principal_mapping_rules": 'Kafka\'s ssl.principal.mapping.rules: "RULE:pattern/replacement/[LU],...,DEFAULT"',
}
SASL_NOTES = {
    "enabled_mechanisms": "Kafka's sasl.enabled.mechanisms on SASL_PLAINTEXT and SASL_SSL listeners",
    "failed_authentication_delay_ms": "Kafka's connection.failed.authentication.delay.ms: a failure answers after it",
    "connections_max_reauth_ms": "Kafka's connections.max.reauth.ms (KIP-368): a session's length; 0: no end",
    "inter_broker_mechanism": "Kafka's sasl.mechanism.inter.broker.protocol (SCRAM-SHA-256 or SCRAM-SHA-512)",
    "inter_broker_user": "the brokers' own user on a SASL inter-broker listener (created at start if missing)",
    "inter_broker_password": "that user's password",
    "oauthbearer_jwks": "OAUTHBEARER: a JWKS file or http(s) URL of the token signers' keys (sasl.oauthbearer.jwks.endpoint.url)",
    "oauthbearer_expected_issuer": "OAUTHBEARER: the issuer (iss) tokens must name; empty: any",
    "oauthbearer_expected_audience": "OAUTHBEARER: audiences (aud) of which a token must name one; empty: any",
    "oauthbearer_sub_claim": "OAUTHBEARER: the claim naming the principal (sasl.oauthbearer.sub.claim.name)",
    "oauthbearer_clock_skew_s": "OAUTHBEARER: seconds of clock difference allowed on exp and nbf",
    "oauthbearer_unsecured": "OAUTHBEARER: accept unsigned tokens (alg none) instead; for development only",
}
UDP_NOTES = {
    "listen": 'datagrams into topics (gateway/udp.py), "HOST:PORT"; "": none',
    "rate_per_source": "datagrams a second each source address may send (token bucket); 0: no limit",
    "topics": "the only topics datagrams may write; required when listeners use TLS or SASL (UDP cannot authenticate)",
}
GROUPS_NOTES = {
    "session_timeout_ms_min": "Kafka's group.min.session.timeout.ms",
    "session_timeout_ms_max": "Kafka's group.max.session.timeout.ms",
    "initial_rebalance_delay_ms": "Kafka's group.initial.rebalance.delay.ms",
    "group_size_max": "Kafka's group.max.size",
}
TOPIC_NOTES = {
    "retention_ms": "retention.ms (-1: keep forever)",
    "retention_bytes": "retention.bytes per partition (-1: no limit)",
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "segment_jitter_ms": "segment.jitter.ms: each segment rolls up to this much before segment_ms",
    "max_batch_bytes": "max.message.bytes: the largest batch a producer may send",
    "flush_mode": '"sync": each flush is fsynced and acks=1 waits for it too (martlet.flush.mode)',
    "visibility": '"memory": consumers read records once in memory, before they are persisted (martlet.visibility)',
    "timestamp_type": '"create" or "append" (message.timestamp.type CreateTime / LogAppendTime)',
    "cleanup_policy": 'cleanup.policy: "delete", "compact", "compact,delete" or "" (neither)',
    "delete_retention_ms": "delete.retention.ms: how long a compacted log keeps a tombstone",
    "min_compaction_lag_ms": "min.compaction.lag.ms: records younger than this are not compacted",
    "max_compaction_lag_ms": "max.compaction.lag.ms: a log with older dirty records is compacted anyway",
    "min_cleanable_ratio": "min.cleanable.dirty.ratio: the dirty share of a log that starts a compaction",
}
# Settings fields that are not keys of their section (sections of their own, set by flags, or
# the Kafka topic configs a topic keeps without effect, set through Kafka's APIs only).
NOT_KEYS = {"topic_defaults", "groups", "listen_host", "listen_port", "advertised_host", "advertised_port", "kept",
            "http_allowed_hosts", "endpoints", "bound"}


def defaults_toml() -> str:
    """The whole config file with every key at its default, one comment per key."""
    gateway = GatewaySettings()
    gateway_values: dict[str, object] = {
        "listen": f"{gateway.listen_host}:{gateway.listen_port}", "advertised": Unset("HOST:PORT"),
        "listeners": Unset(["CLIENT://0.0.0.0:9093", "LOCAL://127.0.0.1:9092"]),
        "listener_security_protocol_map": Unset("CLIENT:PLAINTEXT,LOCAL:PLAINTEXT"),
        "advertised_listeners": Unset(["CLIENT://broker1.example.com:9093"]),
        "inter_broker_listener_name": Unset("LOCAL"),
        "data_dir": "./martlet-data", "store": Unset("hdfs://HOST:PORT/PATH"),
        "zookeeper": Unset("127.0.0.1:2181/martlet"), "zookeeper_session_ms": 4000, "insecure": False}
    http_values: dict[str, object] = {"listen": ServeConfig().http_listen,
                                      "allowed_hosts": list(gateway.http_allowed_hosts)} | _values(HttpSettings())
    sections = [
        ("gateway", _values(gateway) | gateway_values, GATEWAY_NOTES),
        ("http", http_values, HTTP_NOTES),
        ("udp", {"listen": ServeConfig().udp_listen, "rate_per_source": ServeConfig().udp_rate_per_source,
                 "topics": Unset(["metrics"])}, UDP_NOTES),
        ("tls", _values(TlsSettings()) | {"certificate": Unset("certs/broker.pem"), "key": Unset("certs/broker.key"),
                                          "key_password": Unset("..."), "ca": Unset("certs/ca.pem"),
                                          "protocols": list(TlsSettings().protocols)}, TLS_NOTES),
        ("sasl", _values(SaslSettings()) | {"enabled_mechanisms": list(SaslSettings().enabled_mechanisms),
                                            "inter_broker_user": Unset("broker"),
                                            "inter_broker_password": Unset("..."),
                                            "oauthbearer_jwks": Unset("https://idp.example.com/jwks.json"),
                                            "oauthbearer_expected_issuer": Unset("https://idp.example.com"),
                                            "oauthbearer_expected_audience": Unset(["martlet"])}, SASL_NOTES),
        ("engine", _values(EngineSettings()), ENGINE_NOTES),
        ("groups", _values(GroupLimits()), GROUPS_NOTES),
        ("topic_defaults", _values(TopicConfig()), TOPIC_NOTES),
    ]
    lines = []
    for name, values, notes in sections:
        lines.append(f"[{name}]")
        width = max(len(_line(key, values[key])) for key in notes)
        lines += [_line(key, values[key]).ljust(width) + f"  # {note}" for key, note in notes.items()]
        lines.append("")
    return "\n".join(lines)


def undocumented() -> list[str]:
    """Settings fields that have no note here (a test keeps this empty)."""
    missing = [f"gateway.{name}" for name in _values(GatewaySettings()) if name not in GATEWAY_NOTES]
    for section, settings, notes in (("engine", EngineSettings(), ENGINE_NOTES), ("groups", GroupLimits(), GROUPS_NOTES),
                                     ("tls", TlsSettings(), TLS_NOTES), ("sasl", SaslSettings(), SASL_NOTES),
                                     ("http", HttpSettings(), HTTP_NOTES),
                                     ("topic_defaults", TopicConfig(), TOPIC_NOTES)):
        missing += [f"{section}.{name}" for name in _values(settings) if name not in notes]
    return missing


def _values(settings: DataclassInstance) -> dict[str, object]:
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name not in NOT_KEYS}


@dataclasses.dataclass(frozen=True)
class Unset:
    """A key without a default: shown commented out, with an example value."""

    example: object


def _line(key: str, value: object) -> str:
    if isinstance(value, Unset):
        return f"# {key} = {_toml(value.example)}"
    return f"{key} = {_toml(value)}"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return str(value)
