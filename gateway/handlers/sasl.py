"""SaslHandshake (17) and SaslAuthenticate (36) where no SASL exchange is going on: on a
listener without SASL, or SaslAuthenticate on a connection already authenticated. Kafka
answers both with ILLEGAL_SASL_STATE there, and so does Martlet. The exchange itself, on
SASL listeners, is gateway/sasl.py's (the connection hands it those frames first).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...protocol.answers import SaslAuthenticateAnswer, SaslHandshakeAnswer
from ...protocol.apis import ApiKey
from ...protocol.codec import RequestHeader
from ..context import Context
from .api import handles


@handles(ApiKey.SASL_HANDSHAKE, 0, 1)
async def sasl_handshake(ctx: Context, header: RequestHeader, request: object) -> SaslHandshakeAnswer:
    return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}


@handles(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def sasl_authenticate(ctx: Context, header: RequestHeader, request: object) -> SaslAuthenticateAnswer:
    return {"error_code": ErrorCode.illegal_sasl_state,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime": 0}
