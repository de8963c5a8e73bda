"""Drivers by name. `make(name, bootstrap)` builds one; the Java driver is imported lazily,
and when it is missing or cannot run, `unavailable(name)` says why, so the runner reports
every scenario for it as not applicable with that reason instead of leaving it out."""

from __future__ import annotations

from collections.abc import Callable

from .base import Driver

CLIENTS = ("java", "confluent", "kafka-python", "aiokafka")


def _confluent(bootstrap: str) -> Driver:
    from .confluent import ConfluentDriver

    return ConfluentDriver(bootstrap)


def _kafka_python(bootstrap: str) -> Driver:
    from .kafka_python import KafkaPythonDriver

    return KafkaPythonDriver(bootstrap)


def _aiokafka(bootstrap: str) -> Driver:
    from .aiokafka import AiokafkaDriver

    return AiokafkaDriver(bootstrap)


def _java(bootstrap: str) -> Driver:
    from .java_driver import JavaDriver

    return JavaDriver(bootstrap)


FACTORIES: dict[str, Callable[[str], Driver]] = {
    "java": _java, "confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka,
}


def unavailable(name: str) -> str | None:
    """Why the client cannot run here, or None when it can."""
    if name not in FACTORIES:
        return f"unknown client {name!r} (known: {', '.join(CLIENTS)})"
    if name != "java":
        return None
    try:
        from .java_driver import java_available
    except ImportError as exc:
        return f"java driver not built ({exc})"
    return None if java_available() else "java driver not available (java_available() is false)"


def make(name: str, bootstrap: str) -> Driver:
    return FACTORIES[name](bootstrap)
