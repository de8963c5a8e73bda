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
