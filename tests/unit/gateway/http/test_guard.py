"""Which requests the HTTP port refuses (gateway/http/guard.py, issue 49): a Host that names
another machine (DNS rebinding), another origin's page, a change not declared JSON."""

from __future__ import annotations

import pytest

from martlet.gateway.http.guard import Hosts, LogThrottle, host_name, refusal, same_origin

LOOPBACK = Hosts.of("127.0.0.1", ["127.0.0.1"])
JSON = {"content-type": "application/json"}


def headers(host: str = "127.0.0.1:9644", **more: str) -> dict[str, str]:
    return {"host": host} | {name.replace("_", "-"): value for name, value in more.items()}


@pytest.mark.parametrize(("value", "name"), [
    ("127.0.0.1:9644", "127.0.0.1"), ("LocalHost", "localhost"), ("localhost.:9644", "localhost"),
    ("[::1]:9644", "::1"), ("[::1]", "::1"), ("broker.example:", "broker.example"), (" a.b ", "a.b"),
    ("[::1", None), ("[evil.example]:80", None), ("[::1]x", None), ("a:b", None), ("::1", None), ("", None),
    (":9644", None),
])
def test_host_names(value: str, name: str | None) -> None:
    assert host_name(value) == name


@pytest.mark.parametrize("host", ["127.0.0.1:9644", "127.0.0.1", "localhost:9644", "localhost", "[::1]:9644",
                                  "localhost:8080"])  # a tunnel may change the port
def test_a_loopback_port_answers_its_own_names(host: str) -> None:
    assert refusal("GET", "/api/v1/messages", headers(host), LOOPBACK) is None


@pytest.mark.parametrize("host", ["attacker.example:9644", "attacker.example", "127.0.0.1.attacker.example:9644",
                                  "localhost.attacker.example", "10.0.0.5:9644", "[::1", "127.0.0.1:x", ""])
def test_a_loopback_port_refuses_other_hosts_with_421(host: str) -> None:
    for method, path in [("GET", "/api/v1/messages"), ("GET", "/"), ("GET", "/metrics"), ("POST", "/api/v1/topics")]:
        refused = refusal(method, path, headers(host) | JSON, LOOPBACK)
        assert refused is not None and refused[0] == 421, (method, path, refused)


def test_a_request_without_host_is_refused() -> None:
    assert refusal("GET", "/", {}, LOOPBACK) == (421, "a request must name this port in its Host field")


def test_advertised_machine_and_configured_names() -> None:
    hosts = Hosts.of("127.0.0.1", ["myhost", "Broker1.Example:9092", "proxy.example", ""])
    for host in ["myhost:9644", "broker1.example:9644", "PROXY.EXAMPLE", "127.0.0.1:9644"]:
        assert hosts.allows(host_name(host) or ""), host
    assert not hosts.allows("other.example")
    assert Hosts.of("127.0.0.1", ["*"]).allows("anything.example")


def test_a_wildcard_listen_address_takes_any_address_literal_but_not_other_names() -> None:
    for listen in ["0.0.0.0", "::", "[::]"]:
        hosts = Hosts.of(listen, ["myhost"])
        assert all(hosts.allows(name) for name in ["10.1.2.3", "2001:db8::7", "myhost", "localhost", "::1"]), listen
        assert not hosts.allows("attacker.example") and not hosts.allows("0.0.0.0.attacker.example")


def test_a_specific_address_takes_only_itself_and_loopback() -> None:
    hosts = Hosts.of("10.0.0.5", ["2001:db8::5"])  # a bound IPv6 address comes without brackets
    assert hosts.allows("10.0.0.5") and hosts.allows("2001:db8::5") and hosts.allows("127.0.0.1")
    assert not hosts.allows("10.0.0.6")


@pytest.mark.parametrize("extra", [{}, {"sec_fetch_site": "same-origin"}, {"sec_fetch_site": "none"},
                                   {"origin": "http://127.0.0.1:9644"}, {"origin": "HTTP://127.0.0.1:9644"}])
def test_changes_from_the_port_itself_or_a_non_browser_client_pass(extra: dict[str, str]) -> None:
    for method in ["POST", "PUT", "PATCH", "DELETE"]:
        assert refusal(method, "/api/v1/topics", headers(**extra) | JSON, LOOPBACK) is None
    assert refusal("POST", "/api/v1/topics", headers(**extra) | {"content-type": "Application/JSON; charset=utf-8"},
                   LOOPBACK) is None


@pytest.mark.parametrize("extra", [
    {"origin": "http://evil.example"}, {"origin": "http://127.0.0.1:8000"}, {"origin": "http://localhost:9644"},
    {"origin": "null"}, {"origin": "file://"}, {"origin": "http://127.0.0.1:9644.evil.example"},
    {"sec_fetch_site": "cross-site"}, {"sec_fetch_site": "same-site"},  # another port of the same host
    {"sec_fetch_site": "same-origin", "origin": "http://evil.example"},
])
def test_another_origins_page_is_refused_with_403(extra: dict[str, str]) -> None:
    for method, path in [("POST", "/api/v1/topics"), ("DELETE", "/api/v1/topics/t"), ("GET", "/api/v1/messages"),
                         ("HEAD", "/api/v1/status"), ("OPTIONS", "/api/v1/topics"), ("POST", "/")]:
        refused = refusal(method, path, headers(**extra) | JSON, LOOPBACK)
        assert refused is not None and refused[0] == 403, (method, path, refused)


def test_the_console_files_and_metrics_take_any_origin_with_a_good_host() -> None:
    for path in ["/", "/console/app.js", "/metrics"]:
        assert refusal("GET", path, headers(sec_fetch_site="cross-site", origin="http://evil.example"), LOOPBACK) is None


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonx", "text/json"])
def test_a_change_not_declared_json_is_refused_with_415(content_type: str | None) -> None:
    extra = {} if content_type is None else {"content-type": content_type}
    for method in ["POST", "PUT", "PATCH", "DELETE"]:
        refused = refusal(method, "/api/v1/topics", headers() | extra, LOOPBACK)
        assert refused is not None and refused[0] == 415, (method, refused)
    assert refusal("GET", "/api/v1/topics", headers() | extra, LOOPBACK) is None


def test_an_options_preflight_of_the_port_itself_goes_on_to_routing() -> None:
    """No CORS: a same-origin page never preflights, and the router answers OPTIONS 405."""
    assert refusal("OPTIONS", "/api/v1/topics", headers(), LOOPBACK) is None


@pytest.mark.parametrize(("origin", "host", "same"), [
    ("http://127.0.0.1:9644", "127.0.0.1:9644", True), ("http://[::1]:9644", "[::1]:9644", True),
    ("https://martlet.example", "martlet.example", True),  # behind a TLS proxy that passes the Host on
    ("http://martlet.example:80", "martlet.example", True), ("https://martlet.example", "martlet.example:443", True),
    ("http://martlet.example", "martlet.example:8080", False), ("ftp://127.0.0.1:9644", "127.0.0.1:9644", False),
    ("127.0.0.1:9644", "127.0.0.1:9644", False), ("null", "127.0.0.1:9644", False),
])
def test_same_origin(origin: str, host: str, same: bool) -> None:
    assert same_origin(origin, host) is same


def test_the_log_throttle_lets_one_line_through_per_interval_and_counts_the_rest() -> None:
    throttle = LogThrottle(10.0)
    assert throttle.admit(100.0) == 0
    assert [throttle.admit(now) for now in (100.5, 101.0, 109.9)] == [None, None, None]
    assert throttle.admit(110.0) == 3
    assert throttle.admit(115.0) is None and throttle.admit(200.0) == 1
