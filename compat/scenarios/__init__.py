"""The compatibility scenarios, in the order they run. A scenario is a function
`(driver, ctx) -> observations`; see common.py for the contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clients.base import Driver
from . import admin, configs, errors, groups, read_committed, records, transactions
from .common import Context

Scenario = Callable[[Driver, Context], dict[str, Any]]

SCENARIOS: dict[str, Scenario] = {
    fn.__name__: fn
    for fn in [
        admin.api_versions, admin.metadata, admin.topic_lifecycle, *records.SCENARIOS,
        *groups.SCENARIOS, *transactions.SCENARIOS, *read_committed.SCENARIOS,
        admin.delete_records, *errors.SCENARIOS, *configs.SCENARIOS,
    ]
}

__all__ = ["SCENARIOS", "Context", "Scenario"]
