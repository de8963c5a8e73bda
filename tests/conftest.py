"""Registers the shared fixture plugins in tests/fixtures/."""

pytest_plugins = ["tests.fixtures.kafka_reference", "tests.fixtures.martlet"]
