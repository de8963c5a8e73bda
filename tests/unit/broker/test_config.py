import pytest

from martlet.broker.config import ConfigError, from_document, parse_address


def test_sections_fill_settings():
    config = from_document({"gateway": {"listen": "0.0.0.0:1234", "auto_create_topics": True},
                            "engine": {"owner": "team"}, "topic_defaults": {"retention_ms": 1000}})
    assert (config.gateway.listen_host, config.gateway.listen_port) == ("0.0.0.0", 1234)
    assert config.gateway.auto_create_topics is True
    assert config.engine.owner == "team"
    assert config.engine.topic_defaults.retention_ms == 1000


@pytest.mark.parametrize("doc", [{"nope": {}}, {"gateway": {"nope": 1}}, {"gateway": {"default_partitions": "3"}},
                                 {"gateway": {"http_allowed_hosts": ("a",)}}, {"http": {"nope": 1}},
                                 {"topic_defaults": {"flush_mode": "never"}}])
def test_bad_documents_get_a_clear_error(doc):
    with pytest.raises(ConfigError):
        from_document(doc)


@pytest.mark.parametrize("text", ["localhost", ":9092", "h:x", "h:70000"])
def test_bad_addresses(text):
    with pytest.raises(ConfigError):
        parse_address(text)


def test_a_renamed_key_says_its_new_name() -> None:
    with pytest.raises(ConfigError, match="'commit_ms' is now called 'flush_ms'"):
        from_document({"engine": {"commit_ms": 5}})


def test_http_allowed_hosts_reach_the_gateway_settings() -> None:
    config = from_document({"http": {"listen": "0.0.0.0:9644", "allowed_hosts": ["martlet.example", "*"]}})
    assert config.http_listen == "0.0.0.0:9644"
    assert config.gateway.http_allowed_hosts == ("martlet.example", "*")
    assert from_document({}).gateway.http_allowed_hosts == ()


@pytest.mark.parametrize("value", ["martlet.example", [1], [""], None])
def test_http_allowed_hosts_must_be_a_list_of_names(value: object) -> None:
    with pytest.raises(ConfigError, match="allowed_hosts"):
        from_document({"http": {"allowed_hosts": value}})


def test_listeners_replace_listen_and_without_them_listen_is_one_plaintext_listener() -> None:
    from martlet.broker.config import listeners_of
    from martlet.gateway.listeners import SecurityProtocol

    config = from_document({"gateway": {"listeners": ["CLIENT://0.0.0.0:9093", "LOCAL://127.0.0.1:0"],
                                        "listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "LOCAL": "PLAINTEXT"},
                                        "advertised_listeners": ["CLIENT://broker1.example.com:9093"],
                                        "inter_broker_listener_name": "local"}})
    listeners = listeners_of(config)
    assert [(lis.name, lis.host, lis.port, lis.advertised) for lis in listeners.all] == [
        ("CLIENT", "0.0.0.0", 9093, ("broker1.example.com", 9093)), ("LOCAL", "127.0.0.1", 0, None)]
    assert listeners.inter_broker == "LOCAL"
    plain = listeners_of(from_document({"gateway": {"listen": "[::1]:9092", "advertised": "b.example:19092"}}))
    assert [(lis.name, lis.protocol, lis.host, lis.port, lis.advertised) for lis in plain.all] == [
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "::1", 9092, ("b.example", 19092))]


