"""The asynchronous producer: Swift's write protocol with Talos' surface.

`send` routes a message (client/routing.py) to a physical partition's queue and returns at
once (it waits only while the client's buffer is full). Each partition has one writer task
with one WRITE in flight: what queued up meanwhile goes in the next batch, so batches grow with
the round trip (a natural group commit). The broker answers once the batch is in its memory,
with (V, S, C); the producer keeps every batch at or above C.

When the partition is reloaded (S changes) or the topic changes (V), the broker refuses the
stale write with the current (V, S, C); the batches written at offsets below the new C were
persisted and are done, the rest are sent again, in order, under the new S. A connection that
breaks leaves the last write's outcome unknown: the writer finds the leader again (LAYOUT),
asks with an empty write, and if S is unchanged sends the same batch again, which the broker
recognises as a duplicate (each batch carries an idempotent producer id and sequence); if S
changed it resends as above. Only a client and broker dying together lose data: the messages
above the last C the client saw.

Callbacks (run on the producer's event loop, keep them short): `on_written(message)` once a
message is in the broker's memory (its offset set; a resend after a reload may move it and
does not call this again), `on_persisted(message)` once C covers it (its final offset),
`on_failed(message, error)` when it was refused for good or could not be written within
`retry_timeout_s`. `checkpoint(topic, partition)` is the partition's C as last answered;
`flush()` returns once every message sent so far is in the broker's memory, and
`wait_persisted()` once C covers every one of them.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.native import TopicLayout, Write, Written, decode_write_answer, write_request
from ..protocol.sasl_client import Login
from ..records.build import Producer as ProducerFields
from .batching import build_producer_batch
from .brokers import Brokers
from .errors import BrokerError, Disconnected, MartletError
from .loop import LoopThread
from .message import Message
from .routing import Router, Strategy

logger = logging.getLogger(__name__)
INIT_PRODUCER_ID = 22
BATCH_BYTES_MAX = 1 << 20
BUFFER_BYTES_DEFAULT = 64 << 20
RETRY_TIMEOUT_S = 120.0
WRITE_TIMEOUT_MS = 30_000
CHECKPOINT_POLL_S = 0.005  # how often an idle writer asks for C while it holds unpersisted batches
BACKOFF_S = (0.01, 0.05, 0.1, 0.25, 0.5)
SEQUENCE_MAX = 2**31 - 1


@dataclass(slots=True)
class _Batch:
    messages: list[Message]
    data: bytearray
    base_sequence: int
    offset: int = -1  # base offset once written
    size: int = 0

    @property
    def end(self) -> int:
        return self.offset + len(self.messages)


@dataclass(slots=True)
class _Callbacks:
    on_written: Callable[[Message], None] | None = None
    on_persisted: Callable[[Message], None] | None = None
    on_failed: Callable[[Message, Exception], None] | None = None


@dataclass(slots=True)
class _State:
    """What a partition's writer last heard from its broker."""

    session: int = -1
    checkpoint: int = 0
    leader: tuple[str, int] = ("", 0)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    client_id: str = "martlet-producer"
    partition_strategy: Strategy = "round_robin"  # for messages without a key (client/routing.py)
    buffer_bytes: int = BUFFER_BYTES_DEFAULT  # send() waits while this much is held unpersisted
    batch_bytes: int = BATCH_BYTES_MAX  # the most one WRITE carries to a partition
    retry_timeout_s: float = RETRY_TIMEOUT_S  # how long a batch is retried before on_failed
    tls: ssl.SSLContext | None = None  # connect with TLS (a broker's SSL listener): ssl.create_default_context(...)
    sasl: Login | None = None  # authenticate so (a broker's SASL listener): Login("SCRAM-SHA-512", "user", "password")


