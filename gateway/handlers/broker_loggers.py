"""BROKER_LOGGER resources: the node's loggers and their levels, as `kafka-configs
--entity-type broker-loggers` shows and changes them on a Kafka broker.

The loggers are the process's Python loggers (Martlet's modules and the libraries it uses)
plus `root`, each shown at its effective level under Kafka's level names (Python's WARNING
is WARN, CRITICAL is FATAL; TRACE is a level below DEBUG that nothing logs at today).
Setting a level takes effect at once and lasts until the process stops, as on Kafka (whose
log4j changes are not persisted either); DELETE puts a logger back to inheriting its
parent's level. Refusals carry Kafka's error codes and messages: an unknown logger or level
is INVALID_CONFIG, APPEND/SUBTRACT, a null value and removing root's level INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from ...protocol.answers import DescribeConfigsResourceResultAnswer
from ..context import Context

LOGGER_SOURCE = 6  # Kafka's ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
UNKNOWN_TYPE = 0
ROOT = "root"
SET, DELETE = 0, 1
TRACE = 5
logging.addLevelName(TRACE, "TRACE")
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
NAMES = {level: name for name, level in LEVELS.items()}
VALID = ", ".join(sorted(LEVELS))


class LoggerRefused(Exception):
    """A refused change: `code` is Kafka's error code for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


INVALID_CONFIG, INVALID_REQUEST = 40, 42


def check_node(ctx: Context, name: str) -> None:
    """A BROKER_LOGGER resource names this node; LoggerRefused (INVALID_REQUEST) with Kafka's message."""
    try:
        node_id = int(name)
    except ValueError:
        raise LoggerRefused(INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node_id != ctx.node_id:
        raise LoggerRefused(INVALID_REQUEST, f"Unexpected broker id, expected {ctx.node_id} but received {name}")


def _loggers() -> dict[str, logging.Logger]:
    found = {name: logger for name, logger in logging.root.manager.loggerDict.items()
             if isinstance(logger, logging.Logger)}
    return {ROOT: logging.getLogger(), **dict(sorted(found.items()))}


def _level_name(logger: logging.Logger) -> str:
    level = logger.getEffectiveLevel()
    return NAMES.get(level) or NAMES[max((known for known in NAMES if known <= level), default=TRACE)]


def logger_entries(ctx: Context, name: str, keys: Iterable[str] | None) -> list[DescribeConfigsResourceResultAnswer]:
    check_node(ctx, name)
    wanted = set(keys) if keys else None
    return [{"name": logger_name, "value": _level_name(logger), "read_only": False, "config_source": LOGGER_SOURCE,
             "is_sensitive": False, "synonyms": [], "config_type": UNKNOWN_TYPE, "documentation": None}
            for logger_name, logger in _loggers().items() if wanted is None or logger_name in wanted]


def set_levels(ctx: Context, name: str, operations: Sequence[tuple[str, int, str | None]], validate_only: bool) -> None:
    """Apply IncrementalAlterConfigs `operations` (logger, op, level) to this node's loggers
    (all checked first); LoggerRefused with Kafka's code and message."""
    check_node(ctx, name)
    loggers = _loggers()
    changes: list[tuple[logging.Logger, int]] = []
    for logger_name, operation, value in operations:
        if operation not in (SET, DELETE):
            verb = {2: "APPEND", 3: "SUBTRACT"}.get(operation, str(operation))
            raise LoggerRefused(INVALID_REQUEST, f"{verb} operation is not allowed for the BROKER_LOGGER resource")
        if operation == DELETE and logger_name == ROOT:
            raise LoggerRefused(INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
        if operation == SET and value is None:
            raise LoggerRefused(INVALID_REQUEST, f"Null value not supported for : {logger_name}")
        logger = loggers.get(logger_name)
        if logger is None:
            raise LoggerRefused(INVALID_CONFIG, f"Logger {logger_name} does not exist!")
        if operation == DELETE:
            changes.append((logger, logging.NOTSET))
        elif value in LEVELS:
            changes.append((logger, LEVELS[value]))
        else:
            raise LoggerRefused(INVALID_CONFIG, f"Cannot set the log level of {logger_name} to {value} as it is not "
                                                f"a supported log level. Valid log levels are {VALID}")
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)
