"""The HTTP port with TLS and logins (issue 39, point 4), against real brokers.

Broker A serves HTTPS with `[http] tls` and `login`, with a user made through Kafka's
AlterUserScramCredentials and OAUTHBEARER tokens checked against a JWKS file. What a client
such as curl sees: no credentials, 401 and the Basic challenge (the console's files still
load); Basic with the right password, the answer; a wrong one or an unknown user, 401 after the
failed-authentication delay, logged without the password; a Bearer JWT of the JWKS's key, the
answer, another signer's, 401; plain HTTP on the TLS port, a closed connection, so that the
`martlet` commands go on without the port as they do for any Kafka endpoint; a broker reading
another's status logs in as [sasl] inter_broker_user. Broker B leaves /metrics open for
scrapers, keeps console sessions for 3 s, and takes a replaced certificate without a restart.

In Chromium (Debian's, through Playwright): the console shows its login page, refuses a wrong
password, logs in, creates a topic through its form; a change made with the session cookie but
without its CSRF token is refused even from the console's own origin; a page of another origin,
open in the same browser, cannot create a topic with the session (no-cors fetch, form post,
CORS fetch with credentials); logging out ends the session; on B, a session that expires sends
the console back to its login page.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import http.server
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt
import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from martlet.gateway.http.brokers import PeerError, fetch_json
from tests.fixtures.browser import VIEWPORT, WAIT_MS
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.clients import ADMIN_TIMEOUT_S, confluent_create_topic, unique_topic
from tests.support.pages import page_server
from tests.support.tls import make_certs

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.integration

WAIT_S = 30.0
PASSWORD = "alice-secret-1"
BROKER_PASSWORD = "broker-secret-1"
DELAY_MS = 400  # [sasl] failed_authentication_delay_ms
SESSION_MS_B = 3000


@dataclass
class Secured:
    broker: MartletProcess
    certs: Path
    signer: Any  # the JWKS's private key
    kid: str = "k1"

    @property
    def base(self) -> str:
        return f"https://{self.broker.http}"

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs / "ca.pem"))

    def call(self, method: str, path: str, headers: dict[str, str] | None = None,
             body: object = None) -> tuple[int, dict[str, str], bytes]:
        """(status, header fields in lower case, body) of one request over TLS."""
        host, port = self.broker.http.rsplit(":", 1)
        connection = http.client.HTTPSConnection(host, int(port), context=self.tls(), timeout=WAIT_S)
        fields = dict(headers or {})
        data = None if body is None else json.dumps(body).encode()
        if method != "GET":
            fields.setdefault("Content-Type", "application/json")
        try:
            connection.request(method, path, body=data, headers=fields)
            answer = connection.getresponse()
            return answer.status, {name.lower(): value for name, value in answer.getheaders()}, answer.read()
        finally:
            connection.close()

    def token(self, key: Any = None, subject: str = "svc") -> str:
        now = int(time.time())
        return jwt.encode({"sub": subject, "iat": now, "exp": now + 300}, key or self.signer, algorithm="RS256",
                          headers={"kid": self.kid})


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def config(certs: Path, jwks: Path, http: str) -> str:
    return f"""[tls]
certificate = "{certs / 'broker.pem'}"
key = "{certs / 'broker.key'}"
ca = "{certs / 'ca.pem'}"

[http]
tls = true
login = true
{http}

