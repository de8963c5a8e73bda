"""The driver interface every client under test implements.

A scenario (compat/scenarios/) talks to a Kafka endpoint only through a `Driver`, so the
same scenario runs through confluent-kafka (librdkafka), kafka-python, aiokafka and the
Java client. Python drivers run in-process; the Java driver is a separate JVM process
(compat/clients/java/) that reads one JSON request per line on stdin and writes one JSON
answer per line on stdout: {"op": "<method name>", "args": {<keyword arguments>}} ->
{"ok": <return value>} or {"unsupported": "<reason>"} or {"error": "<message>"}.

All values are JSON-able. Conventions:
- error: a Kafka error name in upper snake case as the client reports it
  ("UNKNOWN_TOPIC_OR_PARTITION", "TOPIC_ALREADY_EXISTS", ...), "NONE" for success, or
  "CLIENT_ERROR: <message>" when the client gives no Kafka error code.
- Record (to produce): {"key": str | None, "value": str | None, "headers": [[name, value], ...],
  "timestamp": int | None (ms; None lets the client choose), "partition": int | None}.
  Keys, values and header values are UTF-8 text; a value of None is a null.
- Consumed record: {"partition": int, "offset": int, "key", "value", "headers",
  "timestamp": int, "timestamp_type": "CreateTime" | "LogAppendTime"}.
- A driver that cannot express an operation raises `Unsupported(reason)` (Java: answers
  {"unsupported": reason}); the scenario is then "not applicable" for that client.
"""

from __future__ import annotations

from typing import Any, Protocol

Record = dict[str, Any]
# DescribeConfigs' config_source codes by the names Kafka's Java client gives them.
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


class Unsupported(Exception):
    """This client cannot express the operation; the scenario does not apply to it."""


class Driver(Protocol):
    name: str  # "java", "confluent", "kafka-python", "aiokafka"

    # -- admin
    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> str: ...
    def delete_topic(self, topic: str) -> str: ...
    def add_partitions(self, topic: str, total: int) -> str: ...
    def describe_topic(self, topic: str) -> dict[str, Any]:
        """{"error": name, "partitions": int, "topic_id": str | None, "configs": {name: value}}
        where configs are the topic's non-default (overridden) configs."""
        ...
    def alter_topic_config(self, topic: str, name: str, value: str) -> str: ...
    def describe_broker(self) -> dict[str, Any]:
        """The configs of the broker with the lowest id: {"error": name, "broker": id,
        "configs": {name: [value, source, read_only]}}, every config, source as in
        CONFIG_SOURCES."""
        ...
    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict[str, Any]:
        """{"error": name, "low_watermark": int}"""
        ...
    def api_versions(self) -> dict[str, list[int]]:
        """{"<api key>": [min, max]} as the broker advertised them."""
        ...

    # -- produce and consume (by assignment)
    def produce(self, topic: str, records: list[Record], codec: str = "none", acks: str = "all",
                idempotent: bool = False, max_request_bytes: int | None = None) -> list[dict[str, Any]]:
        """One answer per record, in order: {"error": name, "partition": int, "offset": int}."""
        ...
    def consume(self, topic: str, partitions: list[int] | None, from_offset: str | int, max_records: int,
                timeout_s: float, isolation: str = "read_uncommitted") -> list[Record]:
        """Assign the partitions (None: all) at `from_offset` ("earliest", "latest" or an offset)
        and read until `max_records` or `timeout_s`."""
        ...
    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation: str = "read_uncommitted") -> dict[str, Any]:
        """spec: "earliest", "latest", "max_timestamp" or a timestamp in ms; isolation
        "read_committed" makes latest the last stable offset (ListOffsets v2+).
        {"error": name, "offset": int, "timestamp": int} (offset -1: none)."""
        ...
    def consume_position(self, topic: str, partition: int, from_offset: str | int, until_offset: int,
                         timeout_s: float, isolation: str = "read_uncommitted",
                         group: str | None = None) -> dict[str, Any]:
        """Assign the one partition at `from_offset` and poll until the consumer's position
        (the offset it fetches next) reaches `until_offset`, or `timeout_s`. With `group`, the
        consumer then commits the client's own way (what it consumed up to its position).
        {"records": [consumed records], "position": int, "commit": error name or None}."""
        ...

    # -- consumer groups: several members, each named by a handle the scenario picks
    def member_start(self, handle: str, group: str, topics: list[str], assignor: str | None = None,
                     instance_id: str | None = None, session_timeout_ms: int = 10_000,
                     protocol: str = "classic") -> None: ...
    def member_poll(self, handle: str, timeout_s: float) -> dict[str, Any]:
        """Poll once for up to timeout_s: {"records": [consumed records with "topic"],
        "assignment": [[topic, partition], ...], "revoked": int (partitions revoked so far)}."""
        ...
    def member_commit(self, handle: str) -> str: ...
    def member_stop(self, handle: str) -> None:
        """Close the member (a static member closes without leaving, as the client does)."""
        ...
    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[str, int]:
        """{"<partition>": committed offset or -1}."""
        ...

    # -- transactions
    def transaction(self, topic: str, records: list[Record], transactional_id: str, commit: bool) -> str:
        """init, begin, send, then commit or abort; the first error name, or "NONE"."""
        ...
    def transaction_begin(self, handle: str, transactional_id: str) -> str:
        """A transactional producer kept open under `handle`: init, then begin. An error name
        or "NONE"; the handle exists either way until transaction_end."""
        ...
    def transaction_send(self, handle: str, topic: str, records: list[Record]) -> list[dict[str, Any]]:
        """Send in the open transaction and flush: one answer per record, as produce's."""
        ...
    def transaction_end(self, handle: str, commit: bool) -> str:
        """Commit or abort the open transaction, then close the producer; the error name or "NONE"."""
        ...

    def close(self) -> None: ...
