"""InitProducerId (key 22) for idempotent producers.

Every call without a transactional id gets a fresh producer id at epoch 0, also when the
producer names its old id and epoch (KIP-360): Apache Kafka 4.4 answers that way (checked
against the reference broker), and a fresh id resets the producer's sequences as well as
an epoch bump would. Transactional ids arrive with the transaction coordinator; until then
they are refused.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .registry import handles


@handles(22, 0, 5)
async def init_producer_id(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        return _answer(ErrorCode.transactional_id_authorization_failed, -1, -1)
    return _answer(ErrorCode.none, ctx.engine.producer_ids.allocate(), 0)


def _answer(code: ErrorCode, producer_id: int, epoch: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}
