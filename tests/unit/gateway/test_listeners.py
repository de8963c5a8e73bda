"""Listener settings read as Kafka reads listeners, listener.security.protocol.map,
advertised.listeners and inter.broker.listener.name (gateway/listeners.py)."""

import pytest

from martlet.gateway.listeners import Listener, SecurityProtocol, parse_listeners


def test_names_protocols_and_advertised_addresses():
    listeners = parse_listeners(["CLIENT://0.0.0.0:9093", "local://127.0.0.1:9092", "TLS://[::1]:9094"],
                                "CLIENT:SASL_SSL, LOCAL:PLAINTEXT,TLS:ssl",
                                ["CLIENT://broker1.example.com:19093"], inter_broker="LOCAL")
    assert listeners.all == (
        Listener("CLIENT", SecurityProtocol.SASL_SSL, "0.0.0.0", 9093, ("broker1.example.com", 19093)),
        Listener("LOCAL", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092),
        Listener("TLS", SecurityProtocol.SSL, "::1", 9094),
    )
    assert listeners.inter_broker == "LOCAL" and listeners.named("LOCAL") is listeners.all[1]
    assert [(lis.protocol.tls, lis.protocol.sasl) for lis in listeners.all] == [(True, True), (False, False),
                                                                               (True, False)]
    assert str(listeners.all[2]) == "TLS://[::1]:9094"


def test_without_a_map_a_name_is_its_protocol_and_the_first_listener_talks_to_brokers():
    listeners = parse_listeners(["SSL://:9093", "PLAINTEXT://localhost:0", "SASL_PLAINTEXT://localhost:0"],
                                None)
    assert listeners.inter_broker == "SSL"
    assert [(lis.name, lis.protocol, lis.host) for lis in listeners.all] == [
        ("SSL", SecurityProtocol.SSL, ""), ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "localhost"),
        ("SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT, "localhost")]


def test_a_table_maps_names_too():
    listeners = parse_listeners(["A://h:1"], {"a": "sasl_ssl"})
    assert listeners.all[0].protocol is SecurityProtocol.SASL_SSL


@pytest.mark.parametrize(("listeners", "protocol_map", "advertised", "inter_broker", "message"), [
    ([], None, [], None, "at least one listener"),
    (["PLAINTEXT://h:1", "plaintext://h:2"], None, [], None, "PLAINTEXT is named twice"),
    (["PLAINTEXT://h:1", "SSL://h:1"], None, [], None, "port 1 is used twice"),
    (["CLIENT://h:1"], None, [], None, "CLIENT has no security protocol"),
    (["CLIENT://h:1"], "LOCAL:PLAINTEXT", [], None, "CLIENT has no security protocol"),
    (["CLIENT://h:1"], "CLIENT:TLS", [], None, "'TLS' is no security protocol"),
    (["CLIENT://h:1"], "CLIENT", [], None, 'not "NAME:PROTOCOL"'),
    (["h:1"], None, [], None, 'not "NAME://HOST:PORT"'),
    (["PLAINTEXT://h:port"], None, [], None, "a port 0-65535"),
    (["PLAINTEXT://h:70000"], None, [], None, "a port 0-65535"),
    (["PLAINTEXT://::1:9092"], None, [], None, "IPv6 host goes in brackets"),
    (["PLAINTEXT://h:1"], None, ["SSL://h:1"], None, "SSL is not one of the listeners"),
    (["PLAINTEXT://h:1"], None, ["PLAINTEXT://0.0.0.0:1"], None, "not an address a client can reach"),
    (["PLAINTEXT://h:1"], None, ["PLAINTEXT://:1"], None, "not an address a client can reach"),
    (["PLAINTEXT://h:1"], None, ["PLAINTEXT://a:0"], None, "needs a port"),
    (["PLAINTEXT://h:1"], None, ["PLAINTEXT://a:2", "PLAINTEXT://b:2"], None, "PLAINTEXT is named twice"),
    (["PLAINTEXT://h:1"], None, [], "SSL", "SSL is not one of the listeners"),
])
def test_settings_kafka_refuses_are_refused_naming_the_setting(listeners, protocol_map, advertised, inter_broker,
                                                               message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_listeners(listeners, protocol_map, advertised, inter_broker)


def test_a_node_is_reached_at_the_endpoint_of_the_listener_the_client_came_in_on():
    from types import SimpleNamespace

    from martlet.engine.api import NodeIdentity
    from martlet.gateway.handlers.metadata import address
    from martlet.gateway.settings import GatewaySettings

    settings = GatewaySettings(advertised_host="10.0.0.1", advertised_port=9092,
                               endpoints=(("LOCAL", "10.0.0.1", 9092), ("CLIENT", "b1.example", 9093)))
    ctx = SimpleNamespace(node_id=1, settings=settings)
    this = NodeIdentity(1, "10.0.0.1", 9092)
    other = NodeIdentity(2, "10.0.0.2", 9092, endpoints=("LOCAL://10.0.0.2:9092", "CLIENT://[::2]:9093"))
    older = NodeIdentity(3, "10.0.0.3", 9092)  # registered no endpoints
    assert [address(ctx, node, "CLIENT") for node in (this, other, older)] == [
        ("b1.example", 9093), ("::2", 9093), ("10.0.0.3", 9092)]
    assert [address(ctx, node, "LOCAL") for node in (this, other, older)] == [
        ("10.0.0.1", 9092), ("10.0.0.2", 9092), ("10.0.0.3", 9092)]
    assert address(ctx, this, "") == ("10.0.0.1", 9092)  # not from a connection: the node's own address
