"""The table of served APIs, collected from the handler modules' declarations."""

from __future__ import annotations

from functools import cache
from types import ModuleType

from ..protocol.apis import ApiKey
from .handlers import (
    configs,
    consumer_groups,
    fetch,
    group_offsets,
    groups,
    log_dirs,
    metadata,
    native,
    offsets,
    produce,
    producers,
    quotas,
    reassignments,
    sasl,
    topics,
    transaction_views,
    transactions,
    users,
    versions,
)
from .handlers.api import Api

MODULES: tuple[ModuleType, ...] = (
    configs, consumer_groups, fetch, group_offsets, groups, log_dirs, metadata, native, offsets, produce, producers,
    quotas, reassignments, sasl, topics, transaction_views, transactions, users, versions)


@cache
def apis() -> dict[ApiKey, Api]:
    table: dict[ApiKey, Api] = {}
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, Api):
                assert value.key not in table, f"{value.key.name} is declared twice"
                table[value.key] = value
    return table
