"""Topics DDL, as in Talos: create, delete, describe, list, add partitions. A created topic is
named by its resource name (`owner#name#uuid`, new on every re-create) from then on; every
call takes either the name or the resource name. Kafka's CreateTopics, DeleteTopics,
CreatePartitions and Metadata do the work; Martlet's LAYOUT adds what Kafka has no words for
(V, the logical slot ranges, S and C).
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import time

from kio.schema.errors import ErrorCode

from ..protocol.native import TopicLayout
from ..protocol.sasl_client import Login
from .brokers import Brokers
from .errors import BrokerError, check
from .loop import LoopThread

CREATE_TOPICS, DELETE_TOPICS, METADATA, CREATE_PARTITIONS = 19, 20, 3, 37
DEFAULT_TIMEOUT_S = 30.0
POLL_S = 0.05


class AsyncAdmin:
    def __init__(self, bootstrap: str, client_id: str = "martlet-admin", timeout_s: float = DEFAULT_TIMEOUT_S, *,
                 tls: ssl.SSLContext | None = None, sasl: Login | None = None) -> None:
        self.brokers = Brokers(bootstrap, client_id, timeout_s, tls, sasl)
        self.timeout_s = timeout_s

    async def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> TopicLayout:
        """Create the topic; its description (resource name included) once a broker serves it."""
        answer = await self.brokers.kafka(CREATE_TOPICS, 7, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout": self._timeout(), "validate_only": False})
        result = answer.topics[0]
        check(result.error_code, result.error_message)
        return await self._served(name)

    async def delete_topic(self, name: str) -> None:
        """Delete the topic (by name, or by resource name: then only if that is still the current one)."""
        topic = await self.describe_topic(name)
        answer = await self.brokers.kafka(DELETE_TOPICS, 6, {
            "topics": [{"name": topic.name, "topic_id": topic.topic_id}], "timeout": self._timeout()})
        result = answer.responses[0]
        check(result.error_code, result.error_message)

    async def describe_topic(self, name: str) -> TopicLayout:
        """Resource name, V, and per partition its slot range, leader, S and C."""
        (topic,) = await self.brokers.layout([name])
        check(topic.error_code, f"topic {name!r}")
        return topic

    async def list_topics(self) -> list[str]:
        answer = await self.brokers.kafka(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
        return sorted(t.name for t in answer.topics if not t.is_internal and t.name)

    async def add_partitions(self, name: str, count: int) -> TopicLayout:
        """Grow the topic to `count` physical partitions (partitions are only ever added): the
        widest slot ranges are split and V goes up."""
        topic = await self.describe_topic(name)
        answer = await self.brokers.kafka(CREATE_PARTITIONS, 3, {
            "topics": [{"name": topic.name, "count": count, "assignments": None}], "timeout": self._timeout(),
            "validate_only": False})
        result = answer.results[0]
        check(result.error_code, result.error_message)
        return await self._served(topic.name, version_above=topic.version)

    async def close(self) -> None:
        await self.brokers.close()

    def _timeout(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.timeout_s)

    async def _served(self, name: str, version_above: int = -1) -> TopicLayout:
        """The topic's layout once every partition has a leader with a session (and V is above
        `version_above`), polled until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                topic = await self.describe_topic(name)
                if topic.version > version_above and all(p.session >= 0 or p.leader_id >= 0 for p in topic.partitions):
                    return topic
            except BrokerError as error:
                if error.code != ErrorCode.unknown_topic_or_partition:
                    raise
            if time.monotonic() >= deadline:
                raise BrokerError(ErrorCode.request_timed_out, f"topic {name!r} is not served after {self.timeout_s} s")
            await asyncio.sleep(POLL_S)


class Admin:
    """The synchronous Admin: the same calls, each waiting for its answer."""

    def __init__(self, bootstrap: str, client_id: str = "martlet-admin", timeout_s: float = DEFAULT_TIMEOUT_S, *,
                 tls: ssl.SSLContext | None = None, sasl: Login | None = None) -> None:
        self._loop = LoopThread("martlet-admin")
        self._admin = AsyncAdmin(bootstrap, client_id, timeout_s, tls=tls, sasl=sasl)

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> TopicLayout:
        return self._loop.run(self._admin.create_topic(name, partitions, configs))

    def delete_topic(self, name: str) -> None:
        self._loop.run(self._admin.delete_topic(name))

    def describe_topic(self, name: str) -> TopicLayout:
        return self._loop.run(self._admin.describe_topic(name))

    def list_topics(self) -> list[str]:
        return self._loop.run(self._admin.list_topics())

    def add_partitions(self, name: str, count: int) -> TopicLayout:
        return self._loop.run(self._admin.add_partitions(name, count))

    def close(self) -> None:
        self._loop.run(self._admin.close())
        self._loop.stop()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
