"""Who may use the HTTP port ([http] login, issue 39): the decisions, with no I/O. login.py
does the checks that take time (PBKDF2, a JWKS) and answers the login endpoints.

With login off (the default) every request is served as before, guard.py's rules only. With
login on, a request shows one of:
- `Authorization: Basic` user:password, checked against the user's SCRAM-SHA-512 (else
  SCRAM-SHA-256) credential in the user store (gateway/users.py), as SASL/PLAIN checks it;
- `Authorization: Bearer <JWT>`, checked as an OAUTHBEARER token ([sasl] oauthbearer_*);
- the session cookie POST /api/login sets (the console's login page).
Served without one: the console's files (GET /, /console/...: code and styles, the same as
in the package, no data; the page asks /api/ and shows its login form when answered 401),
POST /api/login itself, and /metrics with `metrics_open`. An API client without
credentials is answered 401 with `WWW-Authenticate: Basic realm="martlet"`; a browser's fetch
(it sends `Sec-Fetch-Mode`) gets the 401 without it, so that no native password prompt
appears and no browser-cached Basic credentials come to ride along with its requests.

Sessions. The cookie holds 32 random bytes (secrets.token_urlsafe); the broker keeps, by the
SHA-256 of that value (so a lookup's timing says nothing of a valid one), the principal, a
CSRF token and the expiry: `session_ms` after the login, however busy the session (the
console refreshes every few seconds, so an idle time would never run out). At most
SESSIONS_MAX are kept; a login beyond drops the expired ones, then the one ending first.
Sessions live in the broker's memory: a restart ends them all, and each broker has its own.
The cookie is HttpOnly, SameSite=Strict, Path=/, Secure with TLS (and then named with the
`__Host-` prefix, which no other host and no plain http page may set); its name carries the
port, since browsers share cookies between the ports of a host (brokers of a local cluster).

Changes from other sites. guard.py's rules hold for every request before any of this:
a foreign Origin or Sec-Fetch-Site is refused, and a change must be JSON-typed, which another
origin can send only after a CORS preflight that the port never allows. SameSite=Strict
keeps the cookie off requests another site starts. That would suffice in today's browsers;
as a second lock, independent of how a browser classifies sites (http and https pages of the
same host, other ports), a change made with the session cookie must also carry the session's
CSRF token in `X-Martlet-CSRF` (given by /api/login and GET /api/session, read by the console
from there): a page of another origin can neither read it nor send a custom header without a
preflight. Changes with Basic or Bearer credentials need no token: a page cannot make a
browser attach those (we never send the Basic challenge to browsers).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .guard import CHANGES

LOGIN_PATH, LOGOUT_PATH, SESSION_PATH = "/api/login", "/api/logout", "/api/session"
CSRF_HEADER = "x-martlet-csrf"  # as the parser gives header names: lower case
SESSIONS_MAX = 10_000
SESSION_TOKEN_BYTES = 32
REALM = "martlet"
COOKIE_PREFIX = "martlet-session"


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """[http]'s security keys (listen and allowed_hosts live elsewhere)."""

    tls: bool = False  # serve HTTPS with [tls] certificate and key
    login: bool = False  # every route needs a login (but the console's files and the login itself)
    metrics_open: bool = False  # with login: /metrics answers without one (for scrapers)
    session_ms: int = 3_600_000  # a console login lasts this long

    def check(self) -> None:
        """ValueError naming the key that is wrong."""
        if self.session_ms <= 0:
            raise ValueError(f"[http] session_ms: expected > 0, got {self.session_ms}")


@dataclass(frozen=True, slots=True)
class Basic:
    user: str
    password: str


@dataclass(frozen=True, slots=True)
class Bearer:
    token: str


@dataclass(frozen=True, slots=True)
class Malformed:
    """An Authorization field that cannot be read; `why` holds no secret."""

    why: str


Shown = Basic | Bearer | Malformed | None  # what a request's Authorization field shows


def needs_login(method: str, path: str, settings: HttpSettings) -> bool:
    """Whether a request must show who it is before it is served."""
    if not settings.login:
        return False
    if method in ("GET", "HEAD") and (path == "/" or path == "/console" or path.startswith("/console/")):
        return False
    if path == "/metrics" and settings.metrics_open:
        return False
    return not (method == "POST" and path == LOGIN_PATH)


