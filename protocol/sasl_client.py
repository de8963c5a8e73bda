"""A client's side of SASL, for Martlet's own clients (brokers calling each other, the native
SDK): SaslHandshake v1, then SaslAuthenticate v2 with PLAIN, SCRAM-SHA-256/512 or
OAUTHBEARER. Transport-free: `ask` sends one Kafka request and returns its answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import NamedTuple, Protocol, cast

from .apis import ApiKey
from .scram import HASHES, ClientExchange, ScramError

HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2
PLAIN, OAUTHBEARER = "PLAIN", "OAUTHBEARER"
Ask = Callable[[int, int, Mapping[str, object]], Awaitable[object]]  # (api key, version, fields) -> answer


class Login(NamedTuple):
    """Who a client authenticates as: user and password (PLAIN, SCRAM), or for OAUTHBEARER
    a callable giving a fresh token (the password is then unused)."""

    mechanism: str
    user: str = ""
    password: str = ""
    token: Callable[[], str] | None = None


class LoginRefused(ConnectionError):
    """The broker refused the login (or answered as no broker should): the text says why."""


class _Answer(Protocol):
    @property
    def error_code(self) -> int: ...


class _Authenticated(_Answer, Protocol):
    @property
    def error_message(self) -> str | None: ...

    @property
    def auth_bytes(self) -> bytes: ...


async def login(ask: Ask, credentials: Login) -> None:
    """Authenticate the connection `ask` speaks on; LoginRefused if the broker says no."""
    mechanism = credentials.mechanism
    handshake = cast(_Answer, await ask(ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": mechanism}))
    if handshake.error_code != 0:
        raise LoginRefused(f"the broker does not take SASL {mechanism} here (error {handshake.error_code})")
    if mechanism == PLAIN:
        await _authenticate(ask, f"\0{credentials.user}\0{credentials.password}".encode())
    elif mechanism == OAUTHBEARER:
        if credentials.token is None:
            raise LoginRefused("OAUTHBEARER needs a token")
        await _authenticate(ask, f"n,,\x01auth=Bearer {credentials.token()}\x01\x01".encode())
    elif mechanism in HASHES:
        exchange = ClientExchange(mechanism, credentials.user, credentials.password)
        try:
            server_first = await _authenticate(ask, exchange.first())
            exchange.verify(await _authenticate(ask, exchange.final(server_first)))
        except ScramError as error:
            raise LoginRefused(f"SCRAM failed: {error}") from None
    else:
        raise LoginRefused(f"unknown SASL mechanism {mechanism}")


async def _authenticate(ask: Ask, token: bytes) -> bytes:
    answer = cast(_Authenticated, await ask(ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token}))
    if answer.error_code != 0:
        raise LoginRefused(f"authentication failed: {answer.error_message}")
    return bytes(answer.auth_bytes)
