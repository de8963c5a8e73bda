"""Registers the shared fixture plugins in tests/fixtures/, and has pytest rewrite the asserts
of the shared helpers in tests/support/ as it does the tests' own."""

import pytest

# Before any test module imports a helper: a module imported earlier keeps its plain asserts.
pytest.register_assert_rewrite("tests.support")

pytest_plugins = [
    "tests.fixtures.browser",
    "tests.fixtures.cluster",
    "tests.fixtures.costs",
    "tests.fixtures.flink",
    "tests.fixtures.hdfs",
    "tests.fixtures.kafka_reference",
    "tests.fixtures.martlet",
    "tests.fixtures.reference_pair",
    "tests.fixtures.spark",
    "tests.fixtures.zookeeper",
]
