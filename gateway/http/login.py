"""The HTTP port's door keeper ([http] login, issue 39): who a request is, and the login
endpoints. auth.py holds the decisions and the reasons behind them; this module makes the
checks that take time and answers:

- POST /api/login {"user", "password"} (or {"token": JWT}): 200 {"principal", "user",
  "csrf", "expires_ms"} with the session cookie; 401 after the failed-authentication delay.
- POST /api/logout: ends the session of the cookie (with its CSRF token, as every change made
  with the cookie); 200 {"logged_out": true} and the cookie deleted.
- GET /api/session: {"login": false} with login off; else who this request is
  ({"login": true, "principal", "user", "via": basic|bearer|session, "csrf", "expires_ms"}),
  or 401. The console asks it first, to show its login page or the views.

A password is checked against the user's stored SCRAM credential off the event loop (PBKDF2);
an unknown user is checked against a made-up credential, so that the answer takes as long.
A failure is answered after [sasl] failed_authentication_delay_ms, as a Kafka listener answers
one, and logged with the user name but never the password or token (one line per
FAILURE_LOG_S at most: a guesser may try many).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..oauth import TokenRefused, Tokens
from ..sasl import SaslSettings
from ..tls import TlsSettings
from ..users import Lookup, password_matches
from .auth import (
    LOGIN_PATH,
    LOGOUT_PATH,
    SESSION_PATH,
    Basic,
    Bearer,
    HttpSettings,
    Malformed,
    Session,
    Sessions,
    authorization,
    challenge,
    cookie_name,
    cookie_value,
    csrf_refusal,
    needs_login,
    set_cookie,
)
from .guard import LogThrottle
from .parser import Request
from .response import Json, Response, error_response, json_response

logger = logging.getLogger(__name__)

FAILURE_LOG_S = 10.0
ENDPOINTS = {LOGIN_PATH: "POST", LOGOUT_PATH: "POST", SESSION_PATH: "GET"}
FAILED = "invalid user name or password"


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """What the config says of the HTTP port's security: [http]'s keys, and the [tls] and [sasl]
    sections it shares with the Kafka listeners."""

    http: HttpSettings = field(default_factory=HttpSettings)
    tls: TlsSettings = field(default_factory=TlsSettings)
    sasl: SaslSettings = field(default_factory=SaslSettings)


@dataclass(frozen=True, slots=True)
class Identity:
    principal: str  # "User:<name>"
    via: str  # "basic", "bearer" or "session"
    session: Session | None = None
    cookie: str | None = None  # the session cookie's value, for a session


class Gate:
    """Asked for every request the guard let through: an answer (a refusal, or a login
    endpoint's), or None to let the routes answer it."""

    def __init__(self, settings: HttpSettings, lookup: Lookup, tokens: Tokens | None, delay_ms: int,
                 sessions: Sessions, secure: bool, port: Callable[[], int | None] = lambda: None) -> None:
        self.settings = settings
        self.lookup = lookup
        self.tokens = tokens
        self.delay_ms = delay_ms
        self.sessions = sessions
        self.secure = secure  # served over TLS: the cookie is Secure
        self.port = port  # this port's number, once bound (it names the cookie)
        self._failures = LogThrottle(FAILURE_LOG_S)

    @property
    def cookie(self) -> str:
        return cookie_name(self.port(), self.secure)

    async def admit(self, request: Request, peer: str) -> Response | None:
        if request.path in ENDPOINTS:
            return await self._endpoint(request, peer)
        if not needs_login(request.method, request.path, self.settings):
            return None
        who = await self.identify(request, peer)
        return who if isinstance(who, Response) else None

    async def identify(self, request: Request, peer: str) -> Identity | Response:
        """Who the request is, or the answer refusing it (401, 403 for a missing CSRF token)."""
        shown = authorization(request.headers)
        if isinstance(shown, Malformed):
            return self._unauthorized(request, shown.why)
        if isinstance(shown, Basic):
            principal = await self._password(shown.user, shown.password)
            if principal is None:
                return await self._failed(request, peer, shown.user, FAILED)
            return Identity(principal, "basic")
        if isinstance(shown, Bearer):
            try:
                principal, _ = await self._token(shown.token)
            except TokenRefused as error:
                return await self._failed(request, peer, "", str(error))
            return Identity(principal, "bearer")
        return self._session(request)

    def _session(self, request: Request) -> Identity | Response:
        value = cookie_value(request.headers, self.cookie)
        session = None if value is None else self.sessions.find(value)
        if value is None or session is None:
            why = "the session has ended: log in again" if value else "log in first (Basic, Bearer or /api/login)"
            return self._unauthorized(request, why)
        refused = csrf_refusal(request.method, request.headers, session)
        if refused is not None:
            return error_response(403, refused)
        return Identity(session.principal, "session", session, value)

    # -- the endpoints

    async def _endpoint(self, request: Request, peer: str) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        if method != ENDPOINTS[request.path]:
            response = error_response(405, f"{request.method} is not allowed here")
            response.headers["Allow"] = ENDPOINTS[request.path]
            return response
        if request.path == SESSION_PATH and not self.settings.login:
            return json_response({"login": False})
        if not self.settings.login:
            return error_response(404, "[http] login is off: there is nothing to log in to or out of")
        if request.path == LOGIN_PATH:
            return await self._login(request, peer)
        who = await self.identify(request, peer)
        if isinstance(who, Response):
            return who
        if request.path == LOGOUT_PATH:
            return self._logout(who, peer)
        return json_response(_described(who))

    async def _login(self, request: Request, peer: str) -> Response:
        doc = _json_object(request.body)
        user, password, token = doc.get("user"), doc.get("password"), doc.get("token")
        if isinstance(token, str) and token:
            try:
                principal, ends_ms = await self._token(token)
            except TokenRefused as error:
                return await self._failed(request, peer, "", str(error))
        elif isinstance(user, str) and user and isinstance(password, str):
            found = await self._password(user, password)
            if found is None:
                return await self._failed(request, peer, user, FAILED)
            principal, ends_ms = found, None
        else:
            return error_response(400, 'the body must be {"user": ..., "password": ...} or {"token": ...}')
        value, session = self.sessions.open(principal, ends_ms)
        logger.info("HTTP login of %s from %s", principal, peer)
        response = json_response(_described(Identity(principal, "session", session, value)))
        max_age_s = max(1, (session.expires_ms - self.sessions.now_ms()) // 1000)
        response.headers["Set-Cookie"] = set_cookie(self.cookie, value, max_age_s, self.secure)
        return response

    def _logout(self, who: Identity, peer: str) -> Response:
        response = json_response({"logged_out": who.cookie is not None})
        if who.cookie is not None:
            self.sessions.close(who.cookie)
            logger.info("HTTP logout of %s from %s", who.principal, peer)
            response.headers["Set-Cookie"] = set_cookie(self.cookie, "", 0, self.secure)
        return response

    # -- the checks

    async def _password(self, user: str, password: str) -> str | None:
        """The principal, when `password` is the user's (None else, after as long)."""
        return f"User:{user}" if await password_matches(self.lookup, user, password) else None

    async def _token(self, token: str) -> tuple[str, int]:
        if self.tokens is None:
            raise TokenRefused("bearer tokens are not accepted: OAUTHBEARER is not enabled in [sasl]")
        return await self.tokens.check(token)

    async def _failed(self, request: Request, peer: str, user: str, why: str) -> Response:
        held = self._failures.admit(time.monotonic())
        if held is not None:
            logger.warning("HTTP authentication failed%s from %s: %s%s", f" for user {user[:100]!r}" if user else "",
                           peer, why, f" ({held} more failed since the last such line)" if held else "")
        await asyncio.sleep(self.delay_ms / 1000)
        return self._unauthorized(request, f"authentication failed: {why}")

    def _unauthorized(self, request: Request, why: str) -> Response:
        response = error_response(401, why)
        response.headers.update(challenge(request.headers, self.tokens is not None))
        return response


def _described(who: Identity) -> Json:
    return {"login": True, "principal": who.principal, "user": who.principal.removeprefix("User:"), "via": who.via,
            "csrf": None if who.session is None else who.session.csrf,
            "expires_ms": None if who.session is None else who.session.expires_ms}


def _json_object(body: bytes) -> dict[str, object]:
    try:
        doc: object = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
