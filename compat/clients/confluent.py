"""The confluent-kafka (librdkafka) driver: AdminClient, Producer and Consumer, in-process.

librdkafka runs its own threads, so group members keep heartbeating between polls; a
rebalance still needs the member to poll, which the scenarios do in turn. Every call is
bounded: futures by `result(timeout=...)`, flushes and polls by their timeouts.

With --security-config, every client gets the librdkafka settings tools/client_config.py makes
of the file (`security`), on top of the bootstrap servers and log level (`self._common`).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from .base import CONFIG_SOURCES, Record, Unsupported
from .errors import NONE, client_error, kafka_error_name
from .security import LoginRefused

ADMIN_TIMEOUT_S = 30.0
FLUSH_TIMEOUT_S = 30.0
METADATA_TIMEOUT_S = 10.0
TXN_TIMEOUT_S = 20.0
LOG_LEVEL = 3  # librdkafka logs errors only; warnings (retries, partition count changes) are noise here
ASSIGNORS = {"range": "range", "roundrobin": "roundrobin", "cooperative-sticky": "cooperative-sticky"}
ISOLATION_LEVELS = {"read_uncommitted": IsolationLevel.READ_UNCOMMITTED, "read_committed": IsolationLevel.READ_COMMITTED}
LOGIN_TIMEOUT_S = 15.0
LOGIN_CHECK_S = 0.5  # check_login asks for metadata in slices this long, serving librdkafka's errors between them
REFUSALS = {KafkaError._AUTHENTICATION: "login refused", KafkaError._SSL: "TLS handshake failed"}
UNAUTHORIZED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                          KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


def error_name(err: KafkaError | None) -> str:
    if err is None or err.code() == KafkaError.NO_ERROR:
        return NONE
    if err.code() > 0:
        return kafka_error_name(err.code())
    return client_error(err.name())


def exception_name(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return error_name(exc.args[0])
    return client_error(type(exc).__name__)


def check_login(bootstrap: str, security: Mapping[str, str], timeout_s: float = LOGIN_TIMEOUT_S) -> None:
    """LoginRefused, with the broker's reason, when `bootstrap` refuses a login (SASL) or a TLS
    handshake with librdkafka `security` settings; returns once metadata comes, or after
    `timeout_s` without an answer (the clients then report what they find). librdkafka itself
    retries a refused login until each request's timeout and then reports a transport failure:
    its error callback is what says "refused" at once."""
    refused: list[KafkaError] = []

    def note(error: KafkaError) -> None:
        if error.code() in REFUSALS:
            refused.append(error)

    # log_level 0: the refusal is reported here, once, not logged at every retry
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, **security, "log_level": 0, "error_cb": note}
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout_s
    while not refused:
        try:
            admin.list_topics(timeout=max(0.01, min(LOGIN_CHECK_S, deadline - time.monotonic())))
            return
        except KafkaException:
            admin.poll(0)  # serves error_cb
        if time.monotonic() >= deadline:
            return
    reason = re.sub(r"^\S+://\S+?: ", "", str(refused[0].str()))  # librdkafka's "sasl_ssl://host:port/id: "
    raise LoginRefused(f"{REFUSALS[refused[0].code()]} at {bootstrap}: {reason}")


def _record(msg: Message, group: bool = True) -> bool:
    """Whether a consumed message is a record. An error event is skipped (librdkafka retries
    what can be retried) unless the broker refused an authorization (an ACL of a secured
    endpoint): that is raised, since polling on would only wait out the scenario's deadline.
    Without a `group` of the scenario's, the group is only the reader's own (librdkafka wants
    one): a refusal to find its coordinator does not stop reading assigned partitions."""
    error = msg.error()
    if error is not None and error.code() in UNAUTHORIZED:
        if group or error.code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
            raise KafkaException(error)
    return error is None


def _consumed_headers(msg: Message) -> list[tuple[str, bytes | None]]:
    """A consumed message's headers are (name, bytes) pairs; the stub also allows a dict and str values."""
    return cast("list[tuple[str, bytes | None]]", msg.headers() or [])


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def consumed(msg: Message, with_topic: bool = False) -> Record:
    ts_type, ts = msg.timestamp()
    record: Record = {
        "partition": msg.partition(), "offset": msg.offset(), "key": _text(msg.key()),
        "value": _text(msg.value()),
        "headers": [[name, _text(value)] for name, value in _consumed_headers(msg)],
        "timestamp": ts,
        "timestamp_type": "LogAppendTime" if ts_type == TIMESTAMP_LOG_APPEND_TIME else "CreateTime",
    }
    if with_topic:
        record["topic"] = msg.topic()
    return record


