"""Wires a running broker together: store, engine, handlers, server, and the HTTP port."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace

from ..engine.api import (
    Engine,
    EngineSettings,
    Hooks,
    LocalStore,
    NodeIdentity,
    RemoteMarkers,
    Store,
    StoreStats,
    cluster_member,
    hdfs_store,
    memory_use,
    store_location,
    timed_store,
)
from ..gateway import users
from ..gateway.broker_dynamic import connection_limits, topic_defaults
from ..gateway.context import Context
from ..gateway.dispatch import Dispatcher
from ..gateway.http.login import HttpSecurity
from ..gateway.http.service import HttpPort, start_http
from ..gateway.http.state import HttpState
from ..gateway.listeners import WILDCARD_HOSTS, Listener, Listeners, join_address
from ..gateway.peers import send_markers
from ..gateway.registry import apis
from ..gateway.sasl import Verifier
from ..gateway.server import Door, Server
from ..gateway.settings import GatewaySettings
from ..gateway.tls import ServerContexts, client_context
from ..gateway.udp import UdpListener
from ..protocol.sasl_client import Login
from ..protocol.scram import ITERATIONS_MIN, Credential
from .config import HTTP_DEFAULT, ServeConfig, listeners_of, open_http, parse_address, split_hdfs_url

logger = logging.getLogger(__name__)
LOCK_PATH = "serve.lock"
START_S = 600.0  # the longest the start-up store work may take (every partition and coordinator shard here opened)


class Broker:
    """One Martlet broker process: open with `start`, close with `stop`."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        os.makedirs(config.data_dir, exist_ok=True)
        local = LocalStore(config.data_dir)
        self._lock = local.lock(LOCK_PATH)
        self.store_stats = StoreStats()  # every store call timed, for /metrics and the status page
        self.store: Store = timed_store(local if config.store is None else _hdfs_store(config.store, config.engine),
                                        self.store_stats)
        # In a cluster the ZooKeeper view decides what this broker serves; else it serves everything.
        self.member = None if config.zookeeper is None else cluster_member(config.zookeeper,
                                                                           config.zookeeper_session_ms)
        # In a cluster some partitions a transaction touches are another node's: their markers go by WriteTxnMarkers.
        self.engine = Engine(self.store, config.engine, cluster=self.member,
                             hooks=Hooks(None if self.member is None else _send_markers(config), topic_defaults))
        self.server: Server | None = None
        self.address: tuple[str, int] | None = None  # the first listener's, as bound
        self.bound: tuple[str, ...] = ()  # every listener as bound, "NAME://host:port"
        self.node_id = -1  # known once started
        self.http_server: HttpPort | None = None
        self.http: HttpState | None = None  # `http.http` is the bound "host:port" once served
        self.udp: UdpListener | None = None  # the datagram front end, when [udp] listen is set

    async def start(self) -> tuple[str, int]:
        if self.member is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.member.connect)
        await self.engine.open_within(START_S)
        self.engine.start_background()
        if self.member is not None:
            self.engine.follow_cluster(self.member)
        settings = self.config.gateway
        ctx = Context.of(self.engine, settings, self.engine.cluster_id, apis())
        self.dispatcher = Dispatcher(ctx, apis())
        self.server = Server(self.dispatcher, settings.frame_bytes_max, connection_limits(ctx))
        # HTTP first, so that its address goes out with this node's registration (other brokers'
        # consoles and `martlet status` read it there); until Kafka's listener is bound, the
        # status it answers names no Kafka address.
        # What SASL listeners and the HTTP port check logins with: one user store view, one JWKS cache.
        self.verifier = Verifier(self.config.sasl, users.lookup_in(self.engine.topics), self.config.sasl.tokens())
        await self._start_http(ctx)
        listeners = listeners_of(self.config)
        contexts = ServerContexts(self.config.tls) if any(lis.protocol.tls for lis in listeners.all) else None
        await self._own_user()
        bound = [(listener, await self.server.start(listener.host, listener.port, Door(
                      listener.name, contexts if listener.protocol.tls else None,
                      self.verifier if listener.protocol.sasl else None)))
                 for listener in listeners.all]
        self.address = bound[0][1]
        ctx.settings = _advertise(settings, listeners, bound)
        self.bound = ctx.settings.bound
        if self.http is not None:
            self.http.kafka = f"{self.address[0]}:{self.address[1]}"
        if self.member is not None:
            server = self.server
            self.member.connections = lambda: server.connection_count
        endpoints = ctx.settings.advertised_listeners()
        identity = self.engine.cluster.advertise(ctx.settings.advertised_host, ctx.settings.advertised_port,
                                                 http=self._published_http(ctx.settings.advertised_host),
                                                 endpoints=endpoints)
        ctx.node_id = self.node_id = identity.node_id
        self.engine.topics.rebase_defaults()  # this node's own dynamic configs, now that it knows its id
        await self._start_udp(ctx)
        return self.address

    async def _own_user(self) -> None:
        """The brokers' own SASL user ([sasl] inter_broker_user), made if the store has none,
        as `kafka-storage format --add-scram` makes it for Kafka."""
        sasl = self.config.sasl
        if not sasl.inter_broker_user:
            return
        topics = self.engine.topics
        stored = users.credential(topics.dynamic, sasl.inter_broker_user, sasl.inter_broker_mechanism)
        if stored is None:
            made = Credential.of_password(sasl.inter_broker_mechanism, sasl.inter_broker_password, ITERATIONS_MIN)
            await users.change(topics, sasl.inter_broker_user, {sasl.inter_broker_mechanism: made})
            logger.info("SASL user %s created for calls between brokers", sasl.inter_broker_user)
        elif not await asyncio.to_thread(stored.matches, sasl.inter_broker_password):
            logger.warning("the stored %s credential of user %s does not match [sasl] inter_broker_password: "
                           "calls to other brokers will fail", sasl.inter_broker_mechanism, sasl.inter_broker_user)

    async def _start_udp(self, ctx: Context) -> None:
        if not self.config.udp_listen:
            return
        host, port = parse_address(self.config.udp_listen)
        self.udp = UdpListener(ctx, host, port, self.config.udp_rate_per_source, self.config.udp_topics)
        await self.udp.start()
        if self.http is not None:
            self.http.udp = self.udp.counters

    async def _start_http(self, ctx: Context) -> None:
        assert self.server is not None
        kind = "local" if self.config.store is None else "hdfs"
        engine = self.engine
        self.http = HttpState(ctx, lambda: memory_use(engine), "", kind, self.server, self.dispatcher.stats,
                              self.store_stats)
        if self.config.http_listen:
            if warning := open_http(self.config):
                logger.warning("%s", warning)
            host, port = parse_address(self.config.http_listen)
            security = HttpSecurity(self.config.http, self.config.tls, self.config.sasl)  # [http] tls, login
            self.http_server = await start_http(self.http, host, port, optional=self.config.http_listen == HTTP_DEFAULT,
                                                security=security, verifier=self.verifier)

    def _published_http(self, advertised_host: str) -> str | None:
        """The HTTP address other brokers are told: the bound one, except that a wildcard host
        (0.0.0.0, ::) is replaced by the host Kafka clients are told to use."""
        if self.http is None or self.http.http is None:
            return None
        host, port = parse_address(self.http.http)
        return f"{advertised_host if host in WILDCARD_HOSTS else host}:{port}"

    async def stop(self) -> None:
        if self.member is not None:
            await self._hand_over()
        if self.udp is not None:
            await self.udp.stop()
        if self.http_server is not None:
            await self.http_server.stop()
        if self.server:
            await self.server.stop()
        await self.engine.close()
        if self.member is not None:
            self.member.close()
        self._lock.release()

    async def _hand_over(self, timeout_s: float = 30.0) -> None:
        """A planned stop in a cluster: ask the admin to move every partition away and wait
        (bounded) until they are persisted and released, so nothing acknowledged is lost."""
        ownership = self.engine.ownership
        if ownership is None or not self.member or self.member.staying_peers() == 0:
            return
        self.member.leave()
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not await ownership.wait_empty(1.0):  # until handed over, or nobody is left to take it
            if self.member.staying_peers() == 0 or asyncio.get_running_loop().time() > deadline:
                break
        if ownership.held:
            logger.warning("stopping with %d units not handed over in %.0f s", len(ownership.held), timeout_s)


