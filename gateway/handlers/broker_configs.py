"""DescribeConfigs of BROKER resources: a node's settings under Kafka's broker config names.

Tools read a broker's configuration by Kafka's names (`kafka-configs --describe
--entity-type brokers`, AdminClient.describeConfigs), so each Martlet setting with a Kafka
counterpart is shown under that name: the node's identity and listeners, where the logs are,
the defaults new topics get, the group coordinator's limits. Kafka's flags are kept:
- read_only as Kafka marks each name (false where a Kafka broker takes the change at run
  time: a dynamic config, see broker_dynamic.py);
- config_source DYNAMIC_BROKER_CONFIG (2) or DYNAMIC_DEFAULT_BROKER_CONFIG (3) for a dynamic
  value set for the node or the cluster, STATIC_BROKER_CONFIG (4) for what a broker must be
  given (its id, listeners, log dirs, roles) and for values that differ from Kafka's default
  (they must have been configured), DEFAULT_CONFIG (5) otherwise; with synonyms asked for,
  every layer is listed, most specific first, as Kafka does.
The resource name is a node id: any live node is answered (the nodes of a cluster share one
static configuration; the identity and listeners are that node's). "" asks for the
cluster-wide dynamic defaults, as set. Anything else gets Kafka's INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...engine.api import NodeIdentity
from ...protocol.answers import DescribeConfigsResourceResultAnswer, DescribeConfigsSynonymAnswer
from ..broker_dynamic import CLUSTER, DYNAMIC_DEFAULT, layers
from ..context import Context
from ..listeners import join_address
from ..topic_configs import BY_ENGINE, Layers
from .metadata import address

STATIC, DEFAULT = 4, 5  # Kafka's ConfigSource.STATIC_BROKER_CONFIG, DEFAULT_CONFIG
UNKNOWN, BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 5, 6, 7  # Kafka's ConfigType (DescribeConfigs v3+)
DEFAULT_REPLICATION_FACTOR = "1"
MIN_IN_SYNC_REPLICAS = "1"  # every partition has one copy in the store, always "in sync"
MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One Kafka broker config name: how Kafka types and flags it, and where Martlet's value is."""

    name: str
    config_type: int
    read_only: bool
    kafka_default: str | None  # None: Kafka has no default (a broker must be given one)
    value: Callable[[Context, NodeIdentity], str | None]


def _topic_default(engine_name: str) -> Callable[[Context, NodeIdentity], str | None]:
    """A static default of topics, in Kafka's spelling (retention, segment size, ...)."""
    spec = BY_ENGINE[engine_name]
    return lambda ctx, _node: spec.to_kafka(getattr(ctx.topics.static_defaults, engine_name))


