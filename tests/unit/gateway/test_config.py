import pytest

from martlet.gateway.config import ConfigError, from_document, parse_address


def test_sections_fill_settings():
    config = from_document({"gateway": {"listen": "0.0.0.0:1234", "auto_create_topics": True},
                            "engine": {"owner": "team"}, "topic_defaults": {"retention_ms": 1000}})
    assert (config.gateway.listen_host, config.gateway.listen_port) == ("0.0.0.0", 1234)
    assert config.gateway.auto_create_topics is True
    assert config.engine.owner == "team"
    assert config.engine.topic_defaults.retention_ms == 1000


@pytest.mark.parametrize("doc", [{"nope": {}}, {"gateway": {"nope": 1}}, {"gateway": {"default_partitions": "3"}},
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
