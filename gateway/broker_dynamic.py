"""Kafka's dynamic broker configs: `kafka-configs --alter --entity-type brokers` with
`--entity-name <id>` (one node) or `--entity-default` (the whole cluster, resource "").

Kept by the engine as dynamic settings by scope (`Topics.dynamic`: "" or a node id ->
name -> value, in the catalog, so every node sees them and a restart keeps them), set with
IncrementalAlterConfigs and checked as Kafka checks them:
- a name Kafka's broker takes only at start-up (read_only in broker_configs.BROKER_CONFIGS)
  is INVALID_REQUEST "Cannot update these configs dynamically: [...]";
- a bad value is INVALID_REQUEST with Kafka's message (a topic config answers INVALID_CONFIG);
- any other name is kept, as Kafka keeps names it does not know.
What they change: the defaults of the topic configs the engine honours (HONOURED: retention,
segments, cleanup policy, max message size, timestamp type), for every topic that does not
override them, at once; a node's own value wins over the cluster's, the cluster's over the
static setting. DescribeConfigs shows them with Kafka's sources (DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG) and synonyms, for the broker and for each topic. Every other
name is kept and shown, and changes nothing (listeners, for example, stay as bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..engine.api import Dynamic, Overrides
from ..engine.api import errors as engine_errors
from .topic_configs import CONFIGS, KafkaTopicConfig, Layers, NullValue

DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3  # Kafka's ConfigSource for a node's and the cluster's dynamic configs
CLUSTER = ""  # the scope (and resource name) of the cluster-wide dynamic defaults
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# broker config name -> the topic config whose default it is, for the configs the engine honours
HONOURED: dict[str, KafkaTopicConfig] = {c.synonym: c for c in CONFIGS if c.engine and c.synonym}


class NotDynamic(engine_errors.InvalidConfig):
    """Kafka's INVALID_REQUEST for a change it cannot make at run time."""


def layers(dynamic: Dynamic, node_id: int) -> Layers:
    """The dynamic configs a topic on node `node_id` follows, most specific first."""
    return [(DYNAMIC_BROKER, dynamic.get(str(node_id), {})), (DYNAMIC_DEFAULT, dynamic.get(CLUSTER, {}))]


def topic_defaults(dynamic: Dynamic, node_id: int) -> Overrides:
    """What the dynamic configs change in the topic defaults on node `node_id` (engine names)."""
    changes: Overrides = {}
    for _, values in reversed(layers(dynamic, node_id)):  # the node's own last: they win
        for name, value in values.items():
            config = HONOURED.get(name)
            if config is not None and config.engine is not None:
                changes[config.engine] = config.to_engine(value)
    return changes


def changed(current: Mapping[str, str], operations: Iterable[tuple[str, int, str | None]],
            read_only: Iterable[str]) -> dict[str, str]:
    """The scope's dynamic configs after IncrementalAlterConfigs `operations` (name, op,
    value); NotDynamic or InvalidConfig (both INVALID_REQUEST) with Kafka's message."""
    operations = list(operations)
    fixed = sorted({name for name, _, _ in operations if name in set(read_only)})
    if fixed:
        raise NotDynamic(f"Cannot update these configs dynamically: [{', '.join(fixed)}]")
    result = dict(current)
    for name, operation, value in operations:
        config = HONOURED.get(name)
        if operation == DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise NullValue(f"Null value not supported for : {name}")
        if operation in (APPEND, SUBTRACT):
            value = _listed(result.get(name, config.default if config else ""), value, operation)
        result[name] = config.check(name, value) if config is not None else value
    return result


def _listed(current: str, value: str, operation: int) -> str:
    items = [item for item in current.split(",") if item]
    given = [item.strip() for item in value.split(",") if item.strip()]
    if operation == APPEND:
        return ",".join(items + [item for item in given if item not in items])
    return ",".join(item for item in items if item not in given)
