"""Registers the shared fixture plugins in tests/fixtures/."""

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
