"""InitProducerId (key 22) for idempotent and transactional producers.

Every call without a transactional id gets a fresh producer id at epoch 0, also when the
producer names its old id and epoch (KIP-360): Apache Kafka 4.4 answers that way (checked
against the reference broker), and a fresh id resets the producer's sequences as well as
an epoch bump would. A call with a transactional id goes to the transaction coordinator
(engine/transactions): the id's producer id at its next epoch, which fences older producers.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest

from ...protocol.answers import InitProducerIdAnswer
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from ..mapping import txn_code
from .api import handles
from .common import millis


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def init_producer_id(ctx: Context, header: RequestHeader, request: InitProducerIdRequest) -> InitProducerIdAnswer:
    if request.transactional_id is None:
        return _answer(ErrorCode.none, await ctx.producer_ids.allocate(), 0)
    if not ctx.transactions.coordinates(request.transactional_id):
        return _answer(ErrorCode.not_coordinator, -1, -1)
    answer = await ctx.transactions.init_producer_id(request.transactional_id, millis(request.transaction_timeout))
    code = txn_code(answer.error, ApiKey.INIT_PRODUCER_ID, header.api_version)
    return _answer(code, answer.producer_id, answer.epoch) if code == ErrorCode.none else _answer(code, -1, -1)


def _answer(code: ErrorCode, producer_id: int, epoch: int) -> InitProducerIdAnswer:
    return {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}
