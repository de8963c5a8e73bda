"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44) for topics and brokers.

Broker resources are described under Kafka's broker config names (broker_configs.py), and
their dynamic configs are set as Kafka sets them (broker_dynamic.py): for one node (its id)
or the whole cluster (""). Removing one never set succeeds, as in Kafka:
`kafka-reassign-partitions --verify` removes the replication throttles of every broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, IncrementalAlterConfigsRequest

from ...engine.api import Topic, errors
from ...protocol.answers import (
    AlterConfigsAnswer,
    AlterConfigsResourceAnswer,
    CreateTopicsCreatableTopicConfigsAnswer,
    DescribeConfigsAnswer,
    DescribeConfigsResultAnswer,
    IncrementalAlterConfigsAnswer,
)
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..broker_dynamic import CLUSTER, changed, layers, topic_defaults
from ..context import Context
from ..internal_topics import INTERNAL_CONFIGS, WRITE_REFUSED, change_message, is_internal
from ..mapping import error_code
from ..topic_configs import Described, described, kafka_overrides, to_overrides
from .api import handles
from .broker_configs import READ_ONLY, BrokerNotFound, broker_entries, live_node
from .broker_loggers import LoggerRefused, logger_entries, set_levels

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# One entry's shape serves DescribeConfigs and CreateTopics (whose shape has no synonyms,
# documentation or type before the versions that add them).
ConfigEntry = CreateTopicsCreatableTopicConfigsAnswer
# The AlterConfigs and IncrementalAlterConfigs answers per resource have the same fields.
Altered = AlterConfigsResourceAnswer
NewOverrides = Callable[[dict[str, str]], dict[str, str | None]]


def describe_topic_configs(ctx: Context, topic: Topic, keys: Iterable[str] | None) -> list[ConfigEntry]:
    return [{"name": d.config.name, "value": d.value, "read_only": False, "config_source": d.source,
             "is_sensitive": False} for d in _described(ctx, kafka_overrides(topic), keys)]


def _described(ctx: Context, overridden: Mapping[str, str], keys: Iterable[str] | None) -> list[Described]:
    return described(overridden, ctx.topics.static_defaults, keys, layers(ctx.topics.dynamic, ctx.node_id))


@handles(ApiKey.DESCRIBE_CONFIGS, 1, 4)
async def describe_configs(ctx: Context, header: RequestHeader, request: DescribeConfigsRequest) -> DescribeConfigsAnswer:
    synonyms = request.include_synonyms
    return {"throttle_time": 0, "results": [_describe_one(ctx, r, synonyms) for r in request.resources]}


def _describe_one(ctx: Context, resource: DescribeConfigsResource, synonyms: bool) -> DescribeConfigsResultAnswer:
    answer: DescribeConfigsResultAnswer = {
        "error_code": ErrorCode.none, "error_message": "", "resource_type": resource.resource_type,
        "resource_name": resource.resource_name, "configs": []}  # Kafka's message: "", not null
    if resource.resource_type == BROKER:
        try:
            return answer | {"configs": broker_entries(ctx, resource.resource_name, resource.configuration_keys,
                                                      synonyms)}
        except BrokerNotFound as error:
            return answer | {"error_code": ErrorCode.invalid_request, "error_message": str(error)}
    if resource.resource_type == BROKER_LOGGER:
        try:
            return answer | {"configs": logger_entries(ctx, resource.resource_name, resource.configuration_keys)}
        except LoggerRefused as error:
            return answer | {"error_code": ErrorCode(error.code), "error_message": str(error)}
    if resource.resource_type != TOPIC:
        return answer | {"error_code": ErrorCode.invalid_request, "error_message": "unsupported resource type"}
    try:
        overridden = (INTERNAL_CONFIGS[resource.resource_name] if is_internal(resource.resource_name)
                      else kafka_overrides(ctx.topics.get(resource.resource_name)))
    except errors.EngineError as error:
        return answer | {"error_code": error_code(error), "error_message": str(error)}
    return answer | {"configs": [
        {"name": d.config.name, "value": d.value, "read_only": False, "config_source": d.source,
         "is_sensitive": False, "synonyms": d.synonyms if synonyms else [], "config_type": d.config.type_code,
         "documentation": None}
        for d in _described(ctx, overridden, resource.configuration_keys)]}


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def alter_configs(ctx: Context, header: RequestHeader, request: AlterConfigsRequest) -> AlterConfigsAnswer:
    answers = []
    for resource in request.resources:
        if resource.resource_type == BROKER:  # the request's configs replace the scope's
            operations = [(c.name, SET, c.value) for c in resource.configs]
            answers.append(await _alter_broker(ctx, resource.resource_name, operations, request.validate_only,
                                               replace=True))
            continue
        answers.append(await _alter(ctx, resource.resource_type, resource.resource_name,
                                    _replacing({c.name: c.value for c in resource.configs}), request.validate_only))
    return {"throttle_time": 0, "responses": answers}


