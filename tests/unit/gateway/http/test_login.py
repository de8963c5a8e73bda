"""The HTTP port's door keeper (gateway/http/login.py, issue 39) on requests made in the test:
with login off nothing changes; with it on, Basic credentials are checked against the users'
SCRAM credentials (an unknown user against a made-up one), Bearer tokens against the JWKS,
/api/login makes a session cookie whose changes need the CSRF token, /api/logout and expiry end
it, and failures are logged without the password."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from martlet.gateway.http.auth import HttpSettings, Sessions
from martlet.gateway.http.login import Gate
from martlet.gateway.http.parser import Request
from martlet.gateway.http.response import Response
from martlet.gateway.oauth import Tokens
from martlet.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, Credential

PASSWORD = "alice-secret-1"
PEER = "127.0.0.1:50000"
CREDENTIALS = {("alice", SCRAM_SHA_512): Credential.of_password(SCRAM_SHA_512, PASSWORD, 4096),
               ("bob", SCRAM_SHA_256): Credential.of_password(SCRAM_SHA_256, "bob-pw", 4096)}


class Clock:
    def __init__(self) -> None:
        self.now_ms = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now_ms


def lookup(user: str, mechanism: str) -> Credential | None:
    return CREDENTIALS.get((user, mechanism))


LOGIN = HttpSettings(login=True)


def gate(settings: HttpSettings = LOGIN, tokens: Tokens | None = None, clock: Clock | None = None) -> Gate:
    return Gate(settings, lookup, tokens, 0, Sessions(settings.session_ms, clock or Clock()), secure=False,
                port=lambda: 9644)


def request(method: str, path: str, body: object = None, **headers: str) -> Request:
    fields = {"host": "127.0.0.1:9644"} | {name.replace("_", "-"): value for name, value in headers.items()}
    if method != "GET":
        fields["content-type"] = "application/json"
    return Request(method, path, {}, fields, b"" if body is None else json.dumps(body).encode())


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def admit(keeper: Gate, req: Request) -> Response | None:
    return asyncio.run(keeper.admit(req, PEER))


def body(response: Response | None) -> Any:
    assert response is not None
    return json.loads(response.body)


def test_with_login_off_everything_goes_through() -> None:
    keeper = gate(HttpSettings())
    for method, path in [("GET", "/api/v1/status"), ("POST", "/api/v1/topics"), ("GET", "/metrics"), ("GET", "/")]:
        assert admit(keeper, request(method, path)) is None
    assert body(admit(keeper, request("GET", "/api/session"))) == {"login": False}
    assert admit(keeper, request("POST", "/api/login", {"user": "alice", "password": PASSWORD})).status == 404


def test_without_credentials_an_api_client_is_challenged_and_a_browser_is_not() -> None:
    keeper = gate()
    refused = admit(keeper, request("GET", "/api/v1/status"))
    assert refused is not None and refused.status == 401
    assert refused.headers["WWW-Authenticate"] == 'Basic realm="martlet", charset="UTF-8"'
    from_browser = admit(keeper, request("GET", "/api/v1/status", sec_fetch_mode="cors"))
    assert from_browser is not None and from_browser.status == 401 and "WWW-Authenticate" not in from_browser.headers
    assert admit(keeper, request("GET", "/console/app.js")) is None
    assert admit(keeper, request("GET", "/metrics")).status == 401
    assert admit(gate(HttpSettings(login=True, metrics_open=True)), request("GET", "/metrics")) is None


def test_basic_credentials_are_checked_against_the_users_scram_credentials() -> None:
    keeper = gate()
    assert admit(keeper, request("GET", "/api/v1/status", authorization=basic("alice", PASSWORD))) is None
    assert admit(keeper, request("POST", "/api/v1/topics", authorization=basic("alice", PASSWORD))) is None  # no CSRF
    assert admit(keeper, request("GET", "/metrics", authorization=basic("bob", "bob-pw"))) is None  # SCRAM-SHA-256
    for user, password in [("alice", "wrong"), ("alice", ""), ("nobody", PASSWORD), ("bob", PASSWORD)]:
        refused = admit(keeper, request("GET", "/api/v1/status", authorization=basic(user, password)))
        assert refused is not None and refused.status == 401
        assert body(refused) == {"error": "authentication failed: invalid user name or password"}


def test_an_unknown_user_costs_a_password_check_too(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[int] = []
    real = Credential.matches

    def noting(self: Credential, password: str) -> bool:
        checked.append(self.iterations)
        return real(self, password)

    monkeypatch.setattr(Credential, "matches", noting)
    admit(gate(), request("GET", "/api/v1/status", authorization=basic("nobody", "x")))
    admit(gate(), request("GET", "/api/v1/status", authorization=basic("alice", "x")))
    assert checked == [4096, 4096]


def test_a_failure_is_logged_with_the_user_but_not_the_password(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "martlet.gateway.http.login"):
        admit(gate(), request("GET", "/api/v1/status", authorization=basic("alice", "hunter2-guess")))
    assert "HTTP authentication failed for user 'alice' from 127.0.0.1:50000" in caplog.text
    assert "hunter2" not in caplog.text


@pytest.fixture
def tokens(tmp_path: Path) -> tuple[Tokens, Any]:
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    entry = json.loads(RSAAlgorithm.to_jwk(signer.public_key())) | {"kid": "k1", "use": "sig"}
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [entry]}))
    return Tokens(str(tmp_path / "jwks.json")), signer


def token(key: Any, lifetime_s: int = 300, kid: str = "k1") -> str:
    now = int(time.time())
    return jwt.encode({"sub": "svc", "iat": now, "exp": now + lifetime_s}, key, algorithm="RS256", headers={"kid": kid})


def test_bearer_tokens_are_checked_as_oauthbearer_tokens(tokens: tuple[Tokens, Any]) -> None:
    checker, signer = tokens
    keeper = gate(tokens=checker)
    assert admit(keeper, request("GET", "/api/v1/status", authorization="Bearer " + token(signer))) is None
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for bad in (token(stranger), token(signer, lifetime_s=-3600), "not-a-jwt"):
        refused = admit(keeper, request("GET", "/api/v1/status", authorization="Bearer " + bad))
        assert refused is not None and refused.status == 401 and body(refused)["error"].startswith("authentication failed")
    refused = admit(keeper, request("GET", "/api/v1/status"))
    assert refused is not None and "Bearer" in refused.headers["WWW-Authenticate"]
    without = admit(gate(), request("GET", "/api/v1/status", authorization="Bearer " + token(signer)))
    assert without is not None and "OAUTHBEARER is not enabled" in body(without)["error"]


def login(keeper: Gate, user: str = "alice", password: str = PASSWORD) -> tuple[str, str]:
    """(the Cookie field, the CSRF token) of a login."""
    answer = admit(keeper, request("POST", "/api/login", {"user": user, "password": password}))
    assert answer is not None and answer.status == 200, answer
    doc = body(answer)
    assert doc["principal"] == f"User:{user}" and doc["user"] == user and doc["via"] == "session"
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("martlet-session-9644=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return cookie.split(";")[0], doc["csrf"]


def test_a_login_makes_a_session_whose_changes_need_the_csrf_token() -> None:
    keeper = gate()
    cookie, csrf = login(keeper)
    assert admit(keeper, request("GET", "/api/v1/topics", cookie=cookie)) is None
    refused = admit(keeper, request("POST", "/api/v1/topics", {"name": "t"}, cookie=cookie))
    assert refused is not None and refused.status == 403 and "x-martlet-csrf" in body(refused)["error"]
    refused = admit(keeper, request("DELETE", "/api/v1/topics/t", cookie=cookie, x_martlet_csrf="forged"))
    assert refused is not None and refused.status == 403
    assert admit(keeper, request("POST", "/api/v1/topics", {"name": "t"}, cookie=cookie, x_martlet_csrf=csrf)) is None
    session = body(admit(keeper, request("GET", "/api/session", cookie=cookie)))
    assert session["csrf"] == csrf and session["user"] == "alice" and session["expires_ms"] > 0


def test_a_wrong_password_makes_no_session() -> None:
    keeper = gate()
    answer = admit(keeper, request("POST", "/api/login", {"user": "alice", "password": "wrong"}))
    assert answer is not None and answer.status == 401 and "Set-Cookie" not in answer.headers
    assert len(keeper.sessions) == 0
    for doc in ({}, {"user": "alice"}, {"user": 1, "password": "x"}, [1]):
        assert admit(keeper, request("POST", "/api/login", doc)).status == 400


def test_logout_ends_the_session() -> None:
    keeper = gate()
    cookie, csrf = login(keeper)
    assert admit(keeper, request("POST", "/api/logout", cookie=cookie)).status == 403  # a change: CSRF first
    answer = admit(keeper, request("POST", "/api/logout", cookie=cookie, x_martlet_csrf=csrf))
    assert answer is not None and body(answer) == {"logged_out": True}
    assert "Max-Age=0" in answer.headers["Set-Cookie"]
    refused = admit(keeper, request("GET", "/api/v1/topics", cookie=cookie))
    assert refused is not None and refused.status == 401 and "session has ended" in body(refused)["error"]


def test_a_session_ends_at_its_expiry() -> None:
    clock = Clock()
    keeper = gate(HttpSettings(login=True, session_ms=5_000), clock=clock)
    cookie, _ = login(keeper)
    clock.now_ms += 4_999
    assert admit(keeper, request("GET", "/api/v1/status", cookie=cookie)) is None
    clock.now_ms += 1
    refused = admit(keeper, request("GET", "/api/v1/status", cookie=cookie))
    assert refused is not None and refused.status == 401


def test_a_token_login_lasts_no_longer_than_its_token(tokens: tuple[Tokens, Any]) -> None:
    checker, signer = tokens
    keeper = gate(tokens=checker)
    answer = admit(keeper, request("POST", "/api/login", {"token": token(signer, lifetime_s=60)}))
    doc = body(answer)
    assert doc["principal"] == "User:svc" and doc["expires_ms"] <= (time.time() + 61) * 1000


def test_the_endpoints_answer_their_method_only() -> None:
    keeper = gate()
    for method, path in [("GET", "/api/login"), ("GET", "/api/logout"), ("POST", "/api/session")]:
        answer = admit(keeper, request(method, path))
        assert answer is not None and answer.status == 405 and answer.headers["Allow"] in ("GET", "POST")
