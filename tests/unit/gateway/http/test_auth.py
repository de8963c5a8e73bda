"""The HTTP port's login decisions (gateway/http/auth.py, issue 39): which requests need a login,
reading Basic and Bearer credentials and the session cookie, the cookie's attributes, the
challenge only API clients get, the CSRF rule for changes made with the cookie, and the
session table (random values found by their hash, a fixed lifetime, a bound on their number)."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from martlet.gateway.http.auth import (
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

LOGIN = HttpSettings(login=True)


def basic(text: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(text.encode()).decode()}


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/v1/status"), ("GET", "/api/v1/topics"), ("POST", "/api/v1/topics"), ("DELETE", "/api/v1/topics/a"),
    ("GET", "/api/v1/messages"), ("GET", "/metrics"), ("HEAD", "/metrics"), ("POST", "/api/logout"),
    ("GET", "/api/session"), ("GET", "/no/such/path"), ("POST", "/console/app.js"), ("GET", "/consolex"),
])
def test_with_login_on_every_route_needs_one(method: str, path: str) -> None:
    assert needs_login(method, path, LOGIN)
    assert not needs_login(method, path, HttpSettings())  # the default: as before


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/"), ("HEAD", "/"), ("GET", "/console"), ("GET", "/console/"), ("GET", "/console/app.js"),
    ("POST", "/api/login"),
])
def test_the_console_files_and_the_login_itself_need_none(method: str, path: str) -> None:
    assert not needs_login(method, path, LOGIN)


def test_metrics_open_leaves_only_metrics_open() -> None:
    settings = HttpSettings(login=True, metrics_open=True)
    assert not needs_login("GET", "/metrics", settings)
    assert needs_login("GET", "/api/v1/status", settings)
    assert needs_login("GET", "/metrics/", settings)


def test_basic_and_bearer_credentials_read() -> None:
    assert authorization({}) is None
    assert authorization(basic("alice:s3cret:with:colons")) == Basic("alice", "s3cret:with:colons")
    assert authorization(basic("ålice:pässword")) == Basic("ålice", "pässword")
    assert authorization(basic("alice:")) == Basic("alice", "")
    assert authorization({"authorization": "basic " + base64.b64encode(b"a:b").decode()}) == Basic("a", "b")
    assert authorization({"authorization": "Bearer eyJ.a.b"}) == Bearer("eyJ.a.b")
    assert authorization({"authorization": "bearer   eyJ.a.b "}) == Bearer("eyJ.a.b")


@pytest.mark.parametrize("value", [
    "Basic", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode(), "Basic " + base64.b64encode(b":pw").decode(),
    "Basic " + base64.b64encode(b"\xff:x").decode(), "Bearer", "Bearer  ", "Digest username=a", "Negotiate abc", "",
])
def test_malformed_credentials_say_why_without_the_secret(value: str) -> None:
    shown = authorization({"authorization": value})
    assert isinstance(shown, Malformed)
    assert "pw" not in shown.why and "abc" not in shown.why


def test_the_cookie_is_httponly_strict_and_secure_with_tls() -> None:
    assert cookie_name(9644, False) == "martlet-session-9644"
    assert cookie_name(9644, True) == "__Host-martlet-session-9644"  # Secure, Path=/, no Domain: the prefix's rules
    plain = set_cookie("martlet-session-9644", "v", 3600, False)
    assert plain == "martlet-session-9644=v; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict"
    secure = set_cookie("__Host-martlet-session-9644", "v", 3600, True)
    assert secure.endswith("; Secure") and "Domain" not in secure
    assert "Max-Age=0" in set_cookie("n", "", 0, False)


def test_the_cookie_is_found_among_others() -> None:
    headers = {"cookie": "martlet-session-9645=other; martlet-session-9644=mine;theme=dark"}
    assert cookie_value(headers, "martlet-session-9644") == "mine"
    assert cookie_value(headers, "martlet-session-1") is None
    assert cookie_value({}, "martlet-session-9644") is None


def test_the_basic_challenge_goes_to_api_clients_only() -> None:
    assert challenge({}, False) == {"WWW-Authenticate": 'Basic realm="martlet", charset="UTF-8"'}
    assert challenge({}, True)["WWW-Authenticate"].endswith(', Bearer realm="martlet"')
    # A browser's fetch or navigation: no challenge, so no native prompt and no cached Basic credentials.
    assert challenge({"sec-fetch-mode": "cors"}, True) == {}
    assert challenge({"sec-fetch-mode": "navigate"}, False) == {}


def test_changes_with_the_session_cookie_need_its_csrf_token() -> None:
    session = Session("User:alice", "the-token", 10)
    assert csrf_refusal("GET", {}, session) is None
    assert csrf_refusal("HEAD", {}, session) is None
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert "needs the x-martlet-csrf header" in (csrf_refusal(method, {}, session) or "")
        assert "not this session's" in (csrf_refusal(method, {"x-martlet-csrf": "the-tokeN"}, session) or "")
        assert csrf_refusal(method, {"x-martlet-csrf": "the-token"}, session) is None


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def counting() -> Callable[[], str]:
    made = iter(range(1_000_000))
    return lambda: f"value-{next(made)}"


def test_a_session_lasts_its_lifetime_from_the_login() -> None:
    clock = Clock()
    sessions = Sessions(60_000, clock)
    value, session = sessions.open("User:alice")
    assert len(value) >= 43 and session.csrf != value and len(session.csrf) >= 43  # 32 random bytes, base64
    assert sessions.find(value) == session and session.expires_ms == clock.now_ms + 60_000
    clock.now_ms += 59_999
    assert sessions.find(value) == session  # used or not, it ends at its expiry
    clock.now_ms += 1
    assert sessions.find(value) is None
    assert len(sessions) == 0  # forgotten once found expired


def test_sessions_are_random_found_only_by_their_value_and_end_on_close() -> None:
    clock = Clock()
    sessions = Sessions(60_000, clock)
    first, _ = sessions.open("User:alice")
    second, _ = sessions.open("User:alice")
    assert first != second
    assert sessions.find(first[:-1]) is None and sessions.find("") is None
    sessions.close(first)
    assert sessions.find(first) is None and sessions.find(second) is not None
    sessions.close("never-made")


def test_a_token_login_ends_with_its_token() -> None:
    clock = Clock()
    sessions = Sessions(60_000, clock)
    _, short = sessions.open("User:svc", ends_ms=clock.now_ms + 5_000)
    _, long = sessions.open("User:svc", ends_ms=clock.now_ms + 600_000)
    assert short.expires_ms == clock.now_ms + 5_000 and long.expires_ms == clock.now_ms + 60_000


def test_the_table_is_bounded_dropping_the_expired_then_the_one_ending_first() -> None:
    clock = Clock()
    sessions = Sessions(60_000, clock, token=counting(), sessions_max=3)
    values = [sessions.open("User:a")[0]]
    clock.now_ms += 10
    values += [sessions.open("User:b")[0], sessions.open("User:c")[0]]
    values.append(sessions.open("User:d")[0])
    assert len(sessions) == 3 and sessions.find(values[0]) is None  # the oldest went
    clock.now_ms += 60_000  # b, c and d have expired now, a new one has room
    assert sessions.open("User:e")[1].principal == "User:e" and len(sessions) == 1
