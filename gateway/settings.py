"""Gateway settings, from the command line and the config file."""

from __future__ import annotations

from dataclasses import dataclass

from .listeners import join_address


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    # Each listener's advertised address (name, host, port), known once bound; a request that
    # came in on a listener not here (a test calling the dispatcher) is told advertised_host/port.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    bound: tuple[str, ...] = ()  # each listener as bound, "NAME://host:port" (DescribeConfigs' listeners)
    frame_bytes_max: int = 104_857_600
    auto_create_topics: bool = False
    default_partitions: int = 1
    fetch_wait_ms_max: int = 30_000
    # Kafka's max.connections, max.connections.per.ip and max.connections.per.ip.overrides
    # ("IP:count,..."), with Kafka's defaults (gateway/connection_limits.py).
    max_connections: int = 2_147_483_647
    max_connections_per_ip: int = 2_147_483_647
    max_connections_per_ip_overrides: str = ""
    # More names the HTTP port's Host field may give ([http] allowed_hosts; "*": any), besides
    # its own (gateway/http/guard.py). Here, not in ServeConfig, so the port reads it from its context.
    http_allowed_hosts: tuple[str, ...] = ()

    def advertised_listeners(self) -> tuple[str, ...]:
        """This node's listeners as advertised, "NAME://host:port" each."""
        return tuple(f"{name}://{join_address(host, port)}" for name, host, port in self.endpoints)

    def endpoint(self, listener: str) -> tuple[str, int]:
        """Where clients that came in on `listener` reach this node."""
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return self.advertised_host, self.advertised_port
