"""Web pages of other origins against the HTTP port (issue 49, point 3), in real headless Chromium.

A page served by a tiny http.server on another local port tries what any web page the user
opens can: a simple POST (no-cors, text/plain) and a preflighted one (application/json) that
would create a topic, a DELETE, an HTML form post carrying JSON as text/plain, an image and a
fetch of /api/v1/messages. The page runs at 127.0.0.1:OTHER (the same site as the broker's
127.0.0.1: Sec-Fetch-Site same-site) and at 127.0.0.2:OTHER (another site). The broker,
asked through Kafka, shows that nothing was created or deleted; what the broker answered
(seen by Playwright, not by the page) shows that nothing was read. A DNS-rebinding shaped
request (a Host naming the attacker's domain, which a browser cannot forge) goes from Python.
The same requests from the console's own origin work, so the refusals are not an accident.
"""

from __future__ import annotations

import http.client
import http.server
import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.browser import VIEWPORT, WAIT_MS
from tests.fixtures.martlet import MartletProcess
from tests.integration.clients import ADMIN_TIMEOUT_S, confluent_create_topic, unique_topic
from tests.support.pages import page_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

pytestmark = pytest.mark.integration

WAIT_S = 10.0
SECRET = f"secret-{uuid.uuid4()}"  # the one record's value: no answer a foreign page gets may hold it
@pytest.fixture(scope="module", params=["127.0.0.1", "127.0.0.2"], ids=["same-site", "cross-site"])
def other_origin(request: pytest.FixtureRequest) -> Iterator[str]:
    with page_server(request.param) as origin:
        yield origin


@pytest.fixture(scope="module")
def secret_topic(martlet: MartletProcess) -> str:
    topic = unique_topic("origins-secret")
    confluent_create_topic(martlet.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": martlet.bootstrap, "acks": "all"})
    producer.produce(topic, key=b"k", value=SECRET.encode(), partition=0)
    assert producer.flush(WAIT_S) == 0
    return topic


@pytest.fixture
def page_at(chromium_browser: Browser) -> Iterator[Any]:
    """Opens a page at an origin, in a fresh context closed after the test."""
    contexts = []

    def open_at(origin: str) -> Page:
        context = chromium_browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        page = context.new_page()
        page.goto(origin + "/")
        return page

    try:
        yield open_at
    finally:
        for context in contexts:
            context.close()


def topics(martlet: MartletProcess) -> set[str]:
    return set(AdminClient({"bootstrap.servers": martlet.bootstrap}).list_topics(timeout=ADMIN_TIMEOUT_S).topics)


def answered(page: Page, path: str, script: str, *args: object) -> tuple[object, Response]:
    """What `script` (called with `args`) returns in the page, and the broker's answer to the
    page's request for `path`, as Playwright saw it on the network (the page may not)."""
    with page.expect_response(lambda response: path in response.url, timeout=WAIT_MS) as seen:
        result = page.evaluate(script, list(args))
    return result, seen.value


def assert_refused(response: Response, opaque: bool = False) -> None:
    """The broker answered 403 and allowed no other origin; the body too when the browser keeps
    it (it keeps none of an opaque answer, the one a no-cors fetch gets)."""
    assert response.status == 403, (response.url, response.status)
    assert not [name for name in response.headers if name.lower().startswith("access-control-")], response.headers
    if not opaque:
        assert SECRET not in response.text() and "error" in response.json()


def records_out(martlet: MartletProcess, topic: str) -> float:
    """The broker's count of records it handed to readers of `topic` (its message reads too)."""
    with urllib.request.urlopen(f"http://{martlet.http}/metrics", timeout=WAIT_S) as answer:
        text = answer.read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "martlet_topic_records_out_total" and sample.labels == {"topic": topic})


NO_CORS_POST = """async ([url, body]) => {
  const response = await fetch(url, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
  return {type: response.type, status: response.status, text: await response.text()};
}"""

CORS_REQUEST = """async ([url, method, body]) => {
  try {
    const response = await fetch(url, {method, headers: {"Content-Type": "application/json"}, body});
    return `answered ${response.status}: ${await response.text()}`;
  } catch (error) {
    return `refused: ${error.name}`;
  }
}"""

FORM_POST = """([action, name]) => {
  const form = document.createElement("form");
  form.method = "POST";
  form.action = action;
  form.enctype = "text/plain";  // the body is name=value: here {"name": ..., "x": "="}
  const input = document.createElement("input");
  input.name = `{"name": "${name}", "partitions": 1, "x": "`;
  input.value = '"}';
  form.append(input);
  document.body.append(form);
  form.submit();
}"""

IMAGE = """([src]) => new Promise(resolve => {
  const image = new Image();
  image.onload = () => resolve("loaded");
  image.onerror = () => resolve("failed");
  image.src = src;
})"""

NO_CORS_GET = """async ([url]) => {
  const response = await fetch(url, {mode: "no-cors"});
  return {type: response.type, status: response.status, text: await response.text()};
}"""


def test_a_simple_post_creates_no_topic(martlet: MartletProcess, other_origin: str, page_at: Any) -> None:
    topic = unique_topic("origins-simple")
    page = page_at(other_origin)
    result, response = answered(page, "/api/v1/topics", NO_CORS_POST, f"http://{martlet.http}/api/v1/topics",
                                json.dumps({"name": topic, "partitions": 1}))
    assert result == {"type": "opaque", "status": 0, "text": ""}
    assert_refused(response, opaque=True)
    assert topic not in topics(martlet)


