"""SimpleConsumer: one partition, read by offset, as Talos' SimpleConsumer. It keeps no
position and joins no group: the caller names the offset of every fetch (fetching.py does
the reading). Reads are read_committed unless asked otherwise. Unlike Consumer it does not
hold back a partition added by an online split: ordering a key across the split (LAYOUT's
parent and split offset) is then the caller's business.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import TypeVar

from kio.schema.errors import ErrorCode

from ..protocol.sasl_client import Login
from .brokers import Brokers
from .errors import BrokerError
from .fetching import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    STALE_LAYOUT,
    Leaders,
    TopicPartition,
    fetch,
    list_offsets,
)
from .loop import Synchronous
from .message import Message

DEFAULT_TIMEOUT_S = 30.0
RETRY_PAUSE_S = 0.1
T = TypeVar("T")


class AsyncSimpleConsumer:
    def __init__(self, bootstrap: str, topic: str, partition: int,  # noqa: PLR0913 - tls, sasl: keyword-only
                 client_id: str = "martlet-simple-consumer", timeout_s: float = DEFAULT_TIMEOUT_S,
                 read_committed: bool = True, *,
                 tls: ssl.SSLContext | None = None, sasl: Login | None = None) -> None:
        """`topic` is a name or a resource name; `timeout_s` bounds how long a call looks
        for the partition's leader; `tls` connects with TLS (a broker's SSL listener), `sasl`
        authenticates (a broker's SASL listener)."""
        self.asked = topic  # a name or a resource name
        self.tp = TopicPartition(topic, partition)  # by name once the layout is read
        self.timeout_s = timeout_s
        self.isolation_level = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        self._leaders = Leaders(Brokers(bootstrap, client_id, timeout_s, tls, sasl))

    async def fetch(self, offset: int, max_messages: int = 500, timeout_s: float = 1.0) -> list[Message]:
        """The messages from `offset` on (at most `max_messages`), waiting up to `timeout_s`
        for some to arrive; [] if none did. BrokerError for OFFSET_OUT_OF_RANGE and any other
        error but a moved leader or a broken connection, which are retried."""
        deadline = time.monotonic() + timeout_s
        while True:
            await self._know_leader()
            wait_s = max(deadline - time.monotonic(), 0.0)
            (found,) = await fetch(self._leaders, {self.tp: offset}, wait_s, self.isolation_level)
            if found.error_code == ErrorCode.none:
                if found.messages or time.monotonic() >= deadline:
                    return found.messages[:max_messages]
                # nothing yet (a broker caps its wait), or only control or aborted batches: go on after them
                offset = found.next_offset
                continue
            await self._retry_or_raise(found.error_code, deadline + self.timeout_s)

    async def earliest(self) -> int:
        """The partition's first offset (its log start)."""
        return await self._offset(EARLIEST)

    async def latest(self) -> int:
        """The offset the next message will get (read_committed: the last stable offset)."""
        return await self._offset(LATEST)

    async def close(self) -> None:
        await self._leaders.brokers.close()

    async def _offset(self, timestamp: int) -> int:
        deadline = time.monotonic() + self.timeout_s
        while True:
            await self._know_leader()
            found = (await list_offsets(self._leaders, [self.tp], timestamp, self.isolation_level))[self.tp]
            if not isinstance(found, ErrorCode):
                return found
            await self._retry_or_raise(found, deadline)

    async def _know_leader(self) -> None:
        if self._leaders.leader(self.tp) is None:
            await self._leaders.refresh([self.asked])
            self.tp = TopicPartition(self._leaders.name(self.asked) or self.asked, self.tp.partition)
            if self.tp not in self._leaders.partitions(self.tp.topic):
                raise BrokerError(ErrorCode.unknown_topic_or_partition, f"{self.tp.topic}[{self.tp.partition}]")

    async def _retry_or_raise(self, code: int, deadline: float) -> None:
        """After a retriable answer, forget the layout and pause; else (or past the deadline) raise."""
        if code not in STALE_LAYOUT or time.monotonic() >= deadline:
            raise BrokerError(code, f"{self.tp.topic}[{self.tp.partition}]")
        self._leaders.topics.pop(self.tp.topic, None)
        await asyncio.sleep(RETRY_PAUSE_S)


class SimpleConsumer(Synchronous):
    """The synchronous SimpleConsumer: the same calls, each waiting for its answer."""

    def __init__(self, bootstrap: str, topic: str, partition: int,  # noqa: PLR0913 - tls, sasl: keyword-only
                 client_id: str = "martlet-simple-consumer", timeout_s: float = DEFAULT_TIMEOUT_S,
                 read_committed: bool = True, *,
                 tls: ssl.SSLContext | None = None, sasl: Login | None = None) -> None:
        self._consumer = AsyncSimpleConsumer(bootstrap, topic, partition, client_id, timeout_s, read_committed, tls=tls, sasl=sasl)
        super().__init__("martlet-simple-consumer", self._consumer, "consumer")

    def fetch(self, offset: int, max_messages: int = 500, timeout_s: float = 1.0) -> list[Message]:
        return self._run(self._consumer.fetch(offset, max_messages, timeout_s))

    def earliest(self) -> int:
        return self._run(self._consumer.earliest())

    def latest(self) -> int:
        return self._run(self._consumer.latest())