[sasl]
enabled_mechanisms = ["SCRAM-SHA-512", "OAUTHBEARER"]
oauthbearer_jwks = "{jwks}"
failed_authentication_delay_ms = {DELAY_MS}
inter_broker_user = "broker"
inter_broker_password = "{BROKER_PASSWORD}"
"""


def add_user(bootstrap: str, user: str, password: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(WAIT_S)


def start(folder: Path, http: str = "") -> Secured:
    """A broker (plaintext Kafka on loopback, where the user is made) with HTTPS and logins."""
    certs = make_certs(folder / "certs")
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    entry = json.loads(RSAAlgorithm.to_jwk(signer.public_key())) | {"kid": "k1", "use": "sig"}
    (folder / "jwks.json").write_text(json.dumps({"keys": [entry]}))
    (folder / "martlet.toml").write_text(config(certs, folder / "jwks.json", http))
    broker = MartletProcess(folder / "data", ["--config", str(folder / "martlet.toml")])
    broker.start()
    try:
        add_user(broker.bootstrap, "alice", PASSWORD)
    except Exception:
        broker.kill()
        raise
    return Secured(broker, certs, signer)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    found = start(tmp_path_factory.mktemp("martlet-http-login"))
    try:
        yield found
    finally:
        found.broker.stop()


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """Broker B: /metrics open, console sessions of SESSION_MS_B."""
    found = start(tmp_path_factory.mktemp("martlet-http-short"), f"metrics_open = true\nsession_ms = {SESSION_MS_B}")
    try:
        yield found
    finally:
        found.broker.stop()


def topics(broker: MartletProcess) -> set[str]:
    return set(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=ADMIN_TIMEOUT_S).topics)


# -- what an API client sees

def test_without_credentials_the_api_and_metrics_answer_401(secured: Secured) -> None:
    for method, path in [("GET", "/api/v1/status"), ("GET", "/api/v1/topics"), ("GET", "/metrics"),
                         ("POST", "/api/v1/topics"), ("DELETE", "/api/v1/topics/x"), ("GET", "/api/session")]:
        status, headers, body = secured.call(method, path, body={"name": "x"} if method == "POST" else None)
        assert status == 401, (method, path, status)
        assert headers["www-authenticate"].startswith('Basic realm="martlet"'), headers
        assert "error" in json.loads(body)
    status, headers, body = secured.call("GET", "/")  # the console's page, which shows the login form
    assert status == 200 and b'data-testid="login-form"' in body


def test_basic_credentials_open_the_api_and_a_wrong_password_waits(secured: Secured) -> None:
    status, _, body = secured.call("GET", "/api/v1/status", basic("alice", PASSWORD))
    assert status == 200 and json.loads(body)["kafka"] == secured.broker.bootstrap
    status, _, body = secured.call("GET", "/metrics", basic("alice", PASSWORD))
    assert status == 200 and b"martlet_build_info" in body
    name = unique_topic("basic")
    status, _, _ = secured.call("POST", "/api/v1/topics", basic("alice", PASSWORD), {"name": name, "partitions": 2})
    assert status == 201 and name in topics(secured.broker)  # a change with Basic needs no CSRF token
    for user, password in [("alice", "wrong-guess-42"), ("mallory", "wrong-guess-42")]:
        began = time.monotonic()
        status, _, body = secured.call("GET", "/api/v1/status", basic(user, password))
        assert status == 401 and time.monotonic() - began >= DELAY_MS / 1000
        assert json.loads(body) == {"error": "authentication failed: invalid user name or password"}
    log = secured.broker.log_path.read_text()
    assert "HTTP authentication failed for user 'alice'" in log and "wrong-guess-42" not in log


def test_bearer_tokens_of_the_jwks_key_open_the_api(secured: Secured) -> None:
    status, _, body = secured.call("GET", "/api/v1/topics", {"Authorization": f"Bearer {secured.token()}"})
    assert status == 200 and "topics" in json.loads(body)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    status, _, body = secured.call("GET", "/api/v1/topics", {"Authorization": f"Bearer {secured.token(stranger)}"})
    assert status == 401 and "Signature verification failed" in json.loads(body)["error"]


def test_a_login_makes_a_session_cookie_whose_changes_need_the_csrf_token(secured: Secured) -> None:
    status, headers, body = secured.call("POST", "/api/login", body={"user": "alice", "password": PASSWORD})
    assert status == 200
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"__Host-martlet-session-{secured.broker.http.rsplit(':', 1)[1]}=")
    assert all(part in cookie for part in ("; Secure", "; HttpOnly", "; SameSite=Strict", "; Path=/"))
    session = {"Cookie": cookie.split(";")[0]}
    csrf = json.loads(body)["csrf"]
    assert secured.call("GET", "/api/v1/status", session)[0] == 200
    name = unique_topic("cookie")
    assert secured.call("POST", "/api/v1/topics", session, {"name": name})[0] == 403
    assert secured.call("POST", "/api/v1/topics", session | {"X-Martlet-CSRF": csrf}, {"name": name})[0] == 201
    assert secured.call("POST", "/api/logout", session | {"X-Martlet-CSRF": csrf})[0] == 200
    assert secured.call("GET", "/api/v1/status", session)[0] == 401


def test_metrics_open_leaves_metrics_to_scrapers_only(short: Secured) -> None:
    status, _, body = short.call("GET", "/metrics")
    assert status == 200 and b"martlet_build_info" in body
    assert short.call("GET", "/api/v1/status")[0] == 401


def test_plain_http_on_the_tls_port_is_closed_and_the_commands_go_without_it(secured: Secured) -> None:
    host, port = secured.broker.http.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=WAIT_S)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        connection.request("GET", "/api/v1/status")
        connection.getresponse()
    connection.close()
    name = unique_topic("cli")
    confluent_create_topic(secured.broker.bootstrap, name, 1)
    listed = subprocess.run([sys.executable, "-m", "martlet.cli", "topic", "list", "--bootstrap",
                             secured.broker.bootstrap, "--http", secured.broker.http, "--output", "json"],
                            capture_output=True, text=True, timeout=WAIT_S)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)["topics"]}
    assert name in rows and "records" not in rows[name]  # what only the HTTP port knows is left out


def _peer_status(address: str, context: ssl.SSLContext, authorization: str) -> dict[str, object]:
    with ThreadPoolExecutor(1) as pool:  # its own event loop, whatever runs in this thread
        return pool.submit(asyncio.run, fetch_json(address, "/api/v1/status", context, authorization)).result(WAIT_S)


def test_a_broker_reads_anothers_status_as_the_brokers_own_user(secured: Secured) -> None:
    """What GET /api/v1/brokers/<id>/status does for another broker of a cluster."""
    own = "Basic " + base64.b64encode(f"broker:{BROKER_PASSWORD}".encode()).decode()
    assert _peer_status(secured.broker.http, secured.tls(), own)["kafka"] == secured.broker.bootstrap
    with pytest.raises(PeerError, match="answered 401.*inter_broker_user"):
        _peer_status(secured.broker.http, secured.tls(), "")


def test_a_replaced_certificate_serves_new_connections(short: Secured, tmp_path: Path) -> None:
    host, port = short.broker.http.rsplit(":", 1)
    before = ssl.get_server_certificate((host, int(port)), timeout=WAIT_S)
    fresh = make_certs(tmp_path / "fresh")  # another CA, another key
    for name in ("broker.key", "broker.pem"):
        (short.certs / name).write_bytes((fresh / name).read_bytes())
    assert wait_until(lambda: ssl.get_server_certificate((host, int(port)), timeout=WAIT_S) != before, WAIT_S)
    assert ssl.get_server_certificate((host, int(port)), timeout=WAIT_S) == (fresh / "broker.pem").read_text().split(
        "-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"


# -- the console in Chromium


@pytest.fixture
def browser_context(chromium_browser: Browser) -> Iterator[BrowserContext]:
    """A fresh context that trusts the test CA's certificate (it is not the system's)."""
    context = chromium_browser.new_context(viewport=VIEWPORT, ignore_https_errors=True)
    context.set_default_timeout(WAIT_MS)
    try:
        yield context
    finally:
        context.close()


def log_in(page: Page, base: str, password: str = PASSWORD, picture: str = "") -> None:
    from playwright.sync_api import expect

    from tests.support.console import screenshot

    page.goto(base + "/")
    expect(page.get_by_test_id("login-form")).to_be_visible()
    expect(page.get_by_test_id("view")).to_be_hidden()
    if picture:
        screenshot(page, picture)
    page.get_by_test_id("login-user").fill("alice")
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()


SAME_ORIGIN_POST = """async ([name, csrf]) => {
  const headers = {"Content-Type": "application/json"};
  if (csrf) headers["X-Martlet-CSRF"] = csrf;
  const response = await fetch("/api/v1/topics", {method: "POST", headers, body: JSON.stringify({name})});
  return response.status;
}"""

NO_CORS_POST = """async ([url, name]) => {
  await fetch(url, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"},
                    body: JSON.stringify({name})});
  return "sent";
}"""

CORS_POST = """async ([url, name]) => {
  try {
    const response = await fetch(url, {method: "POST", credentials: "include",
                                       headers: {"Content-Type": "application/json"}, body: JSON.stringify({name})});
    return `answered ${response.status}`;
  } catch (error) {
    return `refused: ${error.name}`;
  }
}"""

FORM_POST = """([action, name]) => {
  const form = document.createElement("form");
  form.method = "POST";
  form.action = action;
  form.enctype = "text/plain";
  const input = document.createElement("input");
  input.name = `{"name": "${name}", "x": "`;
  input.value = '"}';
  form.append(input);
  document.body.append(form);
  form.submit();
}"""


def test_the_console_logs_in_creates_a_topic_holds_off_other_origins_and_logs_out(
        secured: Secured, browser_context: BrowserContext) -> None:
    from playwright.sync_api import expect

    page = browser_context.new_page()
    log_in(page, secured.base, "not-the-password", picture="login.png")
    expect(page.get_by_test_id("login-error")).to_have_text("Wrong user name or password.")
    page.get_by_test_id("login-password").fill(PASSWORD)
    page.get_by_test_id("login-submit").click()
    page.locator("#view[data-ready]").wait_for(timeout=WAIT_MS)
    expect(page.get_by_test_id("who-name")).to_have_text("alice")
    expect(page.get_by_test_id("login")).to_be_hidden()
    cookies = browser_context.cookies(secured.base)
    assert [(c["httpOnly"], c["secure"], c["sameSite"]) for c in cookies] == [(True, True, "Strict")]

    name = unique_topic("console")  # created through the console's form, with its session
    page.evaluate("() => document.getElementById('view').removeAttribute('data-ready')")
    page.evaluate("() => { location.hash = '#/topics'; }")
    page.locator("#view[data-ready]").wait_for(timeout=WAIT_MS)
    page.get_by_test_id("create-topic-name").fill(name)
    page.get_by_test_id("create-topic-submit").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("topic-name")).to_have_text(name)
    assert name in topics(secured.broker)

    unguarded = unique_topic("no-csrf")  # the console's own origin, the cookie, but no CSRF token
    assert page.evaluate(SAME_ORIGIN_POST, [unguarded, None]) == 403

    target = f"{secured.base}/api/v1/topics"
    forged = {way: unique_topic(f"forged-{way}") for way in ("no-cors", "cors", "form")}
    with page_server("127.0.0.2") as origin:
        foreign = browser_context.new_page()  # the same browser: it holds the session cookie
        foreign.goto(origin + "/")
        answers: list[int] = []
        foreign.on("response", lambda response: answers.append(response.status) if "/api/" in response.url else None)
        with foreign.expect_response(lambda response: "/api/v1/topics" in response.url, timeout=WAIT_MS):
            assert foreign.evaluate(NO_CORS_POST, [target, forged["no-cors"]]) == "sent"
        assert foreign.evaluate(CORS_POST, [target, forged["cors"]]).startswith("refused")  # no CORS answer
        with foreign.expect_response(lambda response: "/api/v1/topics" in response.url, timeout=WAIT_MS):
            foreign.evaluate(FORM_POST, [target, forged["form"]])
        assert answers and all(status in (401, 403) for status in answers), answers
    assert not (set(forged.values()) | {unguarded}) & topics(secured.broker)

    page.get_by_test_id("logout").click()
    expect(page.get_by_test_id("login-form")).to_be_visible()
    expect(page.get_by_test_id("login-notice")).to_have_text("You are logged out.")
    assert page.evaluate("async () => (await fetch('/api/v1/topics')).status") == 401


def test_an_expired_session_sends_the_console_back_to_its_login_page(short: Secured,
                                                                    browser_context: BrowserContext) -> None:
    from playwright.sync_api import expect

    page = browser_context.new_page()
    log_in(page, short.base)
    page.locator("#view[data-ready]").wait_for(timeout=WAIT_MS)
    expect(page.get_by_test_id("who-name")).to_have_text("alice")
    # The overview refreshes every 3 s: the first refresh after the session's end meets a 401.
    expect(page.get_by_test_id("login-form")).to_be_visible(timeout=SESSION_MS_B + WAIT_MS)
    expect(page.get_by_test_id("login-error")).to_contain_text("Please log in")
    expect(page.get_by_test_id("view")).to_be_hidden()
    log_in(page, short.base)  # and a new login brings the views back
    page.locator("#view[data-ready]").wait_for(timeout=WAIT_MS)