def test_a_preflighted_post_creates_no_topic(martlet: MartletProcess, other_origin: str, page_at: Any) -> None:
    topic = unique_topic("origins-preflight")
    page = page_at(other_origin)
    result = page.evaluate(CORS_REQUEST, [f"http://{martlet.http}/api/v1/topics", "POST",
                                          json.dumps({"name": topic, "partitions": 1})])
    assert result == "refused: TypeError"  # the preflight gets no Access-Control-Allow-Origin
    assert topic not in topics(martlet)


def test_a_delete_deletes_nothing(martlet: MartletProcess, other_origin: str, page_at: Any) -> None:
    topic = unique_topic("origins-victim")
    confluent_create_topic(martlet.bootstrap, topic, 1)
    page = page_at(other_origin)
    assert page.evaluate(CORS_REQUEST, [f"http://{martlet.http}/api/v1/topics/{topic}", "DELETE", None]) == (
        "refused: TypeError")
    assert topic in topics(martlet)


def test_a_form_post_creates_no_topic(martlet: MartletProcess, other_origin: str, page_at: Any) -> None:
    topic = unique_topic("origins-form")
    page = page_at(other_origin)
    _, response = answered(page, "/api/v1/topics", FORM_POST, f"http://{martlet.http}/api/v1/topics", topic)
    assert_refused(response)
    assert topic not in topics(martlet)


def test_messages_are_not_read_by_an_image_or_a_fetch(martlet: MartletProcess, other_origin: str, page_at: Any,
                                                      secret_topic: str) -> None:
    """Chromium blocks a JSON answer to an image (ORB) and gives a no-cors fetch an opaque one, so
    the page could not read the messages anyway; the broker's count of records read shows that it
    did not even read them, and the same count moves for a read from the port's own origin."""
    url = f"http://{martlet.http}/api/v1/messages?topic={secret_topic}&partition=0&offset=0"
    before = records_out(martlet, secret_topic)
    page = page_at(other_origin)
    assert page.evaluate(IMAGE, [url]) == "failed"
    result, response = answered(page, "/api/v1/messages", NO_CORS_GET, url)
    assert result == {"type": "opaque", "status": 0, "text": ""}
    assert_refused(response, opaque=True)
    assert records_out(martlet, secret_topic) == before
    with urllib.request.urlopen(url, timeout=WAIT_S) as answer:
        assert SECRET in answer.read().decode()
    assert records_out(martlet, secret_topic) == before + 1


def test_the_same_requests_from_the_consoles_own_origin_work(martlet: MartletProcess, page_at: Any,
                                                             secret_topic: str) -> None:
    topic = unique_topic("origins-own")
    page = page_at(f"http://{martlet.http}")
    base = f"http://{martlet.http}/api/v1"
    created = page.evaluate(CORS_REQUEST, [f"{base}/topics", "POST", json.dumps({"name": topic, "partitions": 1})])
    assert str(created).startswith("answered 201"), created
    assert topic in topics(martlet)
    messages = page.evaluate(CORS_REQUEST, [f"{base}/messages?topic={secret_topic}&partition=0&offset=0", "GET", None])
    assert str(messages).startswith("answered 200") and SECRET in str(messages), messages
    deleted = page.evaluate(CORS_REQUEST, [f"{base}/topics/{topic}", "DELETE", None])
    assert deleted == f"answered 200: {json.dumps({'deleted': topic})}"


# -- what a browser cannot send, from Python

def request(martlet: MartletProcess, method: str, path: str, headers: dict[str, str], body: bytes | None = None,
            ) -> tuple[int, dict[str, str], bytes]:
    """(status, header fields, body) of one request whose header fields are exactly these."""
    host, port = martlet.http.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=WAIT_S)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in (headers | ({"Content-Length": str(len(body))} if body is not None else {})).items():
            connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def test_a_dns_rebinding_host_reads_and_changes_nothing(martlet: MartletProcess, secret_topic: str) -> None:
    port = martlet.http.rsplit(":", 1)[1]
    rebound = {"Host": f"attacker.example:{port}"}  # a page of attacker.example, its name re-pointed at 127.0.0.1
    for path in [f"/api/v1/messages?topic={secret_topic}&partition=0&offset=0", "/api/v1/status", "/", "/metrics"]:
        status, _, body = request(martlet, "GET", path, rebound)
        assert status == 421 and SECRET.encode() not in body and json.loads(body)["error"], (path, body)
    topic = unique_topic("origins-rebound")
    status, _, _ = request(martlet, "POST", "/api/v1/topics", rebound | {"Content-Type": "application/json"},
                           json.dumps({"name": topic, "partitions": 1}).encode())
    assert status == 421 and topic not in topics(martlet)
    status, _, body = request(martlet, "GET", f"/api/v1/messages?topic={secret_topic}&partition=0&offset=0",
                              {"Host": martlet.http})
    assert status == 200 and SECRET.encode() in body  # the same request naming the port is answered


def test_a_preflight_gets_no_cors_headers(martlet: MartletProcess) -> None:
    status, headers, _ = request(martlet, "OPTIONS", "/api/v1/topics", {
        "Host": martlet.http, "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert status == 403 and not [name for name in headers if name.lower().startswith("access-control-")], headers
