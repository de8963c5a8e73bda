"""Which requests the HTTP port answers (issue 49). Pure functions; the server loop asks
`refusal` before routing and answers a refusal as {"error": message} with its status.

Loopback is no boundary for a browser: any page the user opens may send requests to
127.0.0.1:9644, and through DNS rebinding (a name of the attacker's, re-pointed at 127.0.0.1)
read the answers as its own origin. Without logins the port holds that off with three rules:

1. Host (every request): the Host field must name this port: `localhost`, a loopback address,
   the address it listens on (any address literal when it listens on all of them), the
   machine's or the advertised host name, or a configured name (`[http] allowed_hosts`, "*"
   for any); the port part is not compared (a tunnel or proxy may change it). A rebinding
   page sends its own name, so it is answered 421 and reads nothing. An address literal
   cannot be rebound: a browser sends one only to that address.
2. Origin (every change, and every request under /api/): a foreign `Origin` (another
   scheme://host:port than the Host field names, or "null") and `Sec-Fetch-Site: cross-site`
   or `same-site` (another port of the same host is same-site) are answered 403. The CLI,
   Prometheus and other brokers send neither; a browser sends `same-origin` or `none`.
3. Content type (every POST, PUT, PATCH, DELETE): `application/json` or 415. A page of another
   origin can send that type only after a CORS preflight, and the port allows no preflight:
   it never sends an Access-Control-Allow-* field, so the browser stops there. Form posts and
   `no-cors` fetches can only send the three "simple" types.

Anyone who can open a connection directly (other local users and processes) is not held off
by any of this: that needs the security settings, a firewall, or `--http off`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..listeners import WILDCARD_HOSTS

Refusal = tuple[int, str]  # (status, message)
CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
READS = frozenset({"GET", "HEAD"})
JSON_TYPE = "application/json"
FOREIGN_SITES = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site values of another origin's page
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})  # no DNS answer can re-point these
DEFAULT_PORTS = {"http": "80", "https": "443"}  # a behind-the-proxy console may be https
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class Hosts:
    """The host names a request's Host field may give for this port (lower case, no port)."""

    names: frozenset[str]
    any_address: bool = False  # listening on a wildcard: every address literal names this port
    anything: bool = False  # "*" configured: no Host check (a proxy in front does it)

    @classmethod
    def of(cls, listen_host: str, names: Iterable[str] = ()) -> Hosts:
        """The Hosts of a port bound to `listen_host`, also called `names` (advertised,
        configured, the machine's; "*" turns the check off; a port in a name is ignored)."""
        listen = listen_host.strip("[]").lower()
        wanted = [_name_of(name) for name in names]
        own = {name for name in wanted if name and name != "*"} | LOCAL_NAMES
        if listen not in WILDCARD_HOSTS:
            own.add(listen)
        return cls(frozenset(own), listen in WILDCARD_HOSTS, "*" in wanted)

    def allows(self, host: str) -> bool:
        """Whether `host` (as host_name gives it) names this port."""
        if self.anything or host in self.names:
            return True
        return self.any_address and _is_address(host)


def host_name(value: str) -> str | None:
    """The host of a Host field ("name", "name:port", "[v6]:port"), in lower case, without the
    port, brackets or a trailing dot; None when it is malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        return host if bracket and _is_port(rest) and _is_address(host) else None
    host, colon, port = value.partition(":")
    if colon and not _is_port(colon + port):
        return None
    return host.removesuffix(".") or None


def refusal(method: str, path: str, headers: Mapping[str, str], hosts: Hosts) -> Refusal | None:
    """None when the request may be served, else the (status, message) to answer it with.
    `headers` have lower-case names, as the parser gives them."""
    return (host_refusal(headers, hosts) or origin_refusal(method, path, headers)
            or content_type_refusal(method, headers))


def host_refusal(headers: Mapping[str, str], hosts: Hosts) -> Refusal | None:
    value = headers.get("host")
    if value is None:
        return 421, "a request must name this port in its Host field"
    host = host_name(value)
    if host is None or not hosts.allows(host):
        return 421, (f"Host {value[:100]!r} does not name this port (DNS rebinding is refused); "
                     "a name that should: [http] allowed_hosts")
    return None


def origin_refusal(method: str, path: str, headers: Mapping[str, str]) -> Refusal | None:
    """Changes and /api/ requests from another origin's page (rule 2)."""
    if method in READS and not path.startswith("/api/"):
        return None
    site = headers.get("sec-fetch-site", "").lower()
    if site in FOREIGN_SITES:
        return 403, f"requests from another site's page are refused (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if origin is not None and not same_origin(origin, headers.get("host", "")):
        return 403, f"requests from another origin's page are refused (Origin: {origin[:100]!r})"
    return None


def content_type_refusal(method: str, headers: Mapping[str, str]) -> Refusal | None:
    """A change whose body is not declared JSON (rule 3)."""
    if method not in CHANGES:
        return None
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != JSON_TYPE:
        return 415, f"a {method} must have Content-Type: {JSON_TYPE}"
    return None


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` ("scheme://host[:port]") is the one a page served by this Host has."""
    scheme, sep, authority = origin.strip().lower().partition("://")
    if not sep or scheme not in DEFAULT_PORTS:
        return False  # "null" (a sandboxed frame, a file), or some other scheme
    default = f":{DEFAULT_PORTS[scheme]}"
    return authority.removesuffix(default) == host.strip().lower().removesuffix(default)


class LogThrottle:
    """At most one log line per `interval_s` (an attacker's page may send many requests): `admit`
    says whether to log now and how many were held back since the last line."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next_s = float("-inf")
        self._held = 0

    def admit(self, now_s: float) -> int | None:
        """None: do not log this one; else log it, saying the count of those held back."""
        if now_s < self._next_s:
            self._held += 1
            return None
        held, self._held, self._next_s = self._held, 0, now_s + self.interval_s
        return held


def _name_of(name: str) -> str | None:
    """A configured name as host_name gives it; also a bare IPv6 address, as a bound one is given."""
    if name == "*" or _is_address(name.strip().lower()):
        return name.strip().lower()
    return host_name(name)


def _is_port(text: str) -> bool:
    """"" or ":" and digits, perhaps none (RFC 9110 4.2.1: port = *DIGIT)."""
    return not text or (text.startswith(":") and set(text[1:]) <= _DIGITS)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
