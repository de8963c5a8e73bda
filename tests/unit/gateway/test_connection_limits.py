"""Kafka's connection limits (gateway/connection_limits.py): parsed and checked with Kafka's
messages, layered from the config file and the dynamic configs, and applied by the server to
the connections it accepts next; what connections hold for data is counted."""

import asyncio
import socket

import pytest

from martlet.engine.api import errors
from martlet.gateway import connection_limits as limits
from martlet.gateway.broker_dynamic import SET, _limits, changed
from martlet.gateway.server import Server
from martlet.gateway.settings import GatewaySettings

WAIT_S = 10.0


def test_kafkas_defaults_and_overrides_by_address() -> None:
    assert limits.parse({}) == limits.ConnectionLimits(limits.UNLIMITED, limits.UNLIMITED, ())
    parsed = limits.parse({limits.PER_IP: "5", limits.OVERRIDES: "10.0.0.1:50, ::ffff:10.0.0.2:0,[::1]:7"})
    assert (parsed.of_ip("10.0.0.1"), parsed.of_ip("10.0.0.2"), parsed.of_ip("::1"), parsed.of_ip("10.0.0.3")) == (
        50, 0, 7, 5)
    assert limits.client_ip("::ffff:127.0.0.1") == "127.0.0.1"  # an IPv4 client of a dual-stack socket


@pytest.mark.parametrize(("values", "message"), [
    ({limits.TOTAL: "abc"}, "Invalid value abc for configuration max.connections: Not a number of type INT"),
    ({limits.PER_IP: "-1"}, "Invalid value -1 for configuration max.connections.per.ip: Value must be at least 0"),
    ({limits.PER_IP: "0"}, "requirement failed: max.connections.per.ip can be set to zero only if "
                           "max.connections.per.ip.overrides property is set."),
    ({limits.OVERRIDES: "127.0.0.1:x"}, "Invalid value 127.0.0.1:x for configuration max.connections.per.ip.overrides"),
    ({limits.OVERRIDES: "broker.example:3"}, "not a host name"),
])
def test_bad_values_get_kafkas_messages(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        limits.parse(values)
    name, value = next(iter(values.items()))
    with pytest.raises(errors.InvalidConfig):  # IncrementalAlterConfigs: INVALID_REQUEST
        changed({}, [(name, SET, value)], read_only=())


def test_a_nodes_dynamic_value_wins_over_the_clusters_over_the_config_file() -> None:
    settings = GatewaySettings(max_connections=100, max_connections_per_ip=10)
    dynamic = {"": {limits.TOTAL: "50", limits.PER_IP: "4"}, "1": {limits.PER_IP: "2"}}
    assert _limits(settings, dynamic, 1) == limits.ConnectionLimits(50, 2, ())
    assert _limits(settings, dynamic, 2) == limits.ConnectionLimits(50, 4, ())
    assert _limits(settings, {}, 1) == limits.ConnectionLimits(100, 10, ())


class Silent:
    """A dispatcher that never answers: these tests only open connections."""

    async def handle(self, frame: bytearray, peer: object = None) -> None:
        return None


async def _served_count(server: Server, count: int, accepted: int | None = None) -> None:
    async def wait() -> None:
        while server.connection_count != count or accepted not in (None, server.accepted):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), WAIT_S)


def test_per_ip_refusals_and_the_total_limit_apply_to_new_connections() -> None:
    async def main() -> None:
        current = [limits.ConnectionLimits(per_ip=2)]
        server = Server(Silent(), 1 << 20, lambda: current[0])  # type: ignore[arg-type]
        host, port = await server.start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        clients = [await loop.run_in_executor(None, socket.create_connection, (host, port)) for _ in range(3)]
        await _served_count(server, 2)
        assert server.rejected == 1 and server.accepted == 2
        current[0] = limits.ConnectionLimits(total=2)  # raised per address, but two in all
        clients.append(await loop.run_in_executor(None, socket.create_connection, (host, port)))
        await asyncio.sleep(0.2)  # (a bounded look: the third stays in the backlog)
        assert server.connection_count == 2 and server.accepted == 2
        clients.pop(0).close()  # a place is freed: the waiting one is taken
        await _served_count(server, 2, accepted=3)
        for client in clients:
            client.close()
        await server.stop()

    asyncio.run(main())


def test_idle_connections_hold_no_read_buffer_and_a_frame_on_its_way_is_counted() -> None:
    async def main() -> None:
        server = Server(Silent(), 1 << 20)  # type: ignore[arg-type]
        host, port = await server.start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        idle = [await loop.run_in_executor(None, socket.create_connection, (host, port)) for _ in range(20)]
        await _served_count(server, 20)
        assert server.buffer_bytes() == (len(server.chunk), 0)  # only the shared chunk
        idle[0].sendall((100_000).to_bytes(4, "big") + b"x" * 10)  # a frame of 100 kB has begun

        async def counted() -> None:
            while server.buffer_bytes()[0] != len(server.chunk) + 100_000:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(counted(), WAIT_S)
        for client in idle:
            client.close()
        await server.stop()

    asyncio.run(main())
