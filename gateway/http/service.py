"""The HTTP port put together: its routes, its security (TLS, logins) and binding it as the
config says."""

from __future__ import annotations

import base64
import logging
import socket
import time

from .. import users
from ..sasl import Verifier
from ..tls import ServerContexts, client_context
from . import api, groups, messages, metrics, static
from .auth import Sessions
from .guard import Hosts
from .login import Gate, HttpSecurity
from .routes import Router
from .server import HttpServer
from .state import HttpState, PeerAccess

logger = logging.getLogger(__name__)


def router_for(state: HttpState, history: groups.LagHistory) -> Router:
    router = Router()
    api.add_routes(router, state)
    groups.add_routes(router, state, history)
    messages.add_routes(router, state)
    metrics.add_routes(router, state)
    static.add_routes(router)
    return router


class OwnHosts:
    """The names a request's Host may give for this port (guard.py): besides the listen address,
    localhost and loopback, the address bound, this machine's host name, the host Kafka clients
    are told (known once Kafka's listener is bound, so read per request; with a wildcard listen
    address it is also the HTTP address this broker publishes) and [http] allowed_hosts."""

    def __init__(self, state: HttpState, listen_host: str) -> None:
        self.state = state
        self.listen_host = listen_host
        self.machine = socket.gethostname()
        self._made: tuple[tuple[str, ...], Hosts] | None = None

    def __call__(self) -> Hosts:
        settings = self.state.ctx.settings
        bound = (self.state.http or "").rpartition(":")[0]  # as bound: "localhost" may have become 127.0.0.1
        names = (self.machine, bound, settings.advertised_host, *settings.http_allowed_hosts)
        if self._made is None or self._made[0] != names:
            self._made = names, Hosts.of(self.listen_host, names)
        return self._made[1]


class HttpPort:
    """The served port and what runs with it (the group lag sampler)."""

    def __init__(self, server: HttpServer, history: groups.LagHistory) -> None:
        self.server = server
        self.history = history

    async def stop(self) -> None:
        await self.history.stop()
        await self.server.stop()


def gate_for(state: HttpState, security: HttpSecurity, verifier: Verifier) -> Gate:
    """Logins checked as the SASL listeners check them: the user store, [sasl]'s OAUTHBEARER tokens."""

    def port() -> int | None:
        bound = (state.http or "").rpartition(":")[2]
        return int(bound) if bound.isdigit() else None

    settings = security.http
    sessions = Sessions(settings.session_ms, lambda: int(time.time() * 1000))
    return Gate(settings, verifier.lookup, verifier.tokens if settings.login else None,
                verifier.settings.failed_authentication_delay_ms, sessions, settings.tls, port)


def peer_access(security: HttpSecurity) -> PeerAccess:
    """How this broker reads other brokers' ports: as its own is served (state.PeerAccess)."""
    sasl = security.sasl
    basic = base64.b64encode(f"{sasl.inter_broker_user}:{sasl.inter_broker_password}".encode()).decode()
    return PeerAccess(client_context(security.tls) if security.http.tls else None,
                      f"Basic {basic}" if security.http.login and sasl.inter_broker_user else "")


async def start_http(state: HttpState, host: str, port: int, *, optional: bool,
                     security: HttpSecurity | None = None, verifier: Verifier | None = None) -> HttpPort | None:
    """Serve the HTTP port at host:port, its logins checked by `verifier` (the SASL listeners'
    one; by default one of its own). When it cannot be bound: None with a warning if it is
    `optional` (the default address, which another broker on this machine may have), else
    OSError with the reason."""
    security = security or HttpSecurity()
    verifier = verifier or Verifier(security.sasl, users.lookup_in(state.ctx.topics), security.sasl.tokens())
    history = groups.LagHistory(state)
    state.peers = peer_access(security)
    server = HttpServer(router_for(state, history), hosts=OwnHosts(state, host), gate=gate_for(state, security, verifier),
                        tls=ServerContexts(security.tls) if security.http.tls else None)
    try:
        bound = await server.start(host, port)
    except OSError as error:
        if not optional:
            raise OSError(f"cannot serve HTTP on {host}:{port}: {error.strerror or error}") from None
        logger.warning("running without the HTTP port: the default %s:%d is taken (%s); set [http] listen or --http",
                       host, port, error.strerror or error)
        return None
    state.http = f"{bound[0]}:{bound[1]}"
    if security.http.tls or security.http.login:
        logger.info("HTTP port %s: %s, %s", state.http, "TLS" if security.http.tls else "plaintext",
                    "no login" if not security.http.login else
                    "login required" + (" (but for /metrics)" if security.http.metrics_open else ""))
    state.http_connections = lambda: (server.connections, server.accepted)
    history.start()
    return HttpPort(server, history)