def _replacing(wanted: dict[str, str | None]) -> NewOverrides:
    """AlterConfigs: the request's configs replace every override."""
    return lambda _current: wanted


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def incremental_alter_configs(ctx: Context, header: RequestHeader,
                                    request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsAnswer:
    answers = []
    for resource in request.resources:
        operations = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
        if resource.resource_type == BROKER:
            answers.append(await _alter_broker(ctx, resource.resource_name, operations, request.validate_only))
            continue
        if resource.resource_type == BROKER_LOGGER:
            answers.append(_alter_loggers(ctx, resource.resource_name, operations, request.validate_only))
            continue

        def apply(current: dict[str, str], operations: tuple[AlterableConfig, ...] = resource.configs) -> dict[str, str | None]:
            return _apply_ops(current, operations)
        answers.append(await _alter(ctx, resource.resource_type, resource.resource_name, apply,
                                    request.validate_only))
    return {"throttle_time": 0, "responses": answers}


async def _alter_broker(ctx: Context, name: str, operations: Sequence[tuple[str, int, str | None]],
                        validate_only: bool, replace: bool = False) -> Altered:
    """Set or remove dynamic configs of one node or ("") the cluster; every refusal is
    INVALID_REQUEST with Kafka's message."""
    answer: Altered = {"error_code": ErrorCode.none, "error_message": None, "resource_type": BROKER,
                       "resource_name": name}
    try:
        scope = CLUSTER if name == CLUSTER else str(live_node(ctx, name).node_id)
        current = {} if replace else ctx.topics.dynamic.get(scope, {})
        values = changed(current, operations, READ_ONLY)
        if validate_only:  # set_dynamic checks the defaults they give before it writes anything
            ctx.topics.static_defaults.updated(topic_defaults({**ctx.topics.dynamic, scope: values}, ctx.node_id))
        else:
            await ctx.topics.set_dynamic(scope, values)
    except (BrokerNotFound, errors.InvalidConfig) as error:
        return answer | {"error_code": ErrorCode.invalid_request, "error_message": str(error)}
    return answer


def _alter_loggers(ctx: Context, name: str, operations: Sequence[tuple[str, int, str | None]],
                   validate_only: bool) -> Altered:
    answer: Altered = {"error_code": ErrorCode.none, "error_message": None, "resource_type": BROKER_LOGGER,
                       "resource_name": name}
    try:
        set_levels(ctx, name, operations, validate_only)
    except LoggerRefused as error:
        return answer | {"error_code": ErrorCode(error.code), "error_message": str(error)}
    return answer


def _apply_ops(current: dict[str, str], operations: Iterable[AlterableConfig]) -> dict[str, str | None]:
    result: dict[str, str | None] = dict(current)
    for op in operations:
        if op.config_operation == SET:
            result[op.name] = op.value
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        else:
            raise errors.InvalidConfig(f"APPEND and SUBTRACT do not apply to {op.name!r}: it is not a list")
    return result


async def _alter(ctx: Context, resource_type: int, name: str, new_overrides: NewOverrides,
                 validate_only: bool) -> Altered:
    answer: Altered = {"error_code": ErrorCode.none, "error_message": None, "resource_type": resource_type,
                       "resource_name": name}
    if resource_type != TOPIC:
        return answer | {"error_code": ErrorCode.invalid_request, "error_message": "only topic configs can be altered"}
    if is_internal(name):
        return answer | {"error_code": WRITE_REFUSED, "error_message": change_message(name)}
    try:
        topic = ctx.topics.get(name)
        overrides = to_overrides(new_overrides(kafka_overrides(topic)))
        await ctx.topics.reconfigure(topic.name, overrides, validate_only)
    except errors.EngineError as error:
        return answer | {"error_code": error_code(error), "error_message": str(error)}
    return answer