def _advertise(settings: GatewaySettings, listeners: Listeners,
               bound: list[tuple[Listener, tuple[str, int]]]) -> GatewaySettings:
    """Each listener's advertised address (its bound one unless configured); the inter-broker
    listener's is the node's own address (its registration in a cluster)."""
    endpoints = tuple((listener.name, *(listener.advertised or _where(listener, address))) for listener, address in bound)
    _, host, port = next(endpoint for endpoint in endpoints if endpoint[0] == listeners.inter_broker)
    return replace(settings, advertised_host=host, advertised_port=port, endpoints=endpoints,
                   bound=tuple(f"{listener.name}://{join_address(*address)}" for listener, address in bound))



def _send_markers(config: ServeConfig) -> Callable[[NodeIdentity, RemoteMarkers], Awaitable[list[str]]]:
    """Calls to other brokers go to their inter-broker listeners: with TLS if this one's is SSL."""
    listeners = listeners_of(config)
    protocol = listeners.named(listeners.inter_broker).protocol
    sasl = config.sasl
    login = Login(sasl.inter_broker_mechanism, sasl.inter_broker_user, sasl.inter_broker_password)
    return functools.partial(send_markers, tls=client_context(config.tls) if protocol.tls else None,
                             login=login if protocol.sasl else None)