def _produce_args(record: Record) -> dict[str, Any]:
    args: dict[str, Any] = {"key": _bytes(record.get("key")), "value": _bytes(record.get("value"))}
    headers = [(name, _bytes(value)) for name, value in record.get("headers") or []]
    if headers:
        args["headers"] = headers
    if record.get("partition") is not None:
        args["partition"] = record["partition"]
    if record.get("timestamp") is not None:
        args["timestamp"] = record["timestamp"]
    return args


def _start_offset(spec: str | int) -> int:
    return {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}.get(spec, spec)  # type: ignore[arg-type]


class _Member:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.revoked = 0

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.revoked += len(partitions)


class ConfluentDriver:
    name = "confluent"

    def __init__(self, bootstrap: str, security: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self._common: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": LOG_LEVEL, **(security or {})}
        self._admin = AdminClient(dict(self._common))
        self._members: dict[str, _Member] = {}
        self._transactions: dict[str, Producer] = {}

    # -- admin ----------------------------------------------------------------------------

    def _one(self, futures: dict[Any, Any]) -> tuple[str, Any]:
        [future] = futures.values()
        try:
            return NONE, future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            return exception_name(exc), None

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> str:
        new = NewTopic(topic, partitions, 1, config=dict(configs))
        error, _ = self._one(self._admin.create_topics(
            [new], operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S))
        if error == NONE:
            self._wait_partitions(topic, partitions)
        return error

    def _wait_partitions(self, topic: str, partitions: int) -> None:
        """Until metadata shows every partition with a leader (bounded; the scenario then
        sees whatever state the broker is in)."""
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while time.monotonic() < deadline:
            info = self._admin.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
            if info is not None and info.error is None and len(info.partitions) >= partitions and all(
                    p.leader >= 0 for p in info.partitions.values()):
                return
            time.sleep(0.05)

    def delete_topic(self, topic: str) -> str:
        error, _ = self._one(self._admin.delete_topics(
            [topic], operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S))
        return error

    def add_partitions(self, topic: str, total: int) -> str:
        error, _ = self._one(self._admin.create_partitions(
            [NewPartitions(topic, total)], operation_timeout=ADMIN_TIMEOUT_S, request_timeout=ADMIN_TIMEOUT_S))
        if error == NONE:
            self._wait_partitions(topic, total)
        return error

    def describe_topic(self, topic: str) -> dict[str, Any]:
        futures = self._admin.describe_topics(TopicCollection([topic]), request_timeout=ADMIN_TIMEOUT_S)
        error, description = self._one(futures)
        if error != NONE:
            return {"error": error, "partitions": 0, "topic_id": None, "configs": {}}
        error, configs = self._one(self._admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, topic)], request_timeout=ADMIN_TIMEOUT_S))
        overridden = {name: entry.value for name, entry in (configs or {}).items()
                      if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        topic_id = description.topic_id
        return {"error": error, "partitions": len(description.partitions),
                "topic_id": None if topic_id is None else str(topic_id), "configs": overridden}

    def alter_topic_config(self, topic: str, name: str, value: str) -> str:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        error, _ = self._one(self._admin.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S))
        return error

    def describe_broker(self) -> dict[str, Any]:
        brokers = self._admin.list_topics(timeout=METADATA_TIMEOUT_S).brokers
        broker = min(brokers)
        error, configs = self._one(self._admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, str(broker))], request_timeout=ADMIN_TIMEOUT_S))
        return {"error": error, "broker": broker, "configs": {
            name: [entry.value, CONFIG_SOURCES.get(entry.source, "UNKNOWN"), entry.is_read_only]
            for name, entry in (configs or {}).items()}}

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict[str, Any]:
        error, deleted = self._one(self._admin.delete_records(
            [TopicPartition(topic, partition, before_offset)], request_timeout=ADMIN_TIMEOUT_S,
            operation_timeout=ADMIN_TIMEOUT_S))
        return {"error": error, "low_watermark": -1 if deleted is None else deleted.low_watermark}

    def api_versions(self) -> dict[str, list[int]]:
        raise Unsupported("confluent-kafka exposes no ApiVersions answer")

    # -- produce and consume --------------------------------------------------------------

    def produce(self, topic: str, records: list[Record], codec: str = "none", acks: str = "all",
                idempotent: bool = False, max_request_bytes: int | None = None) -> list[dict[str, Any]]:
        conf: dict[str, Any] = {
            **self._common, "acks": acks, "compression.type": codec, "enable.idempotence": idempotent, "linger.ms": 5,
            "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
        }
        if max_request_bytes is not None:
            conf["message.max.bytes"] = max_request_bytes
        answers: list[dict[str, Any]] = [
            {"error": client_error("NOT_DELIVERED"), "partition": -1, "offset": -1} for _ in records]
        producer = Producer(conf)

        def on_delivery(index: int, err: KafkaError | None, msg: Message) -> None:
            answers[index] = {"error": error_name(err), "partition": msg.partition(),
                              "offset": msg.offset() if err is None else -1}

        for index, record in enumerate(records):
            try:
                producer.produce(topic, on_delivery=partial(on_delivery, index),
                                 **_produce_args(record))
            except KafkaException as exc:
                answers[index] = {"error": exception_name(exc), "partition": -1, "offset": -1}
            producer.poll(0)
        producer.flush(FLUSH_TIMEOUT_S)
        producer.close()
        return answers

    def _partitions(self, topic: str) -> list[int]:
        info = self._admin.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        return sorted(info.partitions) if info is not None and info.error is None else []

    def _reader(self, isolation: str, group: str | None = None) -> Consumer:
        """A consumer for assigned partitions; without `group` it never commits."""
        return Consumer({
            **self._common, "group.id": group or f"compat-assign-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "enable.auto.offset.store": group is not None, "isolation.level": isolation,
            "enable.partition.eof": False,
        })

    def consume(self, topic: str, partitions: list[int] | None, from_offset: str | int, max_records: int,
                timeout_s: float, isolation: str = "read_uncommitted") -> list[Record]:
        consumer = self._reader(isolation)
        try:
            chosen = self._partitions(topic) if partitions is None else partitions
            consumer.assign([TopicPartition(topic, p, _start_offset(from_offset)) for p in chosen])
            got: list[Record] = []
            deadline = time.monotonic() + timeout_s
            while len(got) < max_records and time.monotonic() < deadline:
                left = max(0.0, deadline - time.monotonic())
                for msg in consumer.consume(num_messages=max_records - len(got), timeout=min(0.5, left)):
                    if _record(msg, group=False):
                        got.append(consumed(msg))
            return got
        finally:
            consumer.close()

    def consume_position(self, topic: str, partition: int, from_offset: str | int, until_offset: int,
                         timeout_s: float, isolation: str = "read_uncommitted",
                         group: str | None = None) -> dict[str, Any]:
        consumer = self._reader(isolation, group)
        tp = TopicPartition(topic, partition)
        try:
            consumer.assign([TopicPartition(topic, partition, _start_offset(from_offset))])
            got: list[Record] = []
            position = -1
            deadline = time.monotonic() + timeout_s
            while position < until_offset and time.monotonic() < deadline:
                got += [consumed(msg) for msg in consumer.consume(num_messages=100, timeout=0.2)
                        if _record(msg, group=group is not None)]
                position = consumer.position([tp])[0].offset
            commit = None
            if group is not None:
                try:
                    consumer.commit(asynchronous=False)
                    commit = NONE
                except KafkaException as exc:
                    commit = exception_name(exc)
            return {"records": got, "position": position, "commit": commit}
        finally:
            consumer.close()

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation: str = "read_uncommitted") -> dict[str, Any]:
        specs = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest,
                 "max_timestamp": OffsetSpec.max_timestamp}
        offset_spec = specs[spec]() if isinstance(spec, str) else OffsetSpec.for_timestamp(spec)
        error, info = self._one(self._admin.list_offsets(
            {TopicPartition(topic, partition): offset_spec}, isolation_level=ISOLATION_LEVELS[isolation],
            request_timeout=ADMIN_TIMEOUT_S))
        if info is None:
            return {"error": error, "offset": -1, "timestamp": -1}
        return {"error": error, "offset": info.offset, "timestamp": info.timestamp}

    # -- consumer groups ------------------------------------------------------------------

    def member_start(self, handle: str, group: str, topics: list[str], assignor: str | None = None,
                     instance_id: str | None = None, session_timeout_ms: int = 10_000,
                     protocol: str = "classic") -> None:
        conf: dict[str, Any] = {
            **self._common, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": False, "group.protocol": protocol,
        }
        if protocol == "classic":
            conf["session.timeout.ms"] = session_timeout_ms
            conf["heartbeat.interval.ms"] = min(1000, session_timeout_ms // 3)
            if assignor is not None:
                if assignor not in ASSIGNORS:
                    raise Unsupported(f"librdkafka has no {assignor!r} assignor")
                conf["partition.assignment.strategy"] = ASSIGNORS[assignor]
        elif assignor is not None:
            raise Unsupported("with group.protocol=consumer the broker picks the assignor")
        if instance_id is not None:
            conf["group.instance.id"] = instance_id
        member = _Member(Consumer(conf))
        member.consumer.subscribe(topics, on_revoke=member.on_revoke)
        self._members[handle] = member

    def member_poll(self, handle: str, timeout_s: float) -> dict[str, Any]:
        member = self._members[handle]
        records = [consumed(msg, with_topic=True)
                   for msg in member.consumer.consume(num_messages=1000, timeout=timeout_s) if _record(msg)]
        assignment = sorted([tp.topic, tp.partition] for tp in member.consumer.assignment())
        return {"records": records, "assignment": assignment, "revoked": member.revoked}

    def member_commit(self, handle: str) -> str:
        try:
            self._members[handle].consumer.commit(asynchronous=False)
        except KafkaException as exc:
            return exception_name(exc)
        return NONE

    def member_stop(self, handle: str) -> None:
        self._members.pop(handle).consumer.close()

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[str, int]:
        consumer = Consumer({**self._common, "group.id": group, "enable.auto.commit": False})
        try:
            answer = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=ADMIN_TIMEOUT_S)
            return {str(tp.partition): tp.offset if tp.offset >= 0 else -1 for tp in answer}
        finally:
            consumer.close()

    # -- transactions ---------------------------------------------------------------------

    def transaction(self, topic: str, records: list[Record], transactional_id: str, commit: bool) -> str:
        errors: list[str] = []
        producer = self._transactional(transactional_id)

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(error_name(err))

        try:
            producer.init_transactions(TXN_TIMEOUT_S)
            producer.begin_transaction()
            for record in records:
                producer.produce(topic, on_delivery=on_delivery, **_produce_args(record))
            producer.flush(FLUSH_TIMEOUT_S)
            if errors:
                return errors[0]
            _end(producer, commit)
        except KafkaException as exc:
            return exception_name(exc)
        finally:
            producer.flush(1.0)
            producer.close()
        return NONE

    def _transactional(self, transactional_id: str) -> Producer:
        return Producer({**self._common, "transactional.id": transactional_id,
                         "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000), "linger.ms": 5})

    def transaction_begin(self, handle: str, transactional_id: str) -> str:
        assert handle not in self._transactions, f"transaction {handle} is open already"
        producer = self._transactional(transactional_id)
        self._transactions[handle] = producer
        try:
            producer.init_transactions(TXN_TIMEOUT_S)
            producer.begin_transaction()
        except KafkaException as exc:
            return exception_name(exc)
        return NONE

    def transaction_send(self, handle: str, topic: str, records: list[Record]) -> list[dict[str, Any]]:
        producer = self._transactions[handle]
        answers: list[dict[str, Any]] = [
            {"error": client_error("NOT_DELIVERED"), "partition": -1, "offset": -1} for _ in records]

        def on_delivery(index: int, err: KafkaError | None, msg: Message) -> None:
            answers[index] = {"error": error_name(err), "partition": msg.partition(),
                              "offset": msg.offset() if err is None else -1}

        for index, record in enumerate(records):
            try:
                producer.produce(topic, on_delivery=partial(on_delivery, index), **_produce_args(record))
            except KafkaException as exc:
                answers[index] = {"error": exception_name(exc), "partition": -1, "offset": -1}
        producer.flush(FLUSH_TIMEOUT_S)
        return answers

    def transaction_end(self, handle: str, commit: bool) -> str:
        producer = self._transactions.pop(handle)
        try:
            _end(producer, commit)
        except KafkaException as exc:
            return exception_name(exc)
        finally:
            producer.flush(1.0)
            producer.close()
        return NONE

    def close(self) -> None:
        for producer in self._transactions.values():
            producer.close()
        self._transactions.clear()
        for handle in list(self._members):
            try:
                self.member_stop(handle)
            except KafkaException:
                pass


def _end(producer: Producer, commit: bool) -> None:
    if commit:
        producer.commit_transaction(TXN_TIMEOUT_S)
    else:
        producer.abort_transaction(TXN_TIMEOUT_S)
