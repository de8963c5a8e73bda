"""SASL/OAUTHBEARER (RFC 7628, KIP-255): the client shows a JWT; the broker checks it.

A token is accepted when its signature verifies against a key of the configured JWKS (a file,
re-read when it changes, or an http(s) URL, fetched again when a token names a key it does not
hold, at most every JWKS_REFETCH_S), with an asymmetric algorithm the key allows (RS*, PS*,
ES*, EdDSA: never "none", never HS*, whose key would be public); it has not expired (and is
already valid), allowing `oauthbearer_clock_skew_s`; its issuer and audience are the expected
ones when configured; and it names the principal in `oauthbearer_sub_claim` ("sub"). The
principal is "User:<that claim>". Kafka's unsecured validator (tokens with alg "none", for
development) is used only when `oauthbearer_unsecured` is set, and then nothing else is.
PyJWT does the JOSE work; nothing here is cryptography of its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import urllib.request
from collections.abc import Mapping

import jwt
from jwt import PyJWK, PyJWKSet

logger = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
KEY_TYPES = frozenset({"RSA", "EC", "OKP"})  # asymmetric keys only
JWKS_REFETCH_S = 10.0  # a JWKS URL is fetched again at most this often
FETCH_TIMEOUT_S = 10.0
JWKS_BYTES_MAX = 1 << 20


class TokenRefused(Exception):
    """The token is not accepted; the text says why (it never holds the token)."""


class Tokens:
    """Checks OAUTHBEARER tokens for one broker (the keys are shared by its connections)."""

    def __init__(self, jwks: str, issuer: str = "", audience: tuple[str, ...] = (), sub_claim: str = "sub",
                 clock_skew_s: int = 30, unsecured: bool = False) -> None:
        self.jwks = jwks  # a file path or an http(s) URL ("": unsecured only)
        self.issuer, self.audience, self.sub_claim = issuer, audience, sub_claim
        self.clock_skew_s, self.unsecured = clock_skew_s, unsecured
        self._keys: dict[str, PyJWK] = {}  # by kid ("" for a key without one)
        self._read_at = -JWKS_REFETCH_S  # monotonic time of the last fetch
        self._file_stamp: tuple[float, int] | None = None
        self._fetching: asyncio.Lock | None = None

    async def check(self, token: str) -> tuple[str, int]:
        """(principal, expiry in epoch ms) of a token; TokenRefused if it is not accepted."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("the token is not a JWT") from None
        if self.unsecured:
            return self._claims_unsecured(token, header)
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise TokenRefused(f"the token's algorithm {algorithm!r} is not accepted")
        key = await self._key(str(header.get("kid", "")))
        try:
            claims = jwt.decode(token, key, algorithms=[algorithm], audience=self.audience or None,
                                issuer=self.issuer or None, leeway=self.clock_skew_s,
                                options={"require": ["exp"], "verify_aud": bool(self.audience),
                                         "verify_iss": bool(self.issuer)})
        except jwt.PyJWTError as error:
            raise TokenRefused(f"the token is not accepted: {error}") from None
        return self._principal(claims), int(float(claims["exp"]) * 1000)

    def _claims_unsecured(self, token: str, header: Mapping[str, object]) -> tuple[str, int]:
        if header.get("alg") != "none":
            raise TokenRefused("only unsecured tokens (alg none) are accepted: oauthbearer_unsecured is set")
        try:
            claims = jwt.decode(token, options={"verify_signature": False, "require": ["exp"]},
                                leeway=self.clock_skew_s)
        except jwt.PyJWTError as error:
            raise TokenRefused(f"the token is not accepted: {error}") from None
        return self._principal(claims), int(float(claims["exp"]) * 1000)

    def _principal(self, claims: Mapping[str, object]) -> str:
        name = claims.get(self.sub_claim)
        if not isinstance(name, str) or not name:
            raise TokenRefused(f"the token has no {self.sub_claim!r} claim naming its principal")
        return f"User:{name}"

    async def _key(self, kid: str) -> PyJWK:
        key = self._keys.get(kid) if not self._file_changed() else None
        if key is not None:
            return key
        if self._fetching is None:
            self._fetching = asyncio.Lock()
        async with self._fetching:
            key = self._keys.get(kid)
            if key is None or self._file_changed():
                if not self._is_file() and time.monotonic() - self._read_at < JWKS_REFETCH_S and self._keys:
                    raise TokenRefused(f"no key {kid!r} in the JWKS")
                self._keys = await asyncio.to_thread(self._load)
                key = self._keys.get(kid)
        if key is None:
            raise TokenRefused(f"no key {kid!r} in the JWKS")
        return key

    def _is_file(self) -> bool:
        return not self.jwks.startswith(("http://", "https://"))

    def _file_changed(self) -> bool:
        if not self._is_file():
            return False
        try:
            found = os.stat(self.jwks)
        except OSError:
            return True
        return (found.st_mtime, found.st_size) != self._file_stamp

    def _load(self) -> dict[str, PyJWK]:
        """Blocking: the JWKS's asymmetric keys by kid (none if it cannot be read: logged)."""
        self._read_at = time.monotonic()
        try:
            if self._is_file():
                found = os.stat(self.jwks)
                with open(self.jwks, "rb") as handle:
                    text = handle.read(JWKS_BYTES_MAX)
                self._file_stamp = (found.st_mtime, found.st_size)
            else:
                with urllib.request.urlopen(self.jwks, timeout=FETCH_TIMEOUT_S) as answer:
                    text = answer.read(JWKS_BYTES_MAX)
            keys = PyJWKSet.from_dict(json.loads(text)).keys
        except (OSError, ValueError, jwt.PyJWTError) as error:
            logger.warning("cannot read the OAUTHBEARER JWKS %s: %s", self.jwks, error)
            return {}
        return {str(key.key_id or ""): key for key in keys if key.key_type in KEY_TYPES}