class AsyncProducer:
    def __init__(self, bootstrap: str, topic: str, config: ProducerConfig = ProducerConfig(), *,
                 on_written: Callable[[Message], None] | None = None,
                 on_persisted: Callable[[Message], None] | None = None,
                 on_failed: Callable[[Message, Exception], None] | None = None) -> None:
        self.brokers = Brokers(bootstrap, config.client_id, config.retry_timeout_s, config.tls, config.sasl)
        self.topic = topic
        self.config = config
        self.callbacks = _Callbacks(on_written, on_persisted, on_failed)
        self.layout: TopicLayout | None = None
        self.router: Router | None = None
        self.version = -1  # the V the router follows, and every write names
        self.ids = ProducerFields(-1, -1, 0)
        self._writers: dict[int, _Writer] = {}
        self._routed = asyncio.Event()  # clear while messages move to the partitions of a new V
        self._routed.set()
        self._rerouting: asyncio.Task[None] | None = None
        self._buffered = 0
        self._buffer_max = self.config.buffer_bytes
        self._room = asyncio.Event()
        self._room.set()
        self._sequence = 0
        self._closed = False

    async def start(self) -> AsyncProducer:
        """Learn the topic's layout and an idempotent producer id (send() does it on first use)."""
        if self.layout is None:
            await self.refresh()
            answer = await self.brokers.kafka(INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout": datetime.timedelta(minutes=1),
                "producer_id": -1, "producer_epoch": -1})
            if answer.error_code:
                raise BrokerError(answer.error_code, "InitProducerId")
            self.ids = ProducerFields(int(answer.producer_id), int(answer.producer_epoch), 0)
        return self

    async def refresh(self) -> TopicLayout:
        """Read the topic's layout again (leaders); a new V starts moving messages (reroute)."""
        (layout,) = await self.brokers.layout([self.topic])
        if layout.error_code:
            raise BrokerError(layout.error_code, f"topic {self.topic!r}")
        self.layout = layout
        if self.router is None:
            self.router = Router([(p.slot_start, p.slot_end) for p in layout.partitions], self.config.partition_strategy)
            self.version = layout.version
        elif layout.version != self.version:
            self.version_changed()
        return layout

    def version_changed(self) -> None:
        """A writer learned of a V other than the one routing follows: move to the new layout."""
        if self._rerouting is None:
            self._routed.clear()
            self._rerouting = asyncio.ensure_future(self._reroute())

    async def routed(self) -> None:
        """Return once no reroute is under way."""
        await self._routed.wait()

    async def _reroute(self) -> None:
        """The online split, as a native producer follows it. Once no writer has a write in
        flight (every write naming the old V is answered or refused), take the new layout,
        and move every message not yet written to the partition the new ranges name for its
        key, in the order it was sent: a key's earlier messages were written to the old
        partition before the new V took effect, its later ones go to the new partition. What
        is written stays where it is."""
        try:
            await self._all_idle()
            (layout,) = await self.brokers.layout([self.topic])
            if layout.error_code:
                raise BrokerError(layout.error_code, f"topic {self.topic!r}")
            self.layout = layout
            self.router = Router([(p.slot_start, p.slot_end) for p in layout.partitions], self.config.partition_strategy)
            self.version = layout.version
            unwritten = [message for index in sorted(self._writers) for message in self._writers[index].unwind()]
            for message in unwritten:
                self.enqueue(message)
        except MartletError as error:  # the layout could not be read: the writers retry as ever
            _log_reroute_failure(error)
        finally:
            self._rerouting = None
            self._routed.set()

    async def _all_idle(self) -> None:
        while busy := [writer for writer in self._writers.values() if writer.busy]:
            for writer in busy:
                writer.changed.clear()
            await asyncio.wait([asyncio.ensure_future(writer.changed.wait()) for writer in busy],
                               return_when=asyncio.FIRST_COMPLETED)

    async def send(self, value: bytes | None, key: bytes | None = None, *, headers: tuple[tuple[str, bytes | None], ...] = (),
                   partition: int | None = None, sequence: int | None = None, timestamp: int | None = None) -> Message:
        """Queue a message; returns it (its `sequence` is the given one or the next number)."""
        if self._closed:
            raise MartletError("the producer is closed")
        if self.router is None:
            await self.start()
        assert self.router is not None
        if not self._room.is_set():
            await self._room.wait()
        message = self.message(value, key, headers, partition, sequence, timestamp)
        self.enqueue(message)
        return message

    def message(self, value: bytes | None, key: bytes | None, headers: tuple[tuple[str, bytes | None], ...],
                partition: int | None, sequence: int | None, timestamp: int | None) -> Message:
        """A message, numbered (any thread: the synchronous Producer makes them on the
        caller's); `enqueue` routes it."""
        if sequence is None:
            sequence = self._sequence
        self._sequence = sequence + 1
        return Message(value, key, headers, int(time.time() * 1000) if timestamp is None else timestamp,
                       self.topic, -1 if partition is None else partition, -1, sequence, partition is not None)

    def enqueue(self, message: Message) -> None:
        """Route the message (unless its sender chose the partition) and put it in that
        partition's queue (on the producer's event loop)."""
        if self._closed:
            raise MartletError("the producer is closed")
        assert self.router is not None
        if not message.pinned:
            message.partition = self.router.partition(message.key)
        (self._writers.get(message.partition) or self._writer(message.partition)).add(message)

    @property
    def full(self) -> bool:
        return not self._room.is_set()

    async def room(self) -> None:
        await self._room.wait()

    def checkpoint(self, partition: int) -> int:
        """The partition's C as its broker last answered: offsets below it are persisted."""
        writer = self._writers.get(partition)
        return -1 if writer is None else writer.state.checkpoint

    async def flush(self) -> None:
        """Return once every message sent so far is in its broker's memory (or failed)."""
        await self._settled(persisted=False)

    async def wait_persisted(self) -> None:
        """Return once C covers every message sent so far (or it failed)."""
        await self._settled(persisted=True)

    async def _settled(self, persisted: bool) -> None:
        """Until every writer is idle at once with no reroute under way: a reroute (an online
        split) moves messages to other writers, new ones among them, while the others wait."""
        while True:
            await self.routed()
            await asyncio.gather(*(writer.idle(persisted) for writer in list(self._writers.values())))
            if self._rerouting is None and not any(writer.pending(persisted) for writer in self._writers.values()):
                return

    async def close(self, persisted: bool = False) -> None:
        """Flush (and with `persisted`, wait for C), then stop the writers and the connections."""
        if self._closed:
            return
        await (self.wait_persisted() if persisted else self.flush())
        self._closed = True
        for writer in self._writers.values():
            writer.stop()
        await self.brokers.close()

    # -- for the writers

    def _writer(self, index: int) -> _Writer:
        writer = self._writers.get(index)
        if writer is None:
            writer = self._writers[index] = _Writer(self, index)
        return writer

    def buffered(self, delta: int) -> None:
        self._buffered += delta
        if self._buffered >= self._buffer_max:
            self._room.clear()
        elif delta < 0:
            self._room.set()