def authorization(headers: Mapping[str, str]) -> Shown:
    """The credentials in the Authorization field (RFC 7617 Basic, RFC 6750 Bearer), if any."""
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, rest = value.strip().partition(" ")
    rest = rest.strip()
    if scheme.lower() == "bearer":
        return Bearer(rest) if rest else Malformed("a Bearer field without a token")
    if scheme.lower() != "basic":
        return Malformed(f"the {scheme[:20]!r} scheme is not served (Basic and Bearer are)")
    try:
        text = base64.b64decode(rest, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return Malformed("a Basic field that is not base64 of UTF-8 user:password")
    user, colon, password = text.partition(":")
    if not colon or not user:
        return Malformed("a Basic field without user:password")
    return Basic(user, password)


def cookie_name(port: int | None, secure: bool) -> str:
    """The session cookie's name on this port (Secure ones with RFC 6265bis's __Host- prefix)."""
    name = COOKIE_PREFIX if port is None else f"{COOKIE_PREFIX}-{port}"
    return f"__Host-{name}" if secure else name


def cookie_value(headers: Mapping[str, str], name: str) -> str | None:
    """The value of the cookie `name` in the Cookie field (the first, if repeated)."""
    for part in headers.get("cookie", "").split(";"):
        key, equals, value = part.strip().partition("=")
        if equals and key == name:
            return value.strip().strip('"')
    return None


def set_cookie(name: str, value: str, max_age_s: int, secure: bool) -> str:
    """A Set-Cookie value; max_age_s 0 deletes the cookie."""
    return (f"{name}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def challenge(headers: Mapping[str, str], bearer: bool) -> dict[str, str]:
    """The WWW-Authenticate field of a 401: none for a browser's request (see above)."""
    if "sec-fetch-mode" in headers:
        return {}
    schemes = [f'Basic realm="{REALM}", charset="UTF-8"'] + ([f'Bearer realm="{REALM}"'] if bearer else [])
    return {"WWW-Authenticate": ", ".join(schemes)}


def csrf_refusal(method: str, headers: Mapping[str, str], session: Session) -> str | None:
    """Why a change made with the session cookie is refused (None: it may go on)."""
    if method not in CHANGES:
        return None
    given = headers.get(CSRF_HEADER)
    if given is None:
        return f"a change made with the session cookie needs the {CSRF_HEADER} header (/api/session gives it)"
    if not hmac.compare_digest(given.encode(), session.csrf.encode()):
        return f"the {CSRF_HEADER} header is not this session's"
    return None


@dataclass(frozen=True, slots=True)
class Session:
    principal: str  # "User:<name>"
    csrf: str
    expires_ms: int  # epoch ms


class Sessions:
    """The console's logins by the SHA-256 of their cookie value; clock and randomness injected."""

    def __init__(self, lifetime_ms: int, now_ms: Callable[[], int],
                 token: Callable[[], str] = lambda: secrets.token_urlsafe(SESSION_TOKEN_BYTES),
                 sessions_max: int = SESSIONS_MAX) -> None:
        assert lifetime_ms > 0 and sessions_max > 0
        self.lifetime_ms = lifetime_ms
        self.now_ms = now_ms
        self.token = token
        self.sessions_max = sessions_max
        self._by_hash: dict[bytes, Session] = {}

    def __len__(self) -> int:
        return len(self._by_hash)

    def open(self, principal: str, ends_ms: int | None = None) -> tuple[str, Session]:
        """A new session (ending after lifetime_ms, or at `ends_ms` if sooner): the cookie's value and it."""
        now = self.now_ms()
        if len(self._by_hash) >= self.sessions_max:
            self._drop_expired(now)
        while len(self._by_hash) >= self.sessions_max:
            del self._by_hash[min(self._by_hash, key=lambda key: self._by_hash[key].expires_ms)]
        expires = now + self.lifetime_ms if ends_ms is None else min(now + self.lifetime_ms, ends_ms)
        value = self.token()
        session = Session(principal, self.token(), expires)
        self._by_hash[_digest(value)] = session
        return value, session

    def find(self, value: str) -> Session | None:
        """The live session of a cookie value; an expired one is forgotten."""
        key = _digest(value)
        session = self._by_hash.get(key)
        if session is not None and session.expires_ms <= self.now_ms():
            del self._by_hash[key]
            return None
        return session

    def close(self, value: str) -> None:
        self._by_hash.pop(_digest(value), None)

    def _drop_expired(self, now: int) -> None:
        for key in [key for key, session in self._by_hash.items() if session.expires_ms <= now]:
            del self._by_hash[key]


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()
