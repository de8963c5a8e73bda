"""DescribeClientQuotas (48): the client quotas that apply to the entities asked about.

Martlet enforces no client quota yet (quotas come with authorization, issue 40), so none is
configured and the answer lists no entity, as Kafka answers when no quota is set. Tools ask
for it beside other things: `kafka-configs --describe --entity-type users` shows a user's
quotas and SCRAM credentials together.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...protocol.answers import DescribeClientQuotasAnswer
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from .api import handles


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
async def describe_client_quotas(ctx: Context, header: RequestHeader, request: object) -> DescribeClientQuotasAnswer:
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": []}
