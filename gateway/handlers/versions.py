"""ApiVersions (key 18), answered from the table of served APIs (Context.apis)."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from ..context import Context
from ..protocol.answers import ApiVersionsAnswer, ApiVersionsApiVersionAnswer
from ..protocol.apis import ApiKey, Served
from ..protocol.codec import RequestHeader
from .api import handles


def advertised(apis: Mapping[ApiKey, Served]) -> list[ApiVersionsApiVersionAnswer]:
    return [_entry(api) for _, api in sorted(apis.items())]


def _entry(api: Served) -> ApiVersionsApiVersionAnswer:
    return {"api_key": int(api.key), "min_version": api.min_version, "max_version": api.max_version}


@handles(ApiKey.API_VERSIONS, 0, 4)
async def api_versions(ctx: Context, header: RequestHeader, request: ApiVersionsRequest) -> ApiVersionsAnswer:
    return {"error_code": ErrorCode.none, "api_keys": advertised(ctx.apis), "throttle_time": 0}


def unsupported_version_answer(api: Served) -> ApiVersionsAnswer:
    """KIP-511: an ApiVersions request of a version we do not know is answered in the v0
    layout with UNSUPPORTED_VERSION and our ApiVersions range, so the client can retry."""
    return {"error_code": ErrorCode.unsupported_version, "api_keys": [_entry(api)]}
