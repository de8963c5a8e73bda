"""Topic configs under Kafka's names: every config Apache Kafka 4.x defines for a topic, with
its type, default and validation as Kafka has them, the broker config its default comes
from, and what Martlet does with it; plus Martlet's own two (martlet.flush.mode,
martlet.visibility).

A config is either honoured by the engine (`engine`: the setting that acts on it) or kept:
checked, stored with the topic (TopicConfig.kept) and shown by DescribeConfigs. A kept config
is honoured by the gateway (compression, the timestamp window: Produce) or without effect, for
the reason `inert` gives. docs/decisions.md ("Topic configs") lists them.

Checking follows Kafka's ConfigDef, compared value by value with the reference broker
(tests/integration/test_topic_configs_reference.py): a value is trimmed; an INT or LONG is a
decimal integer in its type's range, a BOOLEAN true or false in any case; an error names the
value as typed when it does not parse and as parsed when it is out of range (a DOUBLE as
Java prints it: 5.0). An unknown name and a bad value are INVALID_CONFIG, a null value
INVALID_REQUEST. One difference: min.cleanable.dirty.ratio refuses NaN, which Kafka takes.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from ..engine.api import ConfigValue, Kept, Overrides, Topic, TopicConfig
from ..engine.api import errors as engine_errors
from ..protocol.answers import DescribeConfigsSynonymAnswer

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7  # Kafka's ConfigType
TOPIC, STATIC, DEFAULT = 1, 4, 5  # Kafka's ConfigSource: DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG
INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1
KEPT = "kept"  # the engine setting that holds kept configs

Check = Callable[[str, str], str]  # (name, value as given) -> the value as Kafka stores it; InvalidConfig


class NullValue(engine_errors.InvalidConfig):
    """A config set to null: Kafka answers INVALID_REQUEST, not INVALID_CONFIG."""


# -- parsing, as Kafka's ConfigDef --------------------------------------------------------------


def _invalid(name: str, shown: object, reason: str) -> engine_errors.InvalidConfig:
    return engine_errors.InvalidConfig(f"Invalid value {shown} for configuration {name}: {reason}")


def _integer(kind: str, low: int | None = None, high: int | None = None) -> Check:
    largest = INT_MAX if kind == "INT" else LONG_MAX

    def parse(name: str, given: str) -> str:
        text = given.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", text) or not -largest - 1 <= int(text) <= largest:
            raise _invalid(name, given, f"Not a number of type {kind}")
        value = int(text)
        if low is not None and value < low:
            raise _invalid(name, value, f"Value must be at least {low}")
        if high is not None and value > high:
            raise _invalid(name, value, f"Value must be no more than {high}")
        return str(value)
    return parse


def _gzip_level(name: str, given: str) -> str:
    value = int(_integer("INT")(name, given))
    if value != -1 and not 1 <= value <= 9:
        raise _invalid(name, value, "Value must be between 1 and 9 or equal to -1")
    return str(value)


def _java_double(value: float) -> str:
    """How Java prints a double: the shortest digits that read back (as Python's repr), as
    5.0, 0.001 or 2.147483647E9 (an exponent outside 1e-3 .. 1e7)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    assert isinstance(exponent, int)  # a finite double
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{exponent + len(shown) - 1}"


def _ratio(name: str, given: str) -> str:
    text = given.strip()
    if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?", text):
        raise _invalid(name, given, "Not a number of type DOUBLE")
    value = float(text.rstrip("dDfF"))
    if math.isnan(value):
        raise _invalid(name, given, "Not a number of type DOUBLE")
    if value < 0:
        raise _invalid(name, _java_double(value), "Value must be at least 0")
    if value > 1:
        raise _invalid(name, _java_double(value), "Value must be no more than 1")
    return _java_double(value)


def _number(value: ConfigValue) -> float:
    if not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def _boolean(name: str, given: str) -> str:
    if given.strip().lower() not in ("true", "false"):
        raise _invalid(name, given, "Expected value to be either true or false")
    return given.strip().lower()


def _choice(*allowed: str) -> Check:
    def parse(name: str, given: str) -> str:
        text = given.strip()
        if text not in allowed:
            raise _invalid(name, text, f"String must be one of: {', '.join(allowed)}")
        return text
    return parse


def _items(text: str) -> list[str]:
    """A LIST value's items, as Kafka splits them (an empty value is no items)."""
    return [] if text == "" else [item.strip() for item in text.split(",")]


def _cleanup_policy(name: str, given: str) -> str:
    items = _items(given.strip())
    if "" in items:
        raise engine_errors.InvalidConfig(f"Configuration '{name}' values must not be empty.")
    for item in items:
        if item not in ("compact", "delete"):
            raise _invalid(name, item, "String must be one of: compact, delete")
    return ",".join(items)


def _throttled_replicas(name: str, given: str) -> str:
    items = _items(given.strip())
    if items != ["*"] and not all(re.fullmatch(r"([0-9]+:[0-9]+)?", item) for item in items):
        raise _invalid(name, f"[{', '.join(items)}]", f"{name} must be the literal '*' or a list of replicas in the "
                       "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return ",".join(items)


def _remote_storage(name: str, given: str) -> str:
    if _boolean(name, given) == "true":
        raise engine_errors.InvalidConfig("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                                          "configured with remote log storage.")
    return "false"


# -- the configs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KafkaTopicConfig:
    name: str
    type_code: int
    default: str  # Kafka's default, as DescribeConfigs shows it
    check: Check
    synonym: str | None = None  # the broker config a default comes from
    listed_default: bool = True  # Kafka lists the synonym's default among the synonyms
    engine: str | None = None  # the engine setting that honours it; None: kept
    inert: str = ""  # why a kept config has no effect ("": the gateway honours it)
    to_engine: Callable[[str], ConfigValue] = int
    to_kafka: Callable[[ConfigValue], str] = str


NO_COPIES = "every partition has one copy, in the store; there is no replication between brokers to tune"
NO_TIERS = "the store is the only tier: there is no tiered storage"
_TIMESTAMP_TYPES = {"CreateTime": "create", "LogAppendTime": "append"}
DECOMPRESSED_MAX = 2147483639  # max.decompressed.message.bytes' default and largest value: no limit


CONFIGS: tuple[KafkaTopicConfig, ...] = (
    # honoured
    KafkaTopicConfig("cleanup.policy", LIST, "delete", _cleanup_policy, "log.cleanup.policy",
                     engine="cleanup_policy", to_engine=lambda text: ",".join(dict.fromkeys(_items(text)))),  # as Kafka: once each
    KafkaTopicConfig("delete.retention.ms", LONG, "86400000", _integer("LONG", 0), "log.cleaner.delete.retention.ms",
                     engine="delete_retention_ms"),
    KafkaTopicConfig("max.compaction.lag.ms", LONG, str(LONG_MAX), _integer("LONG", 1),
                     "log.cleaner.max.compaction.lag.ms", engine="max_compaction_lag_ms"),
    KafkaTopicConfig("min.cleanable.dirty.ratio", DOUBLE, "0.5", _ratio, "log.cleaner.min.cleanable.ratio",
                     engine="min_cleanable_ratio", to_engine=float, to_kafka=lambda value: _java_double(_number(value))),
    KafkaTopicConfig("min.compaction.lag.ms", LONG, "0", _integer("LONG", 0), "log.cleaner.min.compaction.lag.ms",
                     engine="min_compaction_lag_ms"),
    KafkaTopicConfig("max.message.bytes", INT, "1048588", _integer("INT", 0), "message.max.bytes",
                     engine="max_batch_bytes"),
    KafkaTopicConfig("message.timestamp.type", STRING, "CreateTime", _choice(*_TIMESTAMP_TYPES),
                     "log.message.timestamp.type", engine="timestamp_type", to_engine=_TIMESTAMP_TYPES.__getitem__,
                     to_kafka=lambda value: {v: k for k, v in _TIMESTAMP_TYPES.items()}[str(value)]),
    KafkaTopicConfig("retention.bytes", LONG, "-1", _integer("LONG"), "log.retention.bytes", engine="retention_bytes",
                     to_engine=lambda text: max(int(text), -1)),  # any negative: no limit, as in Kafka
    KafkaTopicConfig("retention.ms", LONG, "604800000", _integer("LONG", -1), "log.retention.ms",
                     listed_default=False, engine="retention_ms"),
    KafkaTopicConfig("segment.bytes", INT, "1073741824", _integer("INT", 1 << 20), "log.segment.bytes",
                     engine="segment_bytes"),
    KafkaTopicConfig("segment.ms", LONG, "604800000", _integer("LONG", 1), "log.roll.ms", listed_default=False,
                     engine="segment_ms"),
    KafkaTopicConfig("martlet.flush.mode", STRING, "async", _choice("async", "sync"), engine="flush_mode", to_engine=str),
    KafkaTopicConfig("martlet.visibility", STRING, "persisted", _choice("persisted", "memory"), engine="visibility",
                     to_engine=str),
    # kept
    KafkaTopicConfig("compression.type", STRING, "producer",  # kept, and honoured by Produce (compression_of)
                     _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), "compression.type"),
    KafkaTopicConfig("compression.gzip.level", INT, "-1", _gzip_level, "compression.gzip.level"),
    KafkaTopicConfig("compression.lz4.level", INT, "9", _integer("INT", 1, 17), "compression.lz4.level",
                     inert="the lz4 codec Martlet writes with takes no level"),
    KafkaTopicConfig("compression.zstd.level", INT, "3", _integer("INT", -131072, 22), "compression.zstd.level"),
    KafkaTopicConfig("errors.deadletterqueue.group.enable", BOOLEAN, "false", _boolean,
                     inert="share groups are not served"),
    KafkaTopicConfig("file.delete.delay.ms", LONG, "60000", _integer("LONG", 0), "log.segment.delete.delay.ms",
                     inert="a deleted segment's files are removed at once"),
    KafkaTopicConfig("flush.messages", LONG, str(LONG_MAX), _integer("LONG", 1), "log.flush.interval.messages",
                     inert="when data is persisted is set by martlet.flush.mode and the producer's acks"),
    KafkaTopicConfig("flush.ms", LONG, str(LONG_MAX), _integer("LONG", 0), "log.flush.interval.ms",
                     listed_default=False,
                     inert="when data is persisted is set by martlet.flush.mode and the producer's acks"),
    KafkaTopicConfig("follower.replication.throttled.replicas", LIST, "", _throttled_replicas, inert=NO_COPIES),
    KafkaTopicConfig("index.interval.bytes", INT, "4096", _integer("INT", 0), "log.index.interval.bytes",
                     inert="the broker's index_interval_bytes applies to every topic"),
    KafkaTopicConfig("leader.replication.throttled.replicas", LIST, "", _throttled_replicas, inert=NO_COPIES),
    KafkaTopicConfig("local.retention.bytes", LONG, "-2", _integer("LONG", -2), "log.local.retention.bytes",
                     inert=NO_TIERS),
    KafkaTopicConfig("local.retention.ms", LONG, "-2", _integer("LONG", -2), "log.local.retention.ms",
                     inert=NO_TIERS),
    KafkaTopicConfig("max.decompressed.message.bytes", INT, str(DECOMPRESSED_MAX), _integer("INT", 1, DECOMPRESSED_MAX),
                     "max.decompressed.message.bytes"),  # kept, and honoured by Produce (decompressed_limit)
    KafkaTopicConfig("message.timestamp.after.max.ms", LONG, "3600000", _integer("LONG", 0),
                     "log.message.timestamp.after.max.ms"),  # kept, and honoured by Produce (timestamp_window)
    KafkaTopicConfig("message.timestamp.before.max.ms", LONG, str(LONG_MAX), _integer("LONG", 0),
                     "log.message.timestamp.before.max.ms"),
    KafkaTopicConfig("min.insync.replicas", INT, "1", _integer("INT", 1), "min.insync.replicas", inert=NO_COPIES),
    KafkaTopicConfig("preallocate", BOOLEAN, "false", _boolean, "log.preallocate",
                     inert="segment files grow as written (HDFS files cannot be preallocated)"),
    KafkaTopicConfig("remote.copy.lag.bytes", LONG, "-1", _integer("LONG", -1), "log.remote.copy.lag.bytes",
                     inert=NO_TIERS),
    KafkaTopicConfig("remote.copy.lag.ms", LONG, "0", _integer("LONG", -1), "log.remote.copy.lag.ms", inert=NO_TIERS),
    KafkaTopicConfig("remote.log.copy.disable", BOOLEAN, "false", _boolean, inert=NO_TIERS),
    KafkaTopicConfig("remote.log.delete.on.disable", BOOLEAN, "false", _boolean, inert=NO_TIERS),
    KafkaTopicConfig("remote.storage.enable", BOOLEAN, "false", _remote_storage, inert=NO_TIERS),
    KafkaTopicConfig("segment.index.bytes", INT, "10485760", _integer("INT", 4), "log.index.size.max.bytes",
                     inert="a segment's indexes are sized to what it holds"),
    KafkaTopicConfig("segment.jitter.ms", LONG, "0", _integer("LONG", 0), "log.roll.jitter.ms", listed_default=False,
                     engine="segment_jitter_ms"),
    KafkaTopicConfig("unclean.leader.election.enable", BOOLEAN, "false", _boolean, "unclean.leader.election.enable",
                     inert=NO_COPIES),
)
BY_NAME = {config.name: config for config in CONFIGS}
BY_ENGINE = {config.engine: config for config in CONFIGS if config.engine}


def checked(name: str, value: str | None) -> tuple[KafkaTopicConfig, str]:
    """The config `name` and `value` as Kafka stores it (5 for " +5", true for TRUE);
    InvalidConfig (NullValue) with Kafka's message."""
    config = BY_NAME.get(name)
    if config is None:
        raise engine_errors.InvalidConfig(f"Unknown topic config name: {name}")
    if value is None:
        raise NullValue(f"Null value not supported for : {name}")
    return config, config.check(name, value)


def to_overrides(pairs: dict[str, str | None]) -> Overrides:
    """Kafka config names and values, checked, as the engine's overrides."""
    overrides: Overrides = {}
    kept: list[tuple[str, str]] = []
    for name, value in pairs.items():
        config, text = checked(name, value)
        if config.engine is None:
            kept.append((name, text))
        else:
            overrides[config.engine] = config.to_engine(text)
    if kept:
        overrides[KEPT] = tuple(sorted(kept))
    return overrides


def kafka_overrides(topic: Topic) -> dict[str, str]:
    """A topic's overrides under Kafka's names."""
    found: dict[str, str] = {}
    for engine_name in topic.overrides:
        if engine_name == KEPT:
            found.update(topic.config.kept)
        else:
            config = BY_ENGINE[engine_name]
            found[config.name] = config.to_kafka(getattr(topic.config, engine_name))
    return found


CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # a batch's codec bits


def compression_of(topic: Topic) -> tuple[int, int | None] | None:
    """The codec (and its level) compression.type asks batches to be stored in; None for
    `producer` (as sent)."""
    return _compression(topic.config.kept)


@functools.lru_cache(maxsize=1024)
def _compression(kept: Kept) -> tuple[int, int | None] | None:
    values = dict(kept)
    name = values.get("compression.type", "producer")
    if name == "producer":
        return None
    levels = {"gzip": "compression.gzip.level", "zstd": "compression.zstd.level"}
    level = values.get(levels[name]) if name in levels else None
    return CODECS[name], None if level is None else int(level)


def timestamp_window(topic: Topic) -> tuple[int, int]:
    """(message.timestamp.before.max.ms, message.timestamp.after.max.ms) of a topic."""
    return _window(topic.config.kept)


@functools.lru_cache(maxsize=1024)
def _window(kept: Kept) -> tuple[int, int]:
    values = dict(kept)
    return (int(values.get("message.timestamp.before.max.ms", BY_NAME["message.timestamp.before.max.ms"].default)),
            int(values.get("message.timestamp.after.max.ms", BY_NAME["message.timestamp.after.max.ms"].default)))


def decompressed_limit(topic: Topic) -> int | None:
    """max.decompressed.message.bytes of a topic: the largest record a compressed batch may
    hold once decompressed; None when it is the default (no limit, nothing to check)."""
    return _decompressed(topic.config.kept)


@functools.lru_cache(maxsize=1024)
def _decompressed(kept: Kept) -> int | None:
    limit = int(dict(kept).get("max.decompressed.message.bytes", DECOMPRESSED_MAX))
    return None if limit >= DECOMPRESSED_MAX else limit


@dataclass(frozen=True, slots=True)
class Described:
    """One config of a topic as DescribeConfigs shows it."""

    config: KafkaTopicConfig
    value: str
    source: int
    synonyms: list[DescribeConfigsSynonymAnswer]


Layers = Sequence[tuple[int, Mapping[str, str]]]  # (config source, broker config name -> value), most specific first


def described(overridden: Mapping[str, str], defaults: TopicConfig, keys: Iterable[str] | None,
              layers: Layers = ()) -> list[Described]:
    """A topic's configs (those in `keys`, else all) with their values, sources and synonyms,
    most specific first: the topic's override (`overridden`, by Kafka name, as kafka_overrides
    gives them), the dynamic broker configs in `layers` (for the configs the engine honours),
    the broker's static setting (`defaults`), Kafka's default."""
    wanted = set(keys) if keys else None
    found = []
    for config in CONFIGS:
        if wanted is not None and config.name not in wanted:
            continue
        broker_value = (config.to_kafka(getattr(defaults, config.engine)) if config.engine else config.default)
        synonym = config.synonym if config.engine else None  # only the honoured ones follow dynamic configs
        dynamic = [(source, values[synonym]) for source, values in layers if synonym is not None and synonym in values]
        chain: list[DescribeConfigsSynonymAnswer] = []
        if config.name in overridden:
            chain.append({"name": config.name, "value": overridden[config.name], "source": TOPIC})
        if config.synonym is not None:
            chain.extend({"name": config.synonym, "value": value, "source": source} for source, value in dynamic)
            if broker_value != config.default:
                chain.append({"name": config.synonym, "value": broker_value, "source": STATIC})
            if config.listed_default:
                chain.append({"name": config.synonym, "value": config.default, "source": DEFAULT})
        if config.name in overridden:
            value, source = overridden[config.name], TOPIC
        elif dynamic:
            source, value = dynamic[0]
        else:
            value, source = broker_value, STATIC if broker_value != config.default else DEFAULT
        found.append(Described(config, value, source, chain))
    return found
