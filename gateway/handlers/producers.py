"""InitProducerId (key 22) for idempotent producers.

Every call without a transactional id gets a fresh producer id at epoch 0, also when the
producer names its old id and epoch (KIP-360): Apache Kafka 4.4 answers that way (checked
against the reference broker), and a fresh id resets the producer's sequences as well as
an epoch bump would. Transactional ids arrive with the transaction coordinator; until then
they are refused.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest

from ..context import Context
from ..protocol.answers import InitProducerIdAnswer
from ..protocol.apis import ApiKey
from ..protocol.codec import RequestHeader
from .api import handles


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def init_producer_id(ctx: Context, header: RequestHeader, request: InitProducerIdRequest) -> InitProducerIdAnswer:
    if request.transactional_id is not None:
        return _answer(ErrorCode.transactional_id_authorization_failed, -1, -1)
    return _answer(ErrorCode.none, await ctx.producer_ids.allocate(), 0)


def _answer(code: ErrorCode, producer_id: int, epoch: int) -> InitProducerIdAnswer:
    return {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}