class _Writer:
    """One physical partition: its queue, the batches it holds until C covers them, its task."""

    def __init__(self, producer: AsyncProducer, index: int) -> None:
        self.producer, self.index = producer, index
        self.state = _State()
        self.queued: deque[Message] = deque()
        self.queued_bytes = 0
        self.resend: deque[_Batch] = deque()  # refused or lost batches, to send first, in order
        self.written: deque[_Batch] = deque()  # in the broker's memory, not yet below C
        self.next_sequence = 0
        self._wake = asyncio.Event()
        self.changed = asyncio.Event()  # something got written, persisted or failed
        self.busy = False  # a write is in flight
        self._task = asyncio.ensure_future(self._run())

    def add(self, message: Message) -> None:
        size = len(message.value or b"") + len(message.key or b"") + 32
        self.queued.append(message)
        self.queued_bytes += size
        self.producer.buffered(size)
        self._wake.set()

    def pending(self, persisted: bool) -> bool:
        """Whether something is still to write (or, with `persisted`, to be covered by C)."""
        return bool(self.queued or self.resend or (persisted and self.written) or self.busy)

    async def idle(self, persisted: bool) -> None:
        while self.pending(persisted):
            self.changed.clear()
            self._wake.set()
            await self.changed.wait()

    def stop(self) -> None:
        self._task.cancel()

    def unwind(self) -> list[Message]:
        """Every message not written yet (the resend queue, then the queue), taken out in
        order for the producer to route again; the next batch here takes the sequence numbers
        the first of them had."""
        messages = [message for batch in self.resend for message in batch.messages] + list(self.queued)
        if self.resend:
            self.next_sequence = self.resend[0].base_sequence
        released = sum(batch.size for batch in self.resend) + self.queued_bytes
        self.resend.clear()
        self.queued.clear()
        self.queued_bytes = 0
        self.producer.buffered(-released)
        return messages

    async def _run(self) -> None:
        while True:
            await self.producer.routed()
            if not (self.queued or self.resend):
                try:
                    await asyncio.wait_for(self._wake.wait(), CHECKPOINT_POLL_S if self.written else None)
                except TimeoutError:
                    try:
                        await self._settle(None)  # an empty write: the latest C
                    except Exception:  # noqa: BLE001 - as below: the writer must go on
                        logger.exception("partition %d's writer could not learn C", self.index)
                    continue
            self._wake.clear()
            if not (self.queued or self.resend):
                continue
            self.busy = True
            batch = self.resend.popleft() if self.resend else self._build()
            try:
                await self._settle(batch)
            except Exception as error:  # noqa: BLE001 - a bug here must fail the batch, not stop the writer
                logger.exception("partition %d's writer failed a batch", self.index)
                self._failed(batch, error)
            finally:
                self.busy = False
                self.changed.set()

    def _build(self) -> _Batch:
        queued, limit = self.queued, self.producer.config.batch_bytes
        if self.queued_bytes <= limit:  # all of it fits: no message needs weighing again
            messages, size = list(queued), self.queued_bytes
            queued.clear()
        else:
            messages, size = [], 0
            while queued and (not messages or size < limit):
                message = queued.popleft()
                messages.append(message)
                size += len(message.value or b"") + len(message.key or b"") + 32
        self.queued_bytes -= size
        ids = self.producer.ids._replace(base_sequence=self.next_sequence)
        self.next_sequence = (self.next_sequence + len(messages)) % (SEQUENCE_MAX + 1)
        data = build_producer_batch(messages, ids)  # build_batch's bytes, in one pass (client/batching.py)
        return _Batch(messages, data, ids.base_sequence, size=size)

    async def _settle(self, batch: _Batch | None) -> None:
        """Write `batch` (None: nothing, only learn C) until the broker took it, refused it for
        good, or retry_timeout_s passed. After a reload the batch waits in the resend queue
        behind the written batches the reload lost."""
        deadline = time.monotonic() + self.producer.config.retry_timeout_s
        attempt = 0
        lost_track = not self.state.leader[0]  # no leader known, or the last try failed
        while True:
            try:
                if lost_track and await self._resynced(batch):
                    return None
                lost_track = False
                answer = await self._write(batch)
                if answer.error_code != ErrorCode.fenced_leader_epoch:
                    return self._answered(batch, answer)
                if self._reloaded(answer, batch):
                    return None
                if answer.version != self.producer.version:  # the topic grew: the ranges split
                    if batch is not None:
                        self.resend.appendleft(batch)
                    return self.producer.version_changed()
            except (Disconnected, BrokerError) as error:
                if (isinstance(error, BrokerError) and not error.retriable) or time.monotonic() >= deadline:
                    return self._failed(batch, error)
                await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
                attempt += 1
                lost_track = True

    async def _write(self, batch: _Batch | None) -> Written:
        """One WRITE; an answer with an error other than FENCED_LEADER_EPOCH is raised."""
        connection = await self.producer.brokers.at(*self.state.leader)
        correlation_id = connection.next_id()
        write = Write(self.producer.topic, self.index, self.producer.version, self.state.session,
                      b"" if batch is None else batch.data)
        frame = write_request(WRITE_TIMEOUT_MS, [write], correlation_id, self.producer.brokers.client_id)
        (answer,) = decode_write_answer(await connection.call(frame, correlation_id))[1]
        if answer.error_code and answer.error_code != ErrorCode.fenced_leader_epoch:
            raise BrokerError(answer.error_code, answer.error_message)
        return answer

    async def _resynced(self, batch: _Batch | None) -> bool:
        """Find the partition's leader again (LAYOUT) and learn its (V, S, C) with an empty
        write; True if that shows a reload (the batch is then queued for resending)."""
        layout = await self.producer.refresh()
        if self.index >= len(layout.partitions):
            raise BrokerError(ErrorCode.unknown_topic_or_partition, f"partition {self.index} of {self.producer.topic}")
        place = layout.partitions[self.index]
        self.state.leader = (place.leader_host, place.leader_port)
        answer = await self._write(None)
        return self._reloaded(answer, batch)

    def _reloaded(self, answer: Written, batch: _Batch | None) -> bool:
        """Take the partition's current (V, S, C). If S changed (the partition was reloaded),
        written batches below C were persisted; those at or above it were lost with the old
        session: they go to the front of the resend queue, then `batch`. True in that case."""
        first = self.state.session < 0
        reloaded = not first and answer.session != self.state.session
        self.state.session = answer.session
        if answer.version != self.producer.version:
            self.producer.version_changed()
        self._persisted_below(answer.checkpoint)
        if not reloaded:
            return False
        lost = list(self.written)
        self.written.clear()
        if batch is not None:
            lost.append(batch)
        self.resend.extendleft(reversed(lost))
        return True

    def _answered(self, batch: _Batch | None, answer: Written) -> None:
        if batch is None:
            self._reloaded(answer, None)
            return
        batch.offset = answer.base_offset
        written = self.producer.callbacks.on_written
        for i, message in enumerate(batch.messages):
            first_write = message.offset < 0  # a resend after a reload moves it, unannounced
            message.offset = batch.offset + i
            if first_write and written is not None:
                written(message)
        self.written.append(batch)
        self._persisted_below(answer.checkpoint)

    def _persisted_below(self, checkpoint: int) -> None:
        self.state.checkpoint = max(self.state.checkpoint, checkpoint) if checkpoint >= 0 else self.state.checkpoint
        done = self.producer.callbacks.on_persisted
        while self.written and self.written[0].end <= checkpoint:
            batch = self.written.popleft()
            self.producer.buffered(-batch.size)
            if done is not None:
                for message in batch.messages:
                    done(message)
        self.changed.set()

    def _failed(self, batch: _Batch | None, error: Exception) -> None:
        if batch is None:
            return
        self.next_sequence = batch.base_sequence  # it was not taken: the next batch takes its numbers
        self.producer.buffered(-batch.size)
        failed = self.producer.callbacks.on_failed
        for message in batch.messages:
            if failed is not None:
                failed(message, error)


