"""What the HTTP endpoints read: the broker's handler context (the engine's faces), its memory
use, and a few facts of the process. Everything is read on the event loop, where the engine's state lives."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from ...engine.api import StoreStats
from ..context import Context
from ..server import Server
from ..udp import UdpCounters
from .stats import RequestStats


def martlet_version() -> str:
    try:
        return version("martlet")
    except PackageNotFoundError:  # running from a tree that is not installed
        return "unknown"


@dataclass(frozen=True, slots=True)
class PeerAccess:
    """How this broker reads other brokers' HTTP ports (brokers.py): with TLS when its own port
    has it ([http] tls: the cluster's brokers share a config), and with the Authorization field
    of the brokers' own user ([sasl] inter_broker_user) when its port needs a login."""

    tls: ssl.SSLContext | None = None
    authorization: str = ""  # "Basic ..." or ""


@dataclass(slots=True)
class HttpState:
    ctx: Context
    memory: Callable[[], tuple[int, int]]  # (bytes of the memory pool in use, its budget)
    kafka: str  # the Kafka listener, "host:port" as bound ("" until it is: the HTTP port starts first)
    store_kind: str  # "local" or "hdfs"
    kafka_server: Server  # its connections
    requests: RequestStats  # the dispatcher's counts
    store_stats: StoreStats = field(default_factory=StoreStats)
    http: str | None = None  # this port, "host:port", once bound
    http_connections: Callable[[], tuple[int, int]] = lambda: (0, 0)  # (open, accepted) on this port
    started_s: float = field(default_factory=time.monotonic)
    version: str = field(default_factory=martlet_version)
    udp: UdpCounters | None = None  # the datagram front end's counters, when it listens
    peers: PeerAccess = field(default_factory=PeerAccess)  # how other brokers' HTTP ports are read