def _where(listener: Listener, bound: tuple[str, int]) -> tuple[str, int]:
    """A listener not advertised: the host it was given (a name stays a name, as Kafka keeps
    it), or the bound one for an empty or wildcard host; the bound port."""
    host = listener.host if listener.host not in WILDCARD_HOSTS else bound[0]
    return host, bound[1]


def _hdfs_store(url: str, settings: EngineSettings) -> Store:
    address, root = split_hdfs_url(url)
    try:
        return hdfs_store(address, root, settings=settings)
    except Exception as error:  # hdfs-native reports an unreachable NameNode as RuntimeError
        raise OSError(f"cannot use HDFS store {url}: {error}") from None


async def run_until_signalled(broker: Broker, ready: asyncio.Event | None = None) -> None:
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        host, port = await broker.start()
    except OSError as error:  # an address in use: a clear line and exit 2, as for a bad flag
        try:
            await broker.stop()
        except Exception:
            logger.exception("stopping after a failed start")
        print(f"martlet: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    print(f"martlet listening on {host}:{port}", flush=True)  # tools and tests parse this first line
    if broker.http is not None and broker.http.http is not None:
        print(f"martlet http on {broker.http.http}", flush=True)
    if broker.udp is not None:
        print(f"martlet udp on {broker.udp.counters.listen}", flush=True)
    if len(broker.bound) > 1:
        for listener in broker.bound:  # "NAME://host:port" as bound
            name, _, address = listener.partition("://")
            print(f"martlet listener {name} on {address}", flush=True)
    logger.info("serving Kafka on %s:%d as node %d; HTTP %s; UDP %s; store %s; memory budget %d MiB", host, port,
                broker.node_id, broker.http.http if broker.http and broker.http.http else "off",
                broker.udp.counters.listen if broker.udp else "off",
                store_location(broker.store), broker.config.engine.memory_bytes >> 20)
    await stop.wait()
    logger.info("stopping: closing connections and flushing partitions")
    await broker.stop()


__all__ = ["Broker", "run_until_signalled"]
