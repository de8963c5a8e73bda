"""SASL on the SASL_PLAINTEXT and SASL_SSL listeners: who a connection is, before it may ask
for anything else.

A connection on such a listener starts unauthenticated, and then only ApiVersions,
SaslHandshake (v0-1) and SaslAuthenticate (v0-2) are answered; anything else closes it, as
Kafka's SaslServerAuthenticator does. SaslHandshake names a mechanism of
`enabled_mechanisms`; with v0 the tokens follow as bare frames, with v1 inside SaslAuthenticate
requests. The mechanisms:
- PLAIN: "authzid NUL user NUL password", the password checked against the user's stored
  SCRAM credential (gateway/users.py) off the event loop (it costs PBKDF2's rounds); no
  password is stored anywhere;
- SCRAM-SHA-256 and SCRAM-SHA-512 (protocol/scram.py) against the same credentials;
- OAUTHBEARER: a JWT checked against a JWKS (gateway/oauth.py), when enabled and configured.
Authenticated, the connection carries the principal "User:<name>". A failure answers
SASL_AUTHENTICATION_FAILED (UNSUPPORTED_SASL_MECHANISM for a mechanism not enabled) after
`failed_authentication_delay_ms` and closes (Kafka's connection.failed.authentication.delay.ms).
Messages and log lines never hold a password or a proof.

With `connections_max_reauth_ms` (KIP-368) a session lasts that long: SaslAuthenticate v1+
tells the client, which authenticates again on the same connection (a SaslHandshake on an
authenticated connection starts it, with the same mechanism and principal); a connection
whose session ended without that is closed at its next request. An OAUTHBEARER session
ends with its token at the latest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol, cast

from kio.schema.errors import ErrorCode

from ..protocol.apis import ApiKey
from ..protocol.codec import Peer, ProtocolError, RequestHeader, build_response, decode_request, encode_response, peek_header
from ..protocol.framing import api_key_of, frame
from ..protocol.scram import HASHES, SCRAM_SHA_256, SCRAM_SHA_512, ScramError, ServerExchange
from .oauth import TokenRefused, Tokens
from .users import Lookup, password_matches

logger = logging.getLogger(__name__)

PLAIN, OAUTHBEARER = "PLAIN", "OAUTHBEARER"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)  # what Martlet serves
RECEIVE_BYTES_MAX = 524_288  # Kafka's sasl.server.max.receive.size: the largest frame before authentication
HANDSHAKE_VERSIONS, AUTHENTICATE_VERSIONS = (0, 1), (0, 1, 2)
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """[sasl]: what SASL listeners accept, and the brokers' own credentials."""

    enabled_mechanisms: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)  # Kafka's sasl.enabled.mechanisms
    failed_authentication_delay_ms: int = 100  # Kafka's connection.failed.authentication.delay.ms
    connections_max_reauth_ms: int = 0  # Kafka's connections.max.reauth.ms: 0, sessions never end
    inter_broker_mechanism: str = SCRAM_SHA_512  # Kafka's sasl.mechanism.inter.broker.protocol
    inter_broker_user: str = ""  # a SASL inter-broker listener needs both
    inter_broker_password: str = ""
    # OAUTHBEARER (Kafka's sasl.oauthbearer.*): where the signing keys are, what a token must say
    oauthbearer_jwks: str = ""  # a JWKS file, or an http(s) URL (sasl.oauthbearer.jwks.endpoint.url)
    oauthbearer_expected_issuer: str = ""  # "": any
    oauthbearer_expected_audience: tuple[str, ...] = ()  # (): any
    oauthbearer_sub_claim: str = "sub"
    oauthbearer_clock_skew_s: int = 30
    oauthbearer_unsecured: bool = False  # development only: tokens with alg "none", and no others

    def tokens(self) -> Tokens | None:
        """The OAUTHBEARER token checker, when OAUTHBEARER is enabled."""
        if OAUTHBEARER not in self.enabled_mechanisms:
            return None
        return Tokens(self.oauthbearer_jwks, self.oauthbearer_expected_issuer, self.oauthbearer_expected_audience,
                      self.oauthbearer_sub_claim, self.oauthbearer_clock_skew_s, self.oauthbearer_unsecured)

    def check(self) -> None:
        """ValueError naming the setting that is wrong."""
        unknown = [name for name in self.enabled_mechanisms if name not in MECHANISMS]
        if unknown or not self.enabled_mechanisms:
            raise ValueError(f"[sasl] enabled_mechanisms: {', '.join(unknown) or 'none'} "
                             f"(Martlet serves {', '.join(MECHANISMS)})")
        if self.inter_broker_mechanism not in HASHES:
            raise ValueError(f"[sasl] inter_broker_mechanism: {self.inter_broker_mechanism} is not "
                             f"{SCRAM_SHA_256} or {SCRAM_SHA_512}")
        if self.failed_authentication_delay_ms < 0 or self.connections_max_reauth_ms < 0:
            raise ValueError("[sasl] failed_authentication_delay_ms and connections_max_reauth_ms: expected >= 0")
        oauth = OAUTHBEARER in self.enabled_mechanisms
        if oauth and not self.oauthbearer_jwks and not self.oauthbearer_unsecured:
            raise ValueError("[sasl] oauthbearer_jwks: OAUTHBEARER is enabled, so tokens need keys to be checked "
                             "against (a JWKS file or URL; or oauthbearer_unsecured = true, for development only)")
        if oauth and self.oauthbearer_jwks and self.oauthbearer_unsecured:
            raise ValueError("[sasl] oauthbearer_unsecured: set with oauthbearer_jwks; unsecured tokens are for "
                             "development only, name one or the other")




