"""ApiVersions (key 18), answered from the table of served APIs (Context.apis).

From v3 the answer also lists feature levels (KIP-584). Martlet states the two that change
what Kafka 4 clients do: group.version 1 (KIP-848 consumer groups are served) and
transaction.version 0, its only level, so no client takes up KIP-890's transactions
(Produce v12 adds nothing else). A level-0 feature is supported but not finalized, as Kafka
lists it. The KRaft-only features (metadata.version, kraft.version, ...) describe a
controller quorum Martlet does not have and are left out: no client acts on them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from ...protocol.answers import (
    ApiVersionsAnswer,
    ApiVersionsApiVersionAnswer,
    ApiVersionsFinalizedFeatureKeyAnswer,
    ApiVersionsSupportedFeatureKeyAnswer,
)
from ...protocol.apis import KAFKA_KEYS_END, ApiKey, Served
from ...protocol.codec import RequestHeader
from ..context import Context
from .api import handles


def advertised(apis: Mapping[ApiKey, Served]) -> list[ApiVersionsApiVersionAnswer]:
    return [_entry(api) for key, api in sorted(apis.items()) if key < KAFKA_KEYS_END]


def _entry(api: Served) -> ApiVersionsApiVersionAnswer:
    return {"api_key": int(api.key), "min_version": api.min_version, "max_version": api.max_version}


SUPPORTED_FEATURES: list[ApiVersionsSupportedFeatureKeyAnswer] = [
    {"name": "group.version", "min_version": 0, "max_version": 1},
    {"name": "transaction.version", "min_version": 0, "max_version": 0},
]
FINALIZED_FEATURES: list[ApiVersionsFinalizedFeatureKeyAnswer] = [
    {"name": "group.version", "min_version_level": 1, "max_version_level": 1},
]
FEATURES_EPOCH = 1  # the finalized levels never change


@handles(ApiKey.API_VERSIONS, 0, 4)
async def api_versions(ctx: Context, header: RequestHeader, request: ApiVersionsRequest) -> ApiVersionsAnswer:
    return {"error_code": ErrorCode.none, "api_keys": advertised(ctx.apis), "throttle_time": 0,
            "supported_features": SUPPORTED_FEATURES, "finalized_features_epoch": FEATURES_EPOCH,
            "finalized_features": FINALIZED_FEATURES, "zk_migration_ready": False}


def unsupported_version_answer(api: Served) -> ApiVersionsAnswer:
    """KIP-511: an ApiVersions request of a version we do not know is answered in the v0
    layout with UNSUPPORTED_VERSION and our ApiVersions range, so the client can retry."""
    return {"error_code": ErrorCode.unsupported_version, "api_keys": [_entry(api)]}
