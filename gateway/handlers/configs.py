"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44) for topics.

Broker resources are described (empty: nothing is tunable at run time) and refused for
alteration with INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...engine.errors import EngineError, InvalidConfig
from ..mapping import CONFIG_NAMES, config_to_engine, engine_overrides_to_kafka, error_code
from .registry import handles

TOPIC = 2
BROKER = 4
SOURCE_TOPIC = 1
SOURCE_DEFAULT = 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe_topic_configs(topic: Any, keys: Any) -> list[dict[str, Any]]:
    entries = []
    for spec in CONFIG_NAMES:
        if keys and spec.kafka not in keys:
            continue
        overridden = spec.engine in topic.overrides
        entries.append({"name": spec.kafka, "value": spec.to_kafka(getattr(topic.config, spec.engine)),
                        "read_only": False, "config_source": SOURCE_TOPIC if overridden else SOURCE_DEFAULT,
                        "is_default": not overridden, "is_sensitive": False, "synonyms": [],
                        "config_type": spec.type_code, "documentation": None})
    return entries


@handles(32, 1, 4)
async def describe_configs(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [_describe_one(ctx, r) for r in request.resources]}


def _describe_one(ctx: Any, resource: Any) -> dict[str, Any]:
    answer = {"error_code": ErrorCode.none, "error_message": None, "resource_type": resource.resource_type,
              "resource_name": resource.resource_name, "configs": []}
    if resource.resource_type == BROKER:
        return answer
    if resource.resource_type != TOPIC:
        return answer | {"error_code": ErrorCode.invalid_request, "error_message": "unsupported resource type"}
    try:
        topic = ctx.engine.topic(resource.resource_name)
    except EngineError as error:
        return answer | {"error_code": error_code(error), "error_message": str(error)}
    return answer | {"configs": describe_topic_configs(topic, resource.configuration_keys)}


@handles(33, 0, 2)
async def alter_configs(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    answers = []
    for resource in request.resources:
        wanted = {c.name: c.value for c in resource.configs}
        answers.append(_alter(ctx, resource, lambda _current, wanted=wanted: wanted, request.validate_only))
    return {"throttle_time": 0, "responses": answers}


@handles(44, 0, 1)
async def incremental_alter_configs(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    answers = []
    for resource in request.resources:
        answers.append(_alter(ctx, resource, lambda current, r=resource: _apply_ops(current, r.configs),
                              request.validate_only))
    return {"throttle_time": 0, "responses": answers}


def _apply_ops(current: dict[str, str], operations: Any) -> dict[str, str]:
    result = dict(current)
    for op in operations:
        if op.config_operation == SET:
            result[op.name] = op.value
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        else:
            raise InvalidConfig(f"APPEND and SUBTRACT do not apply to {op.name!r}: it is not a list")
    return result


def _alter(ctx: Any, resource: Any, new_overrides: Any, validate_only: bool) -> dict[str, Any]:
    answer = {"error_code": ErrorCode.none, "error_message": None, "resource_type": resource.resource_type,
              "resource_name": resource.resource_name}
    if resource.resource_type != TOPIC:
        return answer | {"error_code": ErrorCode.invalid_request, "error_message": "only topic configs can be altered"}
    try:
        topic = ctx.engine.topic(resource.resource_name)
        current = engine_overrides_to_kafka(topic.config, topic.overrides)
        overrides = dict(config_to_engine(name, value) for name, value in new_overrides(current).items())
        if validate_only:
            ctx.engine.settings.topic_defaults.updated(overrides)
        else:
            ctx.engine.reconfigure_topic(topic.name, overrides)
    except EngineError as error:
        return answer | {"error_code": error_code(error), "error_message": str(error)}
    return answer

