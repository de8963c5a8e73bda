"""The kafka-python driver: KafkaAdminClient, KafkaProducer and KafkaConsumer, in-process.

kafka-python heartbeats from its own thread, so group members stay alive between polls.
Every call is bounded by a timeout argument or the clients' request timeouts.
With --security-config, every client gets the keyword arguments of security.py.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from queue import Empty, Queue
from typing import Any

# kafka-python 3.0.12 reads its protocol schemas with importlib.resources.read_text/open_text,
# deprecated since Python 3.11; it warns at import time only.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)
    import kafka
    import kafka.errors
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, OffsetSpec
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.structs import TopicPartition

from .base import Record, Unsupported
from .errors import NONE, client_error, errno_name, kafka_error_name

REQUEST_TIMEOUT_MS = 30_000
FLUSH_TIMEOUT_S = 30.0
TXN_TIMEOUT_S = 20.0
ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
             "cooperative-sticky": CooperativeStickyAssignor}
OFFSET_SPECS = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST,
                "max_timestamp": OffsetSpec.MAX_TIMESTAMP}
ISOLATION_LEVELS = {"read_uncommitted": kafka.IsolationLevel.READ_UNCOMMITTED,
                    "read_committed": kafka.IsolationLevel.READ_COMMITTED}


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def consumed(tp: TopicPartition, r: Any, with_topic: bool = False) -> Record:
    record: Record = {
        "partition": tp.partition, "offset": r.offset, "key": _text(r.key), "value": _text(r.value),
        "headers": [[name, _text(value)] for name, value in (r.headers or [])],
        "timestamp": r.timestamp, "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
    }
    if with_topic:
        record["topic"] = tp.topic
    return record


def _send_args(record: Record) -> dict[str, Any]:
    if any(value is None for _, value in record.get("headers") or []):
        raise Unsupported("kafka-python refuses a header with a null value")
    return {"key": _bytes(record.get("key")), "value": _bytes(record.get("value")),
            "headers": [(name, _bytes(value)) for name, value in record.get("headers") or []],
            "partition": record.get("partition"), "timestamp_ms": record.get("timestamp")}


class _Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked = 0

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.revoked += len(revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        pass


class _Member:
    """A group member polled continuously on its own thread, as an application would, so
    every member rejoins a rebalance promptly; the driver reads what it buffered. The
    consumer is used from that thread only (KafkaConsumer is not thread-safe): commits and
    close go through `call`."""

    # kafka-python 3.0.12: with short polls, a member whose join completes after a poll gave
    # up may never restart heartbeats and is expelled (seen against Apache Kafka too);
    # one-second polls avoid it.
    POLL_MS = 1000

    def __init__(self, consumer: kafka.KafkaConsumer, listener: _Listener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.records: list[Record] = []
        self.assignment: list[list[Any]] = []
        self.error: BaseException | None = None
        self._commands: Queue[tuple[Callable[[], Any], Future[Any]]] = Queue()
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-python-member", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._serve_commands()
                batches = self.consumer.poll(timeout_ms=self.POLL_MS)
                with self._ready:
                    self.records += [consumed(tp, r, with_topic=True) for tp, batch in batches.items() for r in batch]
                    self.assignment = sorted([tp.topic, tp.partition] for tp in self.consumer.assignment())
                    self._ready.notify_all()
        except BaseException as exc:  # reported by the next poll
            self.error = exc
        finally:
            self._serve_commands()
            self.consumer.close()

    def _serve_commands(self) -> None:
        while True:
            try:
                fn, future = self._commands.get_nowait()
            except Empty:
                return
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

    def call(self, fn: Callable[[], Any], timeout_s: float = 60.0) -> Any:
        future: Future[Any] = Future()
        self._commands.put((fn, future))
        return future.result(timeout=timeout_s)

    def take(self, timeout_s: float) -> dict[str, Any]:
        with self._ready:
            self._ready.wait_for(lambda: bool(self.records) or self.error is not None, timeout=timeout_s)
            records, self.records = self.records, []
            if self.error is not None:
                raise self.error
            return {"records": records, "assignment": self.assignment, "revoked": self.listener.revoked}

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)


class KafkaPythonDriver:
    name = "kafka-python"

    def __init__(self, bootstrap: str, security: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        # every client's: the endpoint and, with --security-config, security.keyword_arguments
        self._connect: dict[str, Any] = {"bootstrap_servers": bootstrap, **(security or {})}
        self._admin = KafkaAdminClient(**self._connect, request_timeout_ms=REQUEST_TIMEOUT_MS)
        self._members: dict[str, _Member] = {}
        self._transactions: dict[str, kafka.KafkaProducer] = {}

    # -- admin ----------------------------------------------------------------------------

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
        try:
            return NONE, fn(*args, **kwargs)
        except kafka.errors.KafkaError as exc:
            return errno_name(exc), None

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> str:
        spec = {topic: {"num_partitions": partitions, "replication_factor": 1, "configs": dict(configs)}}
        error, _ = self._call(self._admin.create_topics, spec, timeout_ms=REQUEST_TIMEOUT_MS,
                              wait_for_metadata=True)
        return error

    def delete_topic(self, topic: str) -> str:
        return self._call(self._admin.delete_topics, [topic], timeout_ms=REQUEST_TIMEOUT_MS)[0]

    def add_partitions(self, topic: str, total: int) -> str:
        return self._call(self._admin.create_partitions, {topic: total}, timeout_ms=REQUEST_TIMEOUT_MS)[0]

    def describe_topic(self, topic: str) -> dict[str, Any]:
        error, answer = self._call(self._admin.describe_topics, [topic])
        if error == NONE and answer[0]["error_code"]:
            error = errno_name(kafka.errors.for_code(answer[0]["error_code"])())
        if error != NONE:
            return {"error": error, "partitions": 0, "topic_id": None, "configs": {}}
        described = answer[0]
        error, configs = self._call(self._admin.describe_configs,
                                    [ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = (configs or {}).get("topic", {}).get(topic, {})
        overridden = {name: entry["value"] for name, entry in entries.items()
                      if entry.get("config_source") == "DYNAMIC_TOPIC_CONFIG"}
        topic_id = described.get("topic_id")
        return {"error": error, "partitions": len(described["partitions"]),
                "topic_id": None if topic_id in (None, "00000000-0000-0000-0000-000000000000") else str(topic_id),
                "configs": overridden}

    def alter_topic_config(self, topic: str, name: str, value: str) -> str:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={name: value})
        error, answer = self._call(self._admin.alter_configs, [resource])
        result = str(answer["topic"][topic]) if error == NONE else "OK"
        refused = re.match(r"\[Error (\d+)\]", result)  # kafka-python 2.3: "[Error 40] InvalidConfigurationError: ..."
        if refused:
            return kafka_error_name(int(refused.group(1)))
        return error if result == "OK" else result

    def describe_broker(self) -> dict[str, Any]:
        error, cluster = self._call(self._admin.describe_cluster)
        if error != NONE:
            return {"error": error, "broker": -1, "configs": {}}
        broker = min(node["broker_id"] for node in cluster["brokers"])  # DescribeCluster's name for it
        error, answer = self._call(self._admin.describe_configs,
                                   [ConfigResource(ConfigResourceType.BROKER, str(broker))], config_filter="all")
        entries = (answer or {}).get("broker", {}).get(str(broker), {})
        if error == NONE and not entries:  # a broker has configs: kafka-python 3.0.12 dropped the resource's error
            error = client_error("NO_CONFIGS (kafka-python drops DescribeConfigs' error code; an ACL may refuse it)")
        return {"error": error, "broker": broker, "configs": {
            name: [entry["value"], entry["config_source"], entry["read_only"]] for name, entry in entries.items()}}

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict[str, Any]:
        tp = TopicPartition(topic, partition)
        error, answer = self._call(self._admin.delete_records, {tp: before_offset}, timeout_ms=REQUEST_TIMEOUT_MS)
        if answer is None:
            return {"error": error, "low_watermark": -1}
        result = answer[tp]
        if result["error_code"]:
            return {"error": errno_name(kafka.errors.for_code(result["error_code"])()), "low_watermark": -1}
        return {"error": NONE, "low_watermark": result["low_watermark"]}

    def api_versions(self) -> dict[str, list[int]]:
        # The public `api_versions()` raises ValueError on API keys kafka-python does not know
        # (Kafka 4.4 advertises some); the table it is built from is what the broker sent.
        self._admin.describe_cluster()
        table = self._admin._manager.broker_version_data.api_versions
        return {str(key): [low, high] for key, (low, high) in sorted(table.items())}

    # -- produce and consume --------------------------------------------------------------

    def produce(self, topic: str, records: list[Record], codec: str = "none", acks: str = "all",
                idempotent: bool = False, max_request_bytes: int | None = None) -> list[dict[str, Any]]:
        producer = kafka.KafkaProducer(
            **self._connect, compression_type=None if codec == "none" else codec,
            acks=-1 if acks == "all" else int(acks), enable_idempotence=idempotent, linger_ms=5,
            max_request_size=max_request_bytes or 1048576, max_block_ms=int(FLUSH_TIMEOUT_S * 1000),
            request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            futures = []
            for record in records:
                try:
                    futures.append(producer.send(topic, **_send_args(record)))
                except (kafka.errors.KafkaError, AssertionError, ValueError) as exc:
                    futures.append(exc)
            producer.flush(timeout=FLUSH_TIMEOUT_S)
            return [self._answer(f) for f in futures]
        finally:
            producer.close(timeout=10)

    def _answer(self, future: Any) -> dict[str, Any]:
        if isinstance(future, BaseException):
            return {"error": errno_name(future), "partition": -1, "offset": -1}
        try:
            meta = future.get(timeout=FLUSH_TIMEOUT_S)
        except kafka.errors.KafkaError as exc:
            return {"error": errno_name(exc), "partition": -1, "offset": -1}
        return {"error": NONE, "partition": meta.partition, "offset": meta.offset}

    def consume(self, topic: str, partitions: list[int] | None, from_offset: str | int, max_records: int,
                timeout_s: float, isolation: str = "read_uncommitted") -> list[Record]:
        consumer = kafka.KafkaConsumer(**self._connect, group_id=None, enable_auto_commit=False,
                                       isolation_level=isolation, request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            chosen = sorted(consumer.partitions_for_topic(topic) or []) if partitions is None else partitions
            tps = [TopicPartition(topic, p) for p in chosen]
            consumer.assign(tps)
            for tp in tps:
                _seek(consumer, tp, from_offset)
            got: list[Record] = []
            deadline = time.monotonic() + timeout_s
            while len(got) < max_records and time.monotonic() < deadline:
                left_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
                for tp, batch in consumer.poll(timeout_ms=min(500, left_ms), max_records=max_records - len(got)).items():
                    got += [consumed(tp, r) for r in batch]
            return got
        finally:
            consumer.close()

    def consume_position(self, topic: str, partition: int, from_offset: str | int, until_offset: int,
                         timeout_s: float, isolation: str = "read_uncommitted",
                         group: str | None = None) -> dict[str, Any]:
        consumer = kafka.KafkaConsumer(**self._connect, group_id=group, enable_auto_commit=False,
                                       isolation_level=isolation, request_timeout_ms=REQUEST_TIMEOUT_MS)
        tp = TopicPartition(topic, partition)
        try:
            consumer.assign([tp])
            _seek(consumer, tp, from_offset)
            got: list[Record] = []
            position = -1
            deadline = time.monotonic() + timeout_s
            while position < until_offset and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    got += [consumed(tp, r) for r in batch]
                position = consumer.position(tp, timeout_ms=REQUEST_TIMEOUT_MS)
            commit = None
            if group is not None:
                commit = self._call(consumer.commit)[0]
            return {"records": got, "position": position, "commit": commit}
        finally:
            consumer.close()

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation: str = "read_uncommitted") -> dict[str, Any]:
        tp = TopicPartition(topic, partition)
        wanted = OFFSET_SPECS[spec] if isinstance(spec, str) else spec
        error, answer = self._call(self._admin.list_partition_offsets, {tp: wanted},
                                   isolation_level=ISOLATION_LEVELS[isolation], timeout_ms=REQUEST_TIMEOUT_MS)
        if answer is None or answer.get(tp) is None:
            return {"error": error, "offset": -1, "timestamp": -1}
        found = answer[tp]
        return {"error": error, "offset": found.offset, "timestamp": found.timestamp}

    # -- consumer groups ------------------------------------------------------------------

    def member_start(self, handle: str, group: str, topics: list[str], assignor: str | None = None,
                     instance_id: str | None = None, session_timeout_ms: int = 10_000,
                     protocol: str = "classic") -> None:
        if protocol != "classic":
            raise Unsupported("kafka-python has no KIP-848 consumer protocol")
        extra: dict[str, Any] = {}
        if assignor is not None:
            if assignor not in ASSIGNORS:
                raise Unsupported(f"kafka-python has no {assignor!r} assignor")
            extra["partition_assignment_strategy"] = (ASSIGNORS[assignor],)
        consumer = kafka.KafkaConsumer(
            **self._connect, group_id=group, group_instance_id=instance_id,
            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=min(1000, session_timeout_ms // 3), request_timeout_ms=REQUEST_TIMEOUT_MS,
            **extra)
        listener = _Listener()
        consumer.subscribe(topics, listener=listener)
        self._members[handle] = _Member(consumer, listener)

    def member_poll(self, handle: str, timeout_s: float) -> dict[str, Any]:
        return self._members[handle].take(timeout_s)

    def member_commit(self, handle: str) -> str:
        member = self._members[handle]
        try:
            member.call(member.consumer.commit)
        except kafka.errors.KafkaError as exc:
            return errno_name(exc)
        return NONE

    def member_stop(self, handle: str) -> None:
        self._members.pop(handle).stop()

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[str, int]:
        tps = [TopicPartition(topic, p) for p in partitions]
        offsets = self._admin.list_group_offsets({group: tps}).get(group, {})
        return {str(tp.partition): (offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0 else -1)
                for tp in tps}

    # -- transactions ---------------------------------------------------------------------

    def transaction(self, topic: str, records: list[Record], transactional_id: str, commit: bool) -> str:
        producer = kafka.KafkaProducer(**self._connect, transactional_id=transactional_id,
                                       max_block_ms=int(TXN_TIMEOUT_S * 1000),
                                       request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            futures = [producer.send(topic, **_send_args(record)) for record in records]
            producer.flush(timeout=FLUSH_TIMEOUT_S)
            for future in futures:
                future.get(timeout=FLUSH_TIMEOUT_S)
            producer.commit_transaction() if commit else producer.abort_transaction()
        except kafka.errors.KafkaError as exc:
            return errno_name(exc)
        finally:
            producer.close(timeout=10)
        return NONE

    def transaction_begin(self, handle: str, transactional_id: str) -> str:
        assert handle not in self._transactions, f"transaction {handle} is open already"
        producer = kafka.KafkaProducer(**self._connect, transactional_id=transactional_id,
                                       max_block_ms=int(TXN_TIMEOUT_S * 1000),
                                       request_timeout_ms=REQUEST_TIMEOUT_MS)
        self._transactions[handle] = producer
        try:
            producer.init_transactions()
            producer.begin_transaction()
        except kafka.errors.KafkaError as exc:
            return errno_name(exc)
        return NONE

    def transaction_send(self, handle: str, topic: str, records: list[Record]) -> list[dict[str, Any]]:
        producer = self._transactions[handle]
        futures: list[Any] = []
        for record in records:
            try:
                futures.append(producer.send(topic, **_send_args(record)))
            except kafka.errors.KafkaError as exc:
                futures.append(exc)
        producer.flush(timeout=FLUSH_TIMEOUT_S)
        return [self._answer(f) for f in futures]

    def transaction_end(self, handle: str, commit: bool) -> str:
        producer = self._transactions.pop(handle)
        try:
            producer.commit_transaction() if commit else producer.abort_transaction()
        except kafka.errors.KafkaError as exc:
            return errno_name(exc)
        finally:
            producer.close(timeout=10)
        return NONE

    def close(self) -> None:
        for producer in self._transactions.values():
            producer.close(timeout=10)
        self._transactions.clear()
        for handle in list(self._members):
            self.member_stop(handle)
        self._admin.close()


def _seek(consumer: kafka.KafkaConsumer, tp: TopicPartition, from_offset: str | int) -> None:
    if from_offset == "earliest":
        consumer.seek_to_beginning(tp)
    elif from_offset == "latest":
        consumer.seek_to_end(tp)
    else:
        consumer.seek(tp, int(from_offset))