def _retention_hours(ctx: Context, _node: NodeIdentity) -> str:
    """Kafka's coarsest retention setting, as the hours the topics' default retention spans."""
    retention_ms = ctx.topics.static_defaults.retention_ms
    return str(retention_ms // MS_PER_HOUR if retention_ms >= 0 else -1)


def _listener(ctx: Context, node: NodeIdentity) -> str:
    """The node's advertised listeners."""
    if node.node_id == ctx.node_id and ctx.settings.endpoints:
        return ",".join(ctx.settings.advertised_listeners())
    if node.node_id != ctx.node_id and node.endpoints:
        return ",".join(node.endpoints)
    host, port = address(ctx, node, "")
    return f"PLAINTEXT://{join_address(host, port)}"


def _bound_listener(ctx: Context, node: NodeIdentity) -> str:
    """What the node listens on: this node's bound sockets, another node's advertised addresses."""
    if node.node_id != ctx.node_id:
        return _listener(ctx, node)
    if ctx.settings.bound:
        return ",".join(ctx.settings.bound)
    return f"PLAINTEXT://{join_address(ctx.settings.listen_host, ctx.settings.listen_port)}"



BROKER_CONFIGS: tuple[BrokerConfig, ...] = (
    BrokerConfig("broker.id", INT, True, "-1", lambda _ctx, node: str(node.node_id)),
    BrokerConfig("node.id", INT, True, None, lambda _ctx, node: str(node.node_id)),
    BrokerConfig("process.roles", LIST, True, None, lambda _ctx, _node: "broker"),
    BrokerConfig("broker.rack", STRING, True, None, lambda _ctx, node: node.rack),
    BrokerConfig("listeners", LIST, False, "PLAINTEXT://:9092", _bound_listener),
    BrokerConfig("advertised.listeners", LIST, True, None, _listener),
    BrokerConfig("log.dirs", LIST, True, None, lambda ctx, _node: ctx.log_dir),
    BrokerConfig("num.partitions", INT, True, "1", lambda ctx, _node: str(ctx.settings.default_partitions)),
    BrokerConfig("auto.create.topics.enable", BOOLEAN, True, "true",
                 lambda ctx, _node: str(ctx.settings.auto_create_topics).lower()),
    BrokerConfig("default.replication.factor", INT, True, "1", lambda _ctx, _node: DEFAULT_REPLICATION_FACTOR),
    BrokerConfig("min.insync.replicas", INT, False, "1", lambda _ctx, _node: MIN_IN_SYNC_REPLICAS),
    BrokerConfig("log.retention.ms", LONG, False, "604800000", _topic_default("retention_ms")),
    BrokerConfig("log.retention.hours", INT, True, "168", _retention_hours),
    BrokerConfig("log.retention.bytes", LONG, False, "-1", _topic_default("retention_bytes")),
    BrokerConfig("log.segment.bytes", INT, False, "1073741824", _topic_default("segment_bytes")),
    BrokerConfig("log.roll.ms", LONG, False, "604800000", _topic_default("segment_ms")),
    BrokerConfig("log.roll.jitter.ms", LONG, False, "0", _topic_default("segment_jitter_ms")),
    BrokerConfig("log.cleaner.delete.retention.ms", LONG, False, "86400000", _topic_default("delete_retention_ms")),
    BrokerConfig("log.cleaner.min.compaction.lag.ms", LONG, False, "0", _topic_default("min_compaction_lag_ms")),
    BrokerConfig("log.cleaner.max.compaction.lag.ms", LONG, False, "9223372036854775807",
                 _topic_default("max_compaction_lag_ms")),
    BrokerConfig("log.cleaner.min.cleanable.ratio", DOUBLE, False, "0.5", _topic_default("min_cleanable_ratio")),
    BrokerConfig("log.cleanup.policy", LIST, False, "delete", _topic_default("cleanup_policy")),
    BrokerConfig("log.message.timestamp.type", STRING, False, "CreateTime", _topic_default("timestamp_type")),
    BrokerConfig("message.max.bytes", INT, False, "1048588", _topic_default("max_batch_bytes")),
    BrokerConfig("socket.request.max.bytes", INT, True, "104857600",
                 lambda ctx, _node: str(ctx.settings.frame_bytes_max)),
    BrokerConfig("max.connections", INT, False, "2147483647", lambda ctx, _node: str(ctx.settings.max_connections)),
    BrokerConfig("max.connections.per.ip", INT, False, "2147483647",
                 lambda ctx, _node: str(ctx.settings.max_connections_per_ip)),
    BrokerConfig("max.connections.per.ip.overrides", STRING, False, "",
                 lambda ctx, _node: ctx.settings.max_connections_per_ip_overrides),
    BrokerConfig("offsets.topic.num.partitions", INT, True, "50", lambda ctx, _node: str(ctx.groups.shard_count)),
    BrokerConfig("offsets.retention.minutes", INT, True, "10080",
                 lambda ctx, _node: str(ctx.engine_settings.offsets_retention_ms // MS_PER_MINUTE)),
    BrokerConfig("group.initial.rebalance.delay.ms", INT, True, "3000",
                 lambda ctx, _node: str(ctx.engine_settings.groups.initial_rebalance_delay_ms)),
    BrokerConfig("group.min.session.timeout.ms", INT, True, "6000",
                 lambda ctx, _node: str(ctx.engine_settings.groups.session_timeout_ms_min)),
    BrokerConfig("group.max.session.timeout.ms", INT, True, "1800000",
                 lambda ctx, _node: str(ctx.engine_settings.groups.session_timeout_ms_max)),
    BrokerConfig("group.max.size", INT, True, "2147483647",
                 lambda ctx, _node: str(ctx.engine_settings.groups.group_size_max)),
)


BY_NAME = {config.name: config for config in BROKER_CONFIGS}
READ_ONLY = frozenset(config.name for config in BROKER_CONFIGS if config.read_only)


class BrokerNotFound(Exception):
    """Kafka's INVALID_REQUEST for a BROKER resource that names no broker it answers for."""


def broker_entries(ctx: Context, name: str, keys: Iterable[str] | None,
                   synonyms: bool) -> list[DescribeConfigsResourceResultAnswer]:
    """The entries of BROKER resource `name`; BrokerNotFound with Kafka's message."""
    wanted = set(keys) if keys else None
    if name == CLUSTER:  # the cluster-wide dynamic defaults, as set
        return [_dynamic_entry(key, value, synonyms) for key, value in sorted(ctx.topics.dynamic.get(CLUSTER, {}).items())
                if wanted is None or key in wanted]
    node = live_node(ctx, name)
    layered = layers(ctx.topics.dynamic, node.node_id)
    return [_entry(ctx, node, config, synonyms, layered) for config in BROKER_CONFIGS
            if wanted is None or config.name in wanted]


def _dynamic_entry(name: str, value: str | None, with_synonyms: bool) -> DescribeConfigsResourceResultAnswer:
    """A cluster-wide dynamic config. One Kafka does not know is shown as Kafka shows it:
    read-only, untyped, its value hidden (it might be a secret)."""
    known = BY_NAME.get(name)
    value = value if known else None
    return {"name": name, "value": value, "read_only": known is None or known.read_only,
            "config_source": DYNAMIC_DEFAULT, "is_sensitive": False,
            "synonyms": [{"name": name, "value": value, "source": DYNAMIC_DEFAULT}] if with_synonyms else [],
            "config_type": known.config_type if known else UNKNOWN, "documentation": None}


def live_node(ctx: Context, name: str) -> NodeIdentity:
    """The live node a BROKER resource names; BrokerNotFound with Kafka's message."""
    try:
        node_id = int(name)
    except ValueError:
        raise BrokerNotFound(f"Broker id must be an integer, but it is: {name}") from None
    alive = ctx.cluster.alive()
    for node in alive:
        if node.node_id == node_id:
            return node
    expected = ", ".join(str(node.node_id) for node in alive)
    raise BrokerNotFound(f"Unexpected broker id, expected {expected} or empty string, but received {name}")


def _entry(ctx: Context, node: NodeIdentity, config: BrokerConfig, with_synonyms: bool,
           layered: Layers) -> DescribeConfigsResourceResultAnswer:
    dynamic = [] if config.read_only else [(source, values[config.name]) for source, values in layered
                                           if config.name in values]
    static_value = config.value(ctx, node)
    static = config.kafka_default is None or static_value != config.kafka_default
    static_source = STATIC if static and static_value is not None else DEFAULT
    source, value = dynamic[0] if dynamic else (static_source, static_value)
    return {"name": config.name, "value": value, "read_only": config.read_only, "config_source": source,
            "is_sensitive": False,
            "synonyms": _synonyms(config, dynamic, static_value, static_source) if with_synonyms else [],
            "config_type": config.config_type, "documentation": None}


def _synonyms(config: BrokerConfig, dynamic: list[tuple[int, str]], value: str | None,
              source: int) -> list[DescribeConfigsSynonymAnswer]:
    """Where the value comes from, most specific first: the node's and the cluster's dynamic
    configs, the static setting, Kafka's default."""
    found: list[DescribeConfigsSynonymAnswer] = [{"name": config.name, "value": v, "source": s} for s, v in dynamic]
    if value is None:
        return found
    if source == STATIC:
        found.append({"name": config.name, "value": value, "source": STATIC})
    if config.kafka_default is not None:
        found.append({"name": config.name, "value": config.kafka_default, "source": DEFAULT})
    return found

