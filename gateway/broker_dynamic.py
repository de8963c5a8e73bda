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
DYNAMIC_DEFAULT_BROKER_CONFIG) and synonyms, for the broker and for each topic. The
listener's connection limits (max.connections, max.connections.per.ip and its overrides,
connection_limits.py) change at once too, for the connections accepted next. Every other
name is kept and shown, and changes nothing (listeners, for example, stay as bound).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from ..engine.api import Dynamic, Overrides
from ..engine.api import errors as engine_errors
from . import connection_limits as limits
from .topic_configs import CONFIGS, KafkaTopicConfig, Layers, NullValue

if TYPE_CHECKING:
    from .context import Context
    from .settings import GatewaySettings

logger = logging.getLogger(__name__)

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
    _check_limits(result)
    return result


def static_limits(settings: GatewaySettings) -> dict[str, str]:
    """The connection limits of the config file, under Kafka's names."""
    return {limits.TOTAL: str(settings.max_connections), limits.PER_IP: str(settings.max_connections_per_ip),
            limits.OVERRIDES: settings.max_connections_per_ip_overrides}


def connection_limits(ctx: Context) -> Callable[[], limits.ConnectionLimits]:
    """The listener's limits as they stand (read at each accept): this node's dynamic configs
    over the cluster's over the config file's."""
    seen: list[object] = [None, None, None]  # the dynamic configs, node id and limits last worked out

    def current() -> limits.ConnectionLimits:
        dynamic = ctx.topics.dynamic
        if seen[0] is not dynamic or seen[1] != ctx.node_id:
            seen[:] = [dynamic, ctx.node_id, _limits(ctx.settings, dynamic, ctx.node_id)]
        return seen[2]  # type: ignore[return-value]

    return current


def _limits(settings: GatewaySettings, dynamic: Dynamic, node_id: int) -> limits.ConnectionLimits:
    values = static_limits(settings)
    for _, layer in reversed(layers(dynamic, node_id)):  # the node's own last: they win
        values.update((name, value) for name, value in layer.items() if name in limits.NAMES)
    try:
        return limits.parse(values)
    except ValueError as error:  # each layer was checked alone; together they may still clash
        logger.warning("connection limits of the dynamic configs not applied: %s", error)
        return limits.parse(static_limits(settings))


def _check_limits(values: Mapping[str, str]) -> None:
    """Kafka's checks of the connection limits among `values` (INVALID_REQUEST)."""
    given = {name: value for name, value in values.items() if name in limits.NAMES}
    if not given:
        return
    try:
        limits.parse(given)
    except ValueError as error:
        raise engine_errors.InvalidConfig(str(error)) from None


def _listed(current: str, value: str, operation: int) -> str:
    items = [item for item in current.split(",") if item]
    given = [item.strip() for item in value.split(",") if item.strip()]
    if operation == APPEND:
        return ",".join(items + [item for item in given if item not in items])
    return ",".join(item for item in items if item not in given)
