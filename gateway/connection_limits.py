"""How many connections the Kafka listener takes: Kafka's max.connections,
max.connections.per.ip and max.connections.per.ip.overrides, set in the config file
([gateway] max_connections, ...) or at run time (`kafka-configs --alter --entity-type brokers`,
broker_dynamic.py), checked with Kafka's messages and applied as Kafka applies them
(gateway/server.py):

- a connection from an address that already has its maximum is accepted and closed at once,
  with Kafka's log line; its client sees the connection end and tries again after its backoff;
- at max.connections the listener stops accepting until a connection ends: new connections
  wait in the listen backlog, as behind Kafka's blocked acceptor;
- limits apply to new connections: lowering one closes none of those open.
However they are set, connections never take more than FILES_SHARE of the process's open-file
limit: the rest is kept for the store's files and sockets (`martlet serve` raises its soft
limit to the hard one when it starts).
"""

from __future__ import annotations

import ipaddress
import resource
from collections.abc import Mapping
from dataclasses import dataclass

UNLIMITED = 2_147_483_647  # Kafka's default for both counts (Int.MaxValue)
TOTAL, PER_IP, OVERRIDES = "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"
NAMES = (TOTAL, PER_IP, OVERRIDES)
FILES_SHARE = 0.75


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    total: int = UNLIMITED
    per_ip: int = UNLIMITED
    overrides: tuple[tuple[str, int], ...] = ()  # (IP address, its own maximum)

    def of_ip(self, ip: str) -> int:
        for address, count in self.overrides:
            if address == ip:
                return count
        return self.per_ip


def parse(values: Mapping[str, str]) -> ConnectionLimits:
    """The limits Kafka-named `values` give (names left out keep Kafka's defaults);
    ValueError with Kafka's message for a bad value."""
    limits = ConnectionLimits(
        total=_count(TOTAL, values.get(TOTAL, str(UNLIMITED))),
        per_ip=_count(PER_IP, values.get(PER_IP, str(UNLIMITED))),
        overrides=_overrides(values.get(OVERRIDES, "")))
    if limits.per_ip == 0 and not limits.overrides:
        raise ValueError(f"requirement failed: {PER_IP} can be set to zero only if {OVERRIDES} property is set.")
    return limits


def file_bound() -> int:
    """The most connections the open-file limit leaves room for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED if soft == resource.RLIM_INFINITY else max(1, int(soft * FILES_SHARE))


def raise_file_limit() -> int:
    """Raise this process's soft open-file limit to its hard one; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass  # a hard limit the kernel refuses (above fs.nr_open): keep the soft one
    return soft


def client_ip(host: str) -> str:
    """The address a peer is counted under: an IPv4 client of a dual-stack socket as IPv4."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _count(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"Invalid value {text} for configuration {name}: Not a number of type INT") from None
    if not 0 <= value <= UNLIMITED:
        raise ValueError(f"Invalid value {text} for configuration {name}: Value must be at least 0")
    return value


def _overrides(text: str) -> tuple[tuple[str, int], ...]:
    found = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, _, count = item.rpartition(":")
        try:
            found.append((client_ip(str(ipaddress.ip_address(host.strip("[]")))), _count(OVERRIDES, count)))
        except ValueError:
            raise ValueError(f"Invalid value {text} for configuration {OVERRIDES}: "
                             "expected IP:count, comma-separated (an IP address, not a host name)") from None
    return tuple(found)