def _log_reroute_failure(error: Exception) -> None:
    logger.warning("could not read the topic's new layout; the writers go on retrying: %s", error)


class Producer:
    """The synchronous face of AsyncProducer: `send` queues and returns at once (waiting only
    while the buffer is full); callbacks run on the producer's own thread."""

    def __init__(self, bootstrap: str, topic: str, config: ProducerConfig = ProducerConfig(), *,
                 on_written: Callable[[Message], None] | None = None,
                 on_persisted: Callable[[Message], None] | None = None,
                 on_failed: Callable[[Message, Exception], None] | None = None) -> None:
        self._loop = LoopThread("martlet-producer")
        self._producer = self._loop.run(_started(bootstrap, topic, config, on_written, on_persisted, on_failed))
        self._inbox: deque[Message] = deque()
        self._draining = False

    def send(self, value: bytes | None, key: bytes | None = None, *, headers: tuple[tuple[str, bytes | None], ...] = (),
             partition: int | None = None, sequence: int | None = None) -> Message:
        """Queue a message (made and routed on this thread; handed to the producer's loop in
        bulk, so a send costs microseconds, not a thread switch)."""
        if self._producer.full:
            self._loop.run(self._producer.room())
        message = self._producer.message(value, key, headers, partition, sequence, None)
        self._inbox.append(message)
        if not self._draining:
            self._draining = True
            self._loop.loop.call_soon_threadsafe(self._drain)
        return message

    def _drain(self) -> None:
        """On the loop: every message sent since the last drain into its partition's queue."""
        self._draining = False
        inbox = self._inbox
        while inbox:
            self._producer.enqueue(inbox.popleft())

    def checkpoint(self, partition: int) -> int:
        return self._producer.checkpoint(partition)

    def flush(self, timeout_s: float | None = None) -> None:
        self._loop.run(self._after_drain(self._producer.flush()), timeout_s)

    def wait_persisted(self, timeout_s: float | None = None) -> None:
        self._loop.run(self._after_drain(self._producer.wait_persisted()), timeout_s)

    def close(self, persisted: bool = False) -> None:
        self._loop.run(self._after_drain(self._producer.close(persisted)))
        self._loop.stop()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


    async def _after_drain(self, waiting: Coroutine[Any, Any, None]) -> None:
        self._drain()
        await waiting


