"""Handlers register here with the versions they serve; ApiVersions is built from the same
table, so what Martlet advertises is exactly what it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

Handler = Callable[[Any, Any, Any], Awaitable[Mapping[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    min_version: int
    max_version: int
    handler: Handler

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


APIS: dict[int, Api] = {}


def handles(key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        assert key not in APIS, f"api {key} registered twice"
        APIS[key] = Api(key, min_version, max_version, handler)
        return handler
    return register


def load_all() -> dict[int, Api]:
    """Import every handler module (each registers itself) and return the table."""
    from . import (  # noqa: F401
        configs, consumer_groups, fetch, group_offsets, groups, metadata, offsets, produce, producers, topics,
        versions,
    )

    return APIS
