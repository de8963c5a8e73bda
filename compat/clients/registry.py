"""Drivers by name. `make(name, bootstrap, security)` builds one; the Java driver is imported
lazily, and when it is missing or cannot run, `unavailable(name)` says why, so the runner reports
every scenario for it as not applicable with that reason instead of leaving it out.

`security` is the path of a Kafka client properties file (--security-config) or None; each
driver applies it its own way (see security.py), and `check_security` says, before any client
starts, whether a driver can use it."""

from __future__ import annotations

from collections.abc import Callable

from martlet.tools import client_config

from . import security as security_config
from .base import Driver

CLIENTS = ("java", "confluent", "kafka-python", "aiokafka")


def _confluent(bootstrap: str, security: str | None) -> Driver:
    from .confluent import ConfluentDriver

    return ConfluentDriver(bootstrap, client_config.load(security) if security else None)


def _kafka_python(bootstrap: str, security: str | None) -> Driver:
    from .kafka_python import KafkaPythonDriver

    return KafkaPythonDriver(bootstrap, security_config.python_settings(security) if security else None)


def _aiokafka(bootstrap: str, security: str | None) -> Driver:
    from .aiokafka import AiokafkaDriver

    return AiokafkaDriver(bootstrap, security_config.python_settings(security) if security else None)


def _java(bootstrap: str, security: str | None) -> Driver:
    from .java_driver import JavaDriver

    return JavaDriver(bootstrap, security_config=security)


FACTORIES: dict[str, Callable[[str, str | None], Driver]] = {
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


def check_security(name: str, security: str) -> None:
    """ConfigError (naming keys, never a value) when client `name` cannot use the properties
    file at `security`: librdkafka's and the Python clients' translations are made and thrown
    away; the JVM reads the file itself, so for Java it need only be readable."""
    if name == "confluent":
        client_config.load(security)
    elif name in ("kafka-python", "aiokafka"):
        security_config.python_settings(security)
    else:
        security_config.check_readable(security)


def check_login(bootstrap: str, security: str) -> None:
    """LoginRefused when `bootstrap` refuses librdkafka's login with the file at `security` (see
    confluent.check_login); nothing when librdkafka cannot use the file (the Java client may:
    its lanes then report for themselves)."""
    from .confluent import check_login as confluent_check_login

    try:
        settings = client_config.load(security)
    except client_config.ConfigError:
        return
    confluent_check_login(bootstrap, settings)


def make(name: str, bootstrap: str, security: str | None = None) -> Driver:
    return FACTORIES[name](bootstrap, security)