class SimpleProducer:
    """Synchronous writes to one partition, as Talos' SimpleProducer: `put` returns once the
    messages are in the broker's memory, with their offsets; C (`checkpoint()`) says how much
    of the partition is persisted. The resend protocol runs underneath."""

    def __init__(self, bootstrap: str, topic: str, partition: int, config: ProducerConfig = ProducerConfig()) -> None:
        self.partition = partition
        self._failures: list[tuple[Message, Exception]] = []
        self._producer = Producer(bootstrap, topic, config, on_failed=lambda m, e: self._failures.append((m, e)))

    def put(self, values: list[bytes | None], keys: list[bytes | None] | None = None) -> list[Message]:
        """Write the messages; MartletError if any was refused (none of them is then known written)."""
        sent = [self._producer.send(value, (keys or [None] * len(values))[i], partition=self.partition)
                for i, value in enumerate(values)]
        self._producer.flush()
        failures, self._failures = self._failures, []
        if failures:
            raise MartletError(f"{len(failures)} of {len(values)} messages refused: {failures[0][1]}")
        return sent

    def checkpoint(self) -> int:
        return self._producer.checkpoint(self.partition)

    def close(self) -> None:
        self._producer.close()

    def __enter__(self) -> SimpleProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _started(bootstrap: str, topic: str, config: ProducerConfig, on_written: Callable[[Message], None] | None,
                   on_persisted: Callable[[Message], None] | None,
                   on_failed: Callable[[Message, Exception], None] | None) -> AsyncProducer:
    """An AsyncProducer made and started on the loop that will run it (its events belong there)."""
    producer = AsyncProducer(bootstrap, topic, config, on_written=on_written, on_persisted=on_persisted,
                             on_failed=on_failed)
    return await producer.start()