@pytest.mark.parametrize(("gateway", "message"), [
    ({"listeners": ["A://h:1"], "listen": "h:2"}, "listeners replaces listen and advertised"),
    ({"advertised_listeners": ["A://h:1"]}, "advertised_listeners needs listeners"),
    ({"listeners": "PLAINTEXT://h:1"}, "expected lists"),
    ({"listeners": ["PLAINTEXT://h:1"], "listener_security_protocol_map": 7}, "listener_security_protocol_map"),
    ({"listeners": ["PLAINTEXT://h:1"], "inter_broker_listener_name": 1}, "inter_broker_listener_name"),
    ({"listeners": ["CLIENT://h:1"]}, "CLIENT has no security protocol"),
    ({"listeners": ["SASL_SSL://h:1"]}, "certificate and key are needed by SSL listeners"),
])
def test_listener_settings_kafka_or_martlet_refuse_get_a_clear_error(gateway: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_document({"gateway": gateway})


@pytest.mark.parametrize(("doc", "message"), [
    ({"sasl": {"enabled_mechanisms": ["GSSAPI"]}}, "enabled_mechanisms: GSSAPI"),
    ({"sasl": {"enabled_mechanisms": "PLAIN"}}, "expected a list"),
    ({"sasl": {"inter_broker_mechanism": "PLAIN"}}, "inter_broker_mechanism: PLAIN is not SCRAM-SHA-256"),
    ({"sasl": {"failed_authentication_delay_ms": -1}}, "expected >= 0"),
    ({"sasl": {"password": "x"}}, "password"),
])
def test_sasl_settings_that_cannot_work_get_a_clear_error(doc: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_document(doc)


def test_the_udp_front_end_needs_its_topics_named_when_listeners_authenticate() -> None:
    from martlet.broker.config import unauthenticated_udp

    sasl = {"listeners": ["SASL_PLAINTEXT://127.0.0.1:1", "PLAINTEXT://127.0.0.1:2"],
            "inter_broker_listener_name": "PLAINTEXT"}
    assert unauthenticated_udp(from_document({"gateway": sasl, "udp": {"listen": "127.0.0.1:9"}})) is not None
    named = from_document({"gateway": sasl, "udp": {"listen": "127.0.0.1:9", "topics": ["metrics"]}})
    assert unauthenticated_udp(named) is None and named.udp_topics == ("metrics",)
    assert unauthenticated_udp(from_document({"udp": {"listen": "127.0.0.1:9"}})) is None  # no security: as before
    with pytest.raises(ConfigError, match="topics: expected a list"):
        from_document({"udp": {"topics": []}})


def test_a_cluster_on_a_sasl_inter_broker_listener_needs_the_brokers_own_login() -> None:
    from martlet.broker.config import missing_inter_broker_login

    sasl = {"gateway": {"listeners": ["SASL_PLAINTEXT://127.0.0.1:1"]}}
    assert missing_inter_broker_login(from_document(sasl)) is None  # one broker calls no other
    clustered = from_document({"gateway": {**sasl["gateway"], "zookeeper": "127.0.0.1:2181"}})
    assert "the brokers of a cluster need a user of their own" in (missing_inter_broker_login(clustered) or "")
    own = {"inter_broker_user": "broker", "inter_broker_password": "s"}
    with_own = from_document({"gateway": {**sasl["gateway"], "zookeeper": "127.0.0.1:2181"}, "sasl": own})
    assert missing_inter_broker_login(with_own) is None


def test_sasl_settings_are_read() -> None:
    config = from_document({"gateway": {"listeners": ["SASL_PLAINTEXT://127.0.0.1:1", "LOCAL://127.0.0.1:2"],
                                        "listener_security_protocol_map": "SASL_PLAINTEXT:SASL_PLAINTEXT,LOCAL:PLAINTEXT",
                                        "inter_broker_listener_name": "SASL_PLAINTEXT"},
                            "sasl": {"enabled_mechanisms": ["scram-sha-512"], "inter_broker_user": "broker",
                                     "inter_broker_password": "s", "connections_max_reauth_ms": 60000}})
    assert config.sasl.enabled_mechanisms == ("SCRAM-SHA-512",)
    assert (config.sasl.inter_broker_user, config.sasl.connections_max_reauth_ms) == ("broker", 60000)


def test_doors_other_machines_reach_without_tls_are_named() -> None:
    from martlet.broker.config import exposed

    assert exposed(from_document({})) == []  # the default: loopback only
    assert exposed(from_document({"gateway": {"listen": "localhost:9092"}, "http": {"listen": "[::1]:9644"},
                                  "udp": {"listen": "127.0.0.2:9999"}})) == []
    assert exposed(from_document({"gateway": {"listen": "0.0.0.0:9092"}, "http": {"listen": "0.0.0.0:1"},
                                  "udp": {"listen": "10.1.2.3:9999"}})) == [
        "the Kafka listener PLAINTEXT://0.0.0.0:9092", "the HTTP port 0.0.0.0:1", "the UDP front end 10.1.2.3:9999"]
    listeners = {"listeners": ["LOCAL://127.0.0.1:9092", "OPEN://[::]:9094"],
                 "listener_security_protocol_map": "LOCAL:PLAINTEXT,OPEN:PLAINTEXT"}
    assert exposed(from_document({"gateway": listeners, "http": {"listen": "off"}})) == [
        "the Kafka listener OPEN://[::]:9094"]


def test_serve_refuses_a_plaintext_door_to_other_machines_unless_told_so(tmp_path, capsys) -> None:
    from martlet.cli.main import main

    assert main(["serve", "--listen", "0.0.0.0:0", "--http", "off", "--data-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "the Kafka listener PLAINTEXT://0.0.0.0:0: anyone who reaches them" in error and "--insecure" in error
    assert not any(tmp_path.iterdir())  # refused before anything was opened
