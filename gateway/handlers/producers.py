"""InitProducerId (key 22) for idempotent producers.

A new producer gets a fresh id at epoch 0. A producer that names its id and epoch
(KIP-360, after an unknown-sequence or timeout) gets the same id at the next epoch, which
resets its sequences on every partition. Transactional ids arrive with the transaction
coordinator; until then they are refused.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .registry import handles

EPOCH_MAX = 32767


@handles(22, 0, 5)
async def init_producer_id(ctx: Any, header: Any, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        return _answer(ErrorCode.transactional_id_authorization_failed, -1, -1)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < EPOCH_MAX:
        return _answer(ErrorCode.none, producer_id, epoch + 1)
    return _answer(ErrorCode.none, ctx.engine.producer_ids.allocate(), 0)


def _answer(code: ErrorCode, producer_id: int, epoch: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}
