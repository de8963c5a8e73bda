"""Reference systems (real Apache Kafka from Maven Central jars) started from code for tests."""

from martlet.compat.reference.kafka import (
    KAFKA_TOOLS,
    ReferenceKafka,
    ReferenceKafkaError,
    ReferenceToolTimeout,
    kafka_classpath,
    run_tool,
)

__all__ = [
    "KAFKA_TOOLS",
    "ReferenceKafka",
    "ReferenceKafkaError",
    "ReferenceToolTimeout",
    "kafka_classpath",
    "run_tool",
]
