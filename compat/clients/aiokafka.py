"""The aiokafka driver: AIOKafkaAdminClient, AIOKafkaProducer and AIOKafkaConsumer on an
event loop that runs on its own thread, so group members keep heartbeating between the
scenario's polls. Every call waits on the loop with a timeout.
With --security-config, every client gets the keyword arguments of security.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import aiokafka.errors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.structs import TopicPartition

from .base import CONFIG_SOURCES, Record, Unsupported
from .errors import NONE, client_error, errno_name, kafka_error_name

REQUEST_TIMEOUT_MS = 30_000
CALL_TIMEOUT_S = 60.0
FLUSH_TIMEOUT_S = 30.0
TXN_TIMEOUT_S = 20.0
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs v1+ config_source
ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
T = TypeVar("T")


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _name(exc: BaseException) -> str:
    if isinstance(exc, (aiokafka.errors.KafkaError, asyncio.TimeoutError)):
        return errno_name(exc)
    return client_error(type(exc).__name__)


def consumed(r: Any, with_topic: bool = False) -> Record:
    record: Record = {
        "partition": r.partition, "offset": r.offset, "key": _text(r.key), "value": _text(r.value),
        "headers": [[name, _text(value)] for name, value in (r.headers or ())],
        "timestamp": r.timestamp, "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
    }
    if with_topic:
        record["topic"] = r.topic
    return record


def _send_args(record: Record) -> dict[str, Any]:
    return {"key": _bytes(record.get("key")), "value": _bytes(record.get("value")),
            "headers": [(name, _bytes(value)) for name, value in record.get("headers") or []],
            "partition": record.get("partition"), "timestamp_ms": record.get("timestamp")}


class _Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked = 0

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.revoked += len(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        pass


class AiokafkaDriver:
    name = "aiokafka"

    def __init__(self, bootstrap: str, security: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        # every client's: the endpoint and, with --security-config, security.keyword_arguments
        self._connect: dict[str, Any] = {"bootstrap_servers": bootstrap, **(security or {})}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="aiokafka-driver", daemon=True)
        self._thread.start()
        self._admin = self._new(AIOKafkaAdminClient, **self._connect, request_timeout_ms=REQUEST_TIMEOUT_MS)
        self._run(self._admin.start())
        self._members: dict[str, tuple[AIOKafkaConsumer, _Listener]] = {}
        self._transactions: dict[str, AIOKafkaProducer] = {}

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float = CALL_TIMEOUT_S) -> T:
        return asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout_s), self._loop).result()

    def _new(self, cls: type[T], **kwargs: Any) -> T:
        """aiokafka objects must be made on their event loop."""
        async def make() -> T:
            return cls(**kwargs)

        return self._run(make())

    def _call(self, coro: Coroutine[Any, Any, Any]) -> tuple[str, Any]:
        try:
            return NONE, self._run(coro)
        except (TimeoutError, aiokafka.errors.KafkaError) as exc:
            return _name(exc), None

    # -- admin ----------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> str:
        new = NewTopic(topic, partitions, 1, topic_configs=dict(configs))
        error, answer = self._call(self._admin.create_topics([new], timeout_ms=REQUEST_TIMEOUT_MS))
        if error == NONE and answer.topic_errors[0][1]:
            return kafka_error_name(answer.topic_errors[0][1])
        if error == NONE:
            self._run(self._wait_leaders(topic, partitions))
        return error

    async def _wait_leaders(self, topic: str, partitions: int, timeout_s: float = 10.0) -> None:
        """Bounded wait until metadata shows every partition with a leader."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            [described] = await self._admin.describe_topics([topic])
            if described["error_code"] == 0 and len(described["partitions"]) >= partitions and all(
                    p["leader"] >= 0 for p in described["partitions"]):
                return
            await asyncio.sleep(0.05)

    def delete_topic(self, topic: str) -> str:
        error, answer = self._call(self._admin.delete_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS))
        if error == NONE and answer.topic_error_codes[0][1]:
            return kafka_error_name(answer.topic_error_codes[0][1])
        return error

    def add_partitions(self, topic: str, total: int) -> str:
        error, _ = self._call(self._admin.create_partitions({topic: NewPartitions(total)},
                                                            timeout_ms=REQUEST_TIMEOUT_MS))
        if error == NONE:
            self._run(self._wait_leaders(topic, total))
        return error

    def describe_topic(self, topic: str) -> dict[str, Any]:
        error, answer = self._call(self._admin.describe_topics([topic]))
        if error == NONE and answer[0]["error_code"]:
            error = kafka_error_name(answer[0]["error_code"])
        if error != NONE:
            return {"error": error, "partitions": 0, "topic_id": None, "configs": {}}
        error, responses = self._call(self._admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
        overridden: dict[str, str] = {}
        for response in responses or []:
            for resource in response.resources:
                if resource[0]:
                    error = kafka_error_name(resource[0])
                for entry in resource[4]:
                    if entry[3] == DYNAMIC_TOPIC_CONFIG:  # name, value, read_only, source, ...
                        overridden[entry[0]] = entry[1]
        return {"error": error, "partitions": len(answer[0]["partitions"]), "topic_id": None,
                "configs": overridden}

    def alter_topic_config(self, topic: str, name: str, value: str) -> str:
        # AlterConfigs (not incremental): the topic's other overrides are reset, as the
        # protocol says; scenarios alter the one override they set.
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: value})
        error, responses = self._call(self._admin.alter_configs([resource]))
        for response in responses or []:
            for resource_answer in response.resources:
                if resource_answer[0]:
                    return kafka_error_name(resource_answer[0])
        return error

    def describe_broker(self) -> dict[str, Any]:
        error, cluster = self._call(self._admin.describe_cluster())
        if error != NONE:
            return {"error": error, "broker": -1, "configs": {}}
        broker = min(node["node_id"] for node in cluster["brokers"])
        error, responses = self._call(self._admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(broker))]))
        configs: dict[str, list[Any]] = {}
        for response in responses or []:
            for resource in response.resources:
                if resource[0]:
                    error = kafka_error_name(resource[0])
                for entry in resource[4]:  # name, value, read_only, source, ...
                    configs[entry[0]] = [entry[1], CONFIG_SOURCES.get(entry[3], "UNKNOWN"), entry[2]]
        return {"error": error, "broker": broker, "configs": configs}

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict[str, Any]:
        tp = TopicPartition(topic, partition)
        error, answer = self._call(self._admin.delete_records({tp: RecordsToDelete(before_offset)},
                                                              timeout_ms=REQUEST_TIMEOUT_MS))
        return {"error": error, "low_watermark": -1 if answer is None else answer[tp]}

    def api_versions(self) -> dict[str, list[int]]:
        raise Unsupported("aiokafka exposes no ApiVersions answer")

    # -- produce and consume --------------------------------------------------------------

    def produce(self, topic: str, records: list[Record], codec: str = "none", acks: str = "all",
                idempotent: bool = False, max_request_bytes: int | None = None) -> list[dict[str, Any]]:
        producer = self._new(
            AIOKafkaProducer, **self._connect, compression_type=None if codec == "none" else codec,
            acks="all" if acks == "all" else int(acks), enable_idempotence=idempotent, linger_ms=5,
            max_request_size=max_request_bytes or 1048576, request_timeout_ms=REQUEST_TIMEOUT_MS)
        return self._run(self._produce(producer, topic, records))

    async def _produce(self, producer: AIOKafkaProducer, topic: str, records: list[Record]) -> list[dict[str, Any]]:
        await producer.start()
        try:
            futures: list[Any] = []
            for record in records:
                try:
                    futures.append(await producer.send(topic, **_send_args(record)))
                except (aiokafka.errors.KafkaError, AssertionError, ValueError, TypeError) as exc:
                    futures.append(exc)
            await asyncio.wait_for(producer.flush(), FLUSH_TIMEOUT_S)
            return [await self._answer(f) for f in futures]
        finally:
            await producer.stop()

    @staticmethod
    async def _answer(future: Any) -> dict[str, Any]:
        if isinstance(future, BaseException):
            return {"error": _name(future), "partition": -1, "offset": -1}
        try:
            meta = await asyncio.wait_for(future, FLUSH_TIMEOUT_S)
        except (TimeoutError, aiokafka.errors.KafkaError) as exc:
            return {"error": _name(exc), "partition": -1, "offset": -1}
        return {"error": NONE, "partition": meta.partition, "offset": meta.offset}

    def consume(self, topic: str, partitions: list[int] | None, from_offset: str | int, max_records: int,
                timeout_s: float, isolation: str = "read_uncommitted") -> list[Record]:
        consumer = self._new(AIOKafkaConsumer, **self._connect, group_id=None, enable_auto_commit=False,
                                    isolation_level=isolation, request_timeout_ms=REQUEST_TIMEOUT_MS)
        return self._run(self._consume(consumer, topic, partitions, from_offset, max_records, timeout_s),
                         timeout_s + CALL_TIMEOUT_S)

    async def _consume(self, consumer: AIOKafkaConsumer, topic: str, partitions: list[int] | None,
                       from_offset: str | int, max_records: int, timeout_s: float) -> list[Record]:
        await consumer.start()
        try:
            chosen = sorted(consumer.partitions_for_topic(topic) or []) if partitions is None else partitions
            tps = [TopicPartition(topic, p) for p in chosen]
            consumer.assign(tps)
            if from_offset == "earliest":
                await consumer.seek_to_beginning(*tps)
            elif from_offset == "latest":
                await consumer.seek_to_end(*tps)
            else:
                for tp in tps:
                    consumer.seek(tp, int(from_offset))
            got: list[Record] = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while len(got) < max_records and loop.time() < deadline:
                left_ms = int(max(0.0, deadline - loop.time()) * 1000)
                batches = await consumer.getmany(timeout_ms=min(500, left_ms), max_records=max_records - len(got))
                got += [consumed(r) for batch in batches.values() for r in batch]
            return got
        finally:
            await consumer.stop()

    def consume_position(self, topic: str, partition: int, from_offset: str | int, until_offset: int,
                         timeout_s: float, isolation: str = "read_uncommitted",
                         group: str | None = None) -> dict[str, Any]:
        consumer = self._new(AIOKafkaConsumer, **self._connect, group_id=group,
                             enable_auto_commit=False, isolation_level=isolation,
                             request_timeout_ms=REQUEST_TIMEOUT_MS)
        return self._run(self._consume_position(consumer, TopicPartition(topic, partition), from_offset,
                                                until_offset, timeout_s, group is not None),
                         timeout_s + CALL_TIMEOUT_S)

    async def _consume_position(self, consumer: AIOKafkaConsumer, tp: TopicPartition, from_offset: str | int,
                                until_offset: int, timeout_s: float, commits: bool) -> dict[str, Any]:
        await consumer.start()
        try:
            consumer.assign([tp])
            if from_offset == "earliest":
                await consumer.seek_to_beginning(tp)
            elif from_offset == "latest":
                await consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, int(from_offset))
            got: list[Record] = []
            position = -1
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while position < until_offset and loop.time() < deadline:
                batches = await consumer.getmany(tp, timeout_ms=200)
                got += [consumed(r) for batch in batches.values() for r in batch]
                position = await consumer.position(tp)
            commit = None
            if commits:
                try:
                    await consumer.commit()
                    commit = NONE
                except aiokafka.errors.KafkaError as exc:
                    commit = _name(exc)
            return {"records": got, "position": position, "commit": commit}
        finally:
            await consumer.stop()

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation: str = "read_uncommitted") -> dict[str, Any]:
        if spec == "max_timestamp":
            raise Unsupported("aiokafka sends ListOffsets v0-3, which has no max-timestamp query")
        try:
            return self._run(self._list_offsets(TopicPartition(topic, partition), spec, isolation))
        except (TimeoutError, aiokafka.errors.KafkaError) as exc:
            return {"error": _name(exc), "offset": -1, "timestamp": -1}

    async def _list_offsets(self, tp: TopicPartition, spec: str | int, isolation: str) -> dict[str, Any]:
        # The consumer waits for metadata of an unknown topic or partition until its request
        # timeout; ask the metadata first and answer with what it says.
        [described] = await self._admin.describe_topics([tp.topic])
        if described["error_code"]:
            return {"error": kafka_error_name(described["error_code"]), "offset": -1, "timestamp": -1}
        if tp.partition not in {p["partition"] for p in described["partitions"]}:
            return {"error": client_error("partition not in metadata"), "offset": -1, "timestamp": -1}
        # The consumer's isolation level is the one its ListOffsets requests carry.
        consumer = AIOKafkaConsumer(**self._connect, group_id=None, enable_auto_commit=False,
                                    isolation_level=isolation, request_timeout_ms=REQUEST_TIMEOUT_MS)
        await consumer.start()
        try:
            if spec == "earliest":
                return {"error": NONE, "offset": (await consumer.beginning_offsets([tp]))[tp], "timestamp": -1}
            if spec == "latest":
                return {"error": NONE, "offset": (await consumer.end_offsets([tp]))[tp], "timestamp": -1}
            found = (await consumer.offsets_for_times({tp: int(spec)}))[tp]
            if found is None:
                return {"error": NONE, "offset": -1, "timestamp": -1}
            return {"error": NONE, "offset": found.offset, "timestamp": found.timestamp}
        finally:
            await consumer.stop()

    # -- consumer groups ------------------------------------------------------------------

    def member_start(self, handle: str, group: str, topics: list[str], assignor: str | None = None,
                     instance_id: str | None = None, session_timeout_ms: int = 10_000,
                     protocol: str = "classic") -> None:
        if protocol != "classic":
            raise Unsupported("aiokafka has no KIP-848 consumer protocol")
        extra: dict[str, Any] = {}
        if assignor is not None:
            if assignor not in ASSIGNORS:
                raise Unsupported(f"aiokafka has no {assignor!r} assignor")
            extra["partition_assignment_strategy"] = (ASSIGNORS[assignor],)
        listener = _Listener()
        self._members[handle] = (self._run(self._member_start(
            group, topics, instance_id, session_timeout_ms, listener, extra)), listener)

    async def _member_start(self, group: str, topics: list[str], instance_id: str | None, session_timeout_ms: int,
                            listener: _Listener, extra: dict[str, Any]) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            **self._connect, group_id=group, group_instance_id=instance_id,
            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=min(1000, session_timeout_ms // 3), request_timeout_ms=REQUEST_TIMEOUT_MS,
            **extra)
        consumer.subscribe(topics, listener=listener)
        await consumer.start()
        return consumer

    def member_poll(self, handle: str, timeout_s: float) -> dict[str, Any]:
        consumer, listener = self._members[handle]
        batches = self._run(consumer.getmany(timeout_ms=int(timeout_s * 1000)), timeout_s + CALL_TIMEOUT_S)
        records = [consumed(r, with_topic=True) for batch in batches.values() for r in batch]
        assignment = sorted([tp.topic, tp.partition] for tp in consumer.assignment())
        return {"records": records, "assignment": assignment, "revoked": listener.revoked}

    def member_commit(self, handle: str) -> str:
        return self._call(self._members[handle][0].commit())[0]

    def member_stop(self, handle: str) -> None:
        self._run(self._members.pop(handle)[0].stop())

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[str, int]:
        tps = [TopicPartition(topic, p) for p in partitions]
        offsets = self._run(self._admin.list_consumer_group_offsets(group, partitions=tps))
        return {str(tp.partition): (offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0 else -1)
                for tp in tps}

    # -- transactions ---------------------------------------------------------------------

    def transaction(self, topic: str, records: list[Record], transactional_id: str, commit: bool) -> str:
        producer = self._new(AIOKafkaProducer, **self._connect, transactional_id=transactional_id,
                                    request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            return self._run(self._transaction(producer, topic, records, commit), TXN_TIMEOUT_S)
        except (TimeoutError, aiokafka.errors.KafkaError) as exc:
            self._run(producer.stop(), 10.0)
            return _name(exc)

    async def _transaction(self, producer: AIOKafkaProducer, topic: str, records: list[Record], commit: bool) -> str:
        await producer.start()  # InitProducerId with the transactional id
        try:
            await producer.begin_transaction()
            futures = [await producer.send(topic, **_send_args(record)) for record in records]
            await asyncio.gather(*futures)
            await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()
        return NONE

    def transaction_begin(self, handle: str, transactional_id: str) -> str:
        assert handle not in self._transactions, f"transaction {handle} is open already"
        producer = self._new(AIOKafkaProducer, **self._connect, transactional_id=transactional_id,
                             request_timeout_ms=REQUEST_TIMEOUT_MS)
        self._transactions[handle] = producer
        return self._call(self._transaction_begin(producer))[0]

    @staticmethod
    async def _transaction_begin(producer: AIOKafkaProducer) -> None:
        await producer.start()  # InitProducerId with the transactional id
        await producer.begin_transaction()

    def transaction_send(self, handle: str, topic: str, records: list[Record]) -> list[dict[str, Any]]:
        return self._run(self._transaction_send(self._transactions[handle], topic, records))

    async def _transaction_send(self, producer: AIOKafkaProducer, topic: str,
                                records: list[Record]) -> list[dict[str, Any]]:
        futures: list[Any] = []
        for record in records:
            try:
                futures.append(await producer.send(topic, **_send_args(record)))
            except aiokafka.errors.KafkaError as exc:
                futures.append(exc)
        await asyncio.wait_for(producer.flush(), FLUSH_TIMEOUT_S)
        return [await self._answer(f) for f in futures]

    def transaction_end(self, handle: str, commit: bool) -> str:
        producer = self._transactions.pop(handle)
        try:
            return self._call(self._transaction_end(producer, commit))[0]
        finally:
            self._run(producer.stop(), 10.0)

    @staticmethod
    async def _transaction_end(producer: AIOKafkaProducer, commit: bool) -> None:
        await (producer.commit_transaction() if commit else producer.abort_transaction())

    def close(self) -> None:
        try:
            for producer in self._transactions.values():
                self._run(producer.stop(), 10.0)
            self._transactions.clear()
            for handle in list(self._members):
                self.member_stop(handle)
            self._run(self._admin.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
            if not self._thread.is_alive():
                self._loop.close()