class Verifier(NamedTuple):
    """What a SASL listener checks identities with: its settings, the user store, the token checker."""

    settings: SaslSettings
    lookup: Lookup
    tokens: Tokens | None = None


class Closing(Exception):
    """The connection must close now: the text says why (for the log line)."""


class Refused(Exception):
    """SASL/PLAIN refused the client: the text is Kafka's (it holds no secret)."""


class Step(NamedTuple):
    """What one frame of the exchange gives: an answer to write, and then either the
    principal now authenticated, or a failure (answer after the delay, then close)."""

    answer: bytes | None
    principal: str | None = None
    failed: str = ""  # why, for the log line
    lifetime_ms: int = 0  # the session's length, once authenticated (0: no end)


class Authenticator:
    """One connection's SASL exchange, from its first request (or a re-authentication) to a
    principal. `take` each frame while `waiting_handshake` or mid-exchange."""

    def __init__(self, verifier: Verifier, peer: Peer, reauthenticating: str = "", mechanism: str = "",
                 expired: bool = False) -> None:
        self.settings = verifier.settings
        self.lookup = verifier.lookup
        self.tokens = verifier.tokens
        self._token_expiry_ms = 0  # an OAUTHBEARER token's, once checked
        self.peer = peer
        self.previous = reauthenticating  # the principal a re-authentication must keep ("": a first one)
        self.mechanism = mechanism  # the one the first authentication used, then this one's
        self.waiting_handshake = True  # until the handshake: ApiVersions is answered once (`versions_done`)
        self.versions_done = False  # ApiVersions answered: only the handshake may follow
        self.expired = expired  # the session ended: only a re-authentication may follow
        self._raw = False  # SaslHandshake v0: the tokens come as bare frames
        self._scram: ServerExchange | None = None

    async def take(self, frame: bytearray) -> Step:
        if self.waiting_handshake:
            return self._handshake(frame)
        if self._raw:
            return await self._token(None, bytes(frame))
        if api_key_of(frame) == ApiKey.SASL_HANDSHAKE:  # a second handshake: Kafka's answer, then the end
            header, _ = self._decode(frame, ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSIONS)
            answer = {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
            return Step(_encoded(header, answer), failed="a second SaslHandshake before authenticating")
        header, request = self._decode(frame, ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSIONS)
        return await self._token(header, cast(_Authenticate, request).auth_bytes)

    def _handshake(self, frame: bytearray) -> Step:
        header, request = self._decode(frame, ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSIONS)
        enabled = self.settings.enabled_mechanisms
        answer: dict[str, object] = {"error_code": ErrorCode.none, "mechanisms": list(enabled)}
        asked = cast(_Handshake, request).mechanism
        if asked not in enabled:
            answer["error_code"] = ErrorCode.unsupported_sasl_mechanism
            return Step(_encoded(header, answer), failed=f"unsupported SASL mechanism {asked}")
        if self.mechanism and asked != self.mechanism:
            answer["error_code"] = ErrorCode.illegal_sasl_state
            return Step(_encoded(header, answer), failed=f"re-authentication with {asked}, not {self.mechanism}")
        self.mechanism, self.waiting_handshake, self._raw = asked, False, header.api_version == 0
        return Step(_encoded(header, answer))

    async def _token(self, header: RequestHeader | None, token: bytes) -> Step:
        try:
            principal, reply = await self._check(token)
        except (ScramError, Refused) as error:
            shown = str(error) if self.mechanism in (PLAIN, OAUTHBEARER) else SCRAM_FAILED.format(self.mechanism)
            return self._failed(header, shown, str(error))
        if principal and self.previous and principal != self.previous:
            return self._failed(header, f"Cannot change principals during re-authentication from {self.previous}: "
                                        f"{principal}", "re-authentication as another principal")
        lifetime = self._lifetime_ms() if principal else 0
        if header is None:  # v0: the token alone in a frame of its own (an empty one for PLAIN's success)
            return Step(frame(reply or b""), principal, lifetime_ms=lifetime)
        answer = {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": reply or b"",
                  "session_lifetime": lifetime}
        return Step(_encoded(header, answer), principal, lifetime_ms=lifetime)

    def _lifetime_ms(self) -> int:
        """KIP-368: the session's length (0: no end): connections_max_reauth_ms, and no
        longer than an OAUTHBEARER token is valid (at least 1 ms: it ends now)."""
        lifetime = self.settings.connections_max_reauth_ms
        if lifetime and self._token_expiry_ms:
            lifetime = max(1, min(lifetime, self._token_expiry_ms - int(time.time() * 1000)))
        return lifetime

    def _failed(self, header: RequestHeader | None, shown: str, logged: str) -> Step:
        if header is None:  # v0 has no way to say why: the connection closes
            return Step(None, failed=logged)
        answer = {"error_code": ErrorCode.sasl_authentication_failed, "error_message": shown, "auth_bytes": b"",
                  "session_lifetime": 0}
        return Step(_encoded(header, answer), failed=logged)

    async def _check(self, token: bytes) -> tuple[str | None, bytes | None]:
        """(the principal once authenticated, else None; the reply token)."""
        if self.mechanism == PLAIN:
            user = await self._plain(token)
            return f"User:{user}", None
        if self.mechanism == OAUTHBEARER:
            return await self._bearer(token), b""
        if self._scram is None:
            self._scram = ServerExchange(self.mechanism)
            user = self._scram.start(token)
            return None, self._scram.first(self.lookup(user, self.mechanism))
        scram, self._scram = self._scram, None
        reply = scram.final(token)
        return f"User:{scram.user}", reply

    async def _plain(self, token: bytes) -> str:
        # As Kafka's PlainSaslServer reads it: UTF-8 (what is not decodes to U+FFFD and matches no
        # user), at most four NUL-separated parts counted, the password checked before the authzid.
        parts = token.decode(errors="replace").split("\0", 3)
        if len(parts) != 3:
            raise Refused(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            raise Refused("Authentication failed: username not specified")
        if not password:
            raise Refused("Authentication failed: password not specified")
        if not await password_matches(self.lookup, user, password):
            raise Refused("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise Refused("Authentication failed: Client requested an authorization id that is different "
                          "from username")
        return user

    async def _bearer(self, message: bytes) -> str:
        """RFC 7628's client response: "n,[a=authzid],^Aauth=Bearer TOKEN^A[key=value^A]...^A"."""
        if self.tokens is None:
            raise Refused("OAUTHBEARER is not configured")
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise Refused("Invalid OAUTHBEARER client response: not UTF-8") from None
        gs2, sep, rest = text.partition("\x01")
        fields = dict(item.partition("=")[::2] for item in rest.split("\x01") if item)
        scheme, _, token = fields.get("auth", "").partition(" ")
        if (not sep or not gs2.startswith("n,") or scheme.lower() != "bearer" or not token
                or not rest.endswith("\x01\x01")):
            raise Refused("Invalid OAUTHBEARER client response")
        try:
            principal, self._token_expiry_ms = await self.tokens.check(token.strip())
        except TokenRefused as error:
            raise Refused(f"Authentication failed: {error}") from None
        authzid = gs2[2:].rstrip(",")
        if authzid and f"User:{authzid.removeprefix('a=')}" != principal:
            raise Refused("Authentication failed: Client requested an authorization id that is different from "
                          "the token's principal name")
        return principal

    def _decode(self, frame: bytearray, key: ApiKey, versions: tuple[int, ...]) -> tuple[RequestHeader, object]:
        try:
            peeked = peek_header(frame)
        except ProtocolError as error:
            raise Closing(str(error)) from None
        if peeked.api_key != key or peeked.api_version not in versions:
            name = ApiKey(peeked.api_key).name if peeked.api_key in ApiKey._value2member_map_ else peeked.api_key
            if self.expired:
                raise Closing(f"{name} after the session of {self.previous} ended "
                              f"({self.settings.connections_max_reauth_ms} ms) without a re-authentication")
            when = "while re-authenticating" if self.previous else "before authentication"
            raise Closing(f"{name} v{peeked.api_version} where {key.name} was expected ({when})")
        try:
            return decode_request(frame, key, peeked.api_version, self.peer)
        except ProtocolError as error:
            raise Closing(str(error)) from None


class _Handshake(Protocol):  # SaslHandshakeRequest, every version
    @property
    def mechanism(self) -> str: ...


class _Authenticate(Protocol):  # SaslAuthenticateRequest, every version
    @property
    def auth_bytes(self) -> bytes: ...


def _encoded(header: RequestHeader, answer: Mapping[str, object]) -> bytes:
    return encode_response(header, build_response(header, answer))

