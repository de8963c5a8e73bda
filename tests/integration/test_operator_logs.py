"""What an operator sees when things happen (issue 17, points 2 and 4), from a broker run with
`--log-format json` whose standard error is a pipe read line by line: every line is one JSON
object; topic creation and deletion and a client's protocol error (with its address and client
id as fields) are logged; and a store that fails and comes back is logged ("persisting failed",
then "persisting again"), counted in /metrics, shown by the HTTP API and `martlet status`, and
loses nothing.

The store fails for real: the broker's file size limit (RLIMIT_FSIZE, set on the running
process with prlimit) is lowered to 0, so every write to the local store fails with EFBIG
(Python ignores SIGXFSZ), then raised again. Standard error is a pipe, not a file, so the limit
does not stop the log lines themselves.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import select
import socket
import struct
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.martlet import wait_until
from tests.integration.clients import Deadline, confluent_create_topic, unique_topic
from tests.integration.raw_client import frame, is_closed

pytestmark = pytest.mark.integration

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
WAIT_S = 30.0
CLI = [sys.executable, "-m", "martlet.cli"]
Entry = dict[str, Any]


class JsonLoggingBroker:
    """`martlet serve --log-format json` with standard error read into `entries` by a thread."""

    def __init__(self, data_dir: Path) -> None:
        args = [*CLI, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", str(data_dir),
                "--log-format", "json"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.entries: list[Entry] = []
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        self.bootstrap = self._ready_line("martlet listening on ")
        self.http = self._ready_line("martlet http on ")

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def _ready_line(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        assert line.startswith(prefix), f"martlet did not start: {line!r}"
        return line.rsplit(" ", 1)[-1]

    def logged(self) -> list[Entry]:
        """Every line so far, each parsed as JSON (a line that is not JSON fails the test)."""
        while not self.lines.empty():
            line = self.lines.get_nowait()
            entry = json.loads(line)
            assert isinstance(entry, dict) and {"time", "level", "logger", "message"} <= entry.keys(), line
            self.entries.append(entry)
        return self.entries

    def wait_logged(self, condition: Callable[[Entry], bool]) -> Entry:
        """The first line logged that `condition` holds for, waiting up to WAIT_S for it."""

        def first() -> Entry | None:
            return next((e for e in self.logged() if condition(e)), None)

        wait_until(lambda: first() is not None, WAIT_S)
        found = first()
        assert found is not None, f"not logged within {WAIT_S} s; logged: {[e['message'] for e in self.logged()]}"
        return found

    def stop(self) -> int:
        self.proc.terminate()
        code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.reader.join(timeout=STOP_TIMEOUT_S)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JsonLoggingBroker]:
    process = JsonLoggingBroker(tmp_path_factory.mktemp("json-logs") / "data")
    try:
        yield process
    finally:
        assert process.stop() == 0
        process.logged()  # standard error to its end: every line JSON, also the stopping ones


def header(api_key: int, client_id: bytes) -> bytes:
    """A request header v1: api key, version 0, correlation id 1, the client id (int16 length)."""
    return struct.pack(">hhih", api_key, 0, 1, len(client_id)) + client_id


def test_topic_events_and_a_clients_protocol_error_are_json_lines(broker: JsonLoggingBroker) -> None:
    topic = unique_topic("json-logs")
    confluent_create_topic(broker.bootstrap, topic, 2)
    created = broker.wait_logged(lambda e: e["message"].startswith(f"topic {topic} created"))
    assert (created["level"], created["logger"]) == ("info", "martlet.engine.topics")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: its future fails once it is gone
    admin.delete_topics([topic])[topic].result(WAIT_S)
    broker.wait_logged(lambda e: e["message"] == f"topic {topic} deleted (2 partitions)")

    client_id = unique_topic("bad-client")
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock_host, sock_port = sock.getsockname()[:2]
        address = f"{sock_host}:{sock_port}"
        sock.sendall(frame(header(999, client_id.encode()) + b"\x00" * 8))
        assert is_closed(sock, WAIT_S)
    error = broker.wait_logged(lambda e: e.get("client_id") == client_id)
    assert (error["level"], error["peer"]) == ("warning", address)
    assert "unknown api key 999" in error["message"] and address in error["message"]


# -- a failing store --------------------------------------------------------------------------

def scrape(http: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=WAIT_S) as answer:
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def http_json(http: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{http}{path}", timeout=WAIT_S) as answer:
        return json.load(answer)


def martlet_status(broker: JsonLoggingBroker) -> Any:
    env = {**os.environ, "MARTLET_BOOTSTRAP": broker.bootstrap, "MARTLET_HTTP": broker.http}
    done = subprocess.run([*CLI, "status", "--output", "json"], env=env, capture_output=True, timeout=WAIT_S, check=True)
    return json.loads(done.stdout)


def set_file_size_limit(pid: int, limit: int) -> None:
    _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, hard))


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("json-logs-reader"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = Deadline(WAIT_S)
        while len(values) < count and not deadline.passed:
            values += [bytes(m.value() or b"") for m in consumer.consume(100, min(1.0, deadline.left())) if m.error() is None]
    finally:
        consumer.close()
    return values


def test_a_failing_store_is_logged_counted_shown_and_recovered(broker: JsonLoggingBroker) -> None:
    topic = unique_topic("json-logs-store")
    confluent_create_topic(broker.bootstrap, topic, 1)
    sent = [b"record-%d" % i for i in range(10)]
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 120_000})
    set_file_size_limit(broker.proc.pid, 0)
    try:
        for value in sent:
            producer.produce(topic, value, partition=0, on_delivery=delivered)
        producer.poll(0)
        failed = broker.wait_logged(lambda e: "persisting failed" in e["message"] and topic in e["message"])
        assert failed["level"] == "warning" and "File too large" in failed["message"]
        metrics = scrape(broker.http)
        assert metrics[("martlet_store_healthy", ())] == 0
        assert metrics[("martlet_store_call_failures_total", (("operation", "write"),))] >= 1
        assert metrics[("martlet_partition_unpersisted_bytes", (("partition", "0"), ("topic", topic)))] > 0
        assert producer.flush(0.5) == len(sent)  # acks=all: not acknowledged while nothing is persisted
        store = martlet_status(broker)["martlet"]["store"]
        assert store["healthy"] is False and "File too large" in store["last_error"] and store["unpersisted_bytes"] > 0
    finally:
        set_file_size_limit(broker.proc.pid, resource.RLIM_INFINITY)

    again = broker.wait_logged(lambda e: "persisting again" in e["message"] and topic in e["message"])
    assert again["message"].endswith(f"(checkpoint {len(sent)})")
    assert producer.flush(WAIT_S) == 0 and failures == []
    assert wait_until(lambda: scrape(broker.http)[("martlet_store_healthy", ())] == 1, WAIT_S)
    [partition] = http_json(broker.http, f"/api/v1/topics/{topic}")["partitions"]
    assert (partition["checkpoint"], partition["unpersisted_bytes"]) == (len(sent), 0)
    assert martlet_status(broker)["martlet"]["store"]["healthy"] is True
    assert consume_all(broker.bootstrap, topic, len(sent)) == sent
