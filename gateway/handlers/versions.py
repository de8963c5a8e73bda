"""ApiVersions (key 18), answered from the handler registry."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .registry import APIS, handles

API_VERSIONS = 18


def advertised() -> list[dict[str, int]]:
    return [
        {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
        for api in sorted(APIS.values(), key=lambda api: api.key)
    ]


@handles(API_VERSIONS, 0, 4)
async def api_versions(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "api_keys": advertised(), "throttle_time": 0}


def unsupported_version_body() -> dict[str, Any]:
    """KIP-511: an ApiVersions request of a version we do not know is answered in the v0
    layout with UNSUPPORTED_VERSION and our ApiVersions range, so the client can retry."""
    api = APIS[API_VERSIONS]
    entry = {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
    return {"error_code": ErrorCode.unsupported_version, "api_keys": [entry]}
