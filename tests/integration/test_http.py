"""The broker's HTTP port (issue 17, point 2): the /api/v1 JSON against what confluent-kafka
clients produced, consumed and committed; topic changes over HTTP seen by Kafka clients; error
answers; a malformed request answered 400 while the broker keeps serving; the console's
files; /metrics scraped during load; the default port taken (a warning) and an explicit one
(exit 2)."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.fixtures.martlet import MartletProcess
from tests.integration.clients import (
    confluent_create_topic,
    confluent_high_watermarks,
    confluent_produce,
    make_records,
    unique_topic,
)

pytestmark = pytest.mark.integration

HTTP_TIMEOUT_S = 30.0
CONSOLE = Path(__file__).resolve().parents[2] / "gateway" / "console"


def call(address: str, method: str, path: str, body: object = None) -> tuple[int, str, bytes]:
    """(status, content type, body) of one request on a new connection."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=HTTP_TIMEOUT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Type", ""), answer.read()
    finally:
        connection.close()


def get_json(address: str, path: str, status: int = 200) -> dict[str, object]:
    got, content_type, body = call(address, "GET", path)
    assert (got, content_type) == (status, "application/json"), body
    doc = json.loads(body)
    assert isinstance(doc, dict)
    return doc


def raw(address: str, data: bytes) -> bytes:
    """Send bytes as they are; everything the server answers until it closes."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=HTTP_TIMEOUT_S) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# -- status and topics

def test_status_names_this_broker(martlet: MartletProcess) -> None:
    status = get_json(martlet.http, "/api/v1/status")
    assert status["kafka"] == martlet.bootstrap
    assert isinstance(status["version"], str) and isinstance(status["cluster_id"], str) and status["cluster_id"]
    brokers = status["brokers"]
    assert isinstance(brokers, list) and len(brokers) == 1
    assert brokers[0]["node_id"] == status["node_id"]
    assert (brokers[0]["host"], brokers[0]["port"]) == ("127.0.0.1", martlet.port)
    assert brokers[0]["http"] == martlet.http
    memory = status["memory"]
    assert isinstance(memory, dict) and 0 <= memory["used_bytes"] and memory["budget_bytes"] == 256 << 20
    store = status["store"]
    assert isinstance(store, dict)
    assert (store["kind"], store["healthy"], store["last_error"]) == ("local", True, None)
    assert store["location"] == str(martlet.data_dir)
    assert isinstance(status["uptime_s"], float) and status["uptime_s"] > 0


def test_topics_show_what_a_client_produced(martlet: MartletProcess) -> None:
    topic = unique_topic("http-topics")
    confluent_create_topic(martlet.bootstrap, topic, 3, {"retention.ms": "3600000"})
    records = make_records(300, codecs=("none", "zstd"))
    acks = confluent_produce(martlet.bootstrap, topic, records)  # acks=all: answered once C covers them
    consumer = Consumer({"bootstrap.servers": martlet.bootstrap, "group.id": "unused"})
    try:
        high = confluent_high_watermarks(consumer, topic, 3)
    finally:
        consumer.close()
    assert sum(high.values()) == len(acks) == 300

    listed = {row["name"]: row for row in get_json(martlet.http, "/api/v1/topics")["topics"]}  # type: ignore[union-attr]
    assert listed[topic]["partitions"] == 3 and listed[topic]["records"] == 300 and listed[topic]["internal"] is False
    assert listed["__consumer_offsets"]["internal"] is True

    doc = get_json(martlet.http, f"/api/v1/topics/{topic}")
    assert doc["name"] == topic and listed[topic]["resource_name"] == doc["resource_name"]
    assert str(doc["resource_name"]).split("#")[1] == topic and str(doc["resource_name"]).endswith(str(doc["topic_id"]))
    assert doc["version"] == 1  # V of a new topic
    configs = doc["configs"]
    assert isinstance(configs, dict) and configs["retention.ms"] == "3600000" and "segment.bytes" in configs
    partitions = doc["partitions"]
    assert isinstance(partitions, list) and [p["partition"] for p in partitions] == [0, 1, 2]
    assert partitions[0]["slots"][0] == 0 and partitions[-1]["slots"][1] == 65535
    for before, after in zip(partitions, partitions[1:]):
        assert after["slots"][0] == before["slots"][1] + 1
    for row in partitions:
        assert row["high_watermark"] == high[row["partition"]] and row["log_start_offset"] == 0
        assert row["checkpoint"] == row["high_watermark"] and row["unpersisted_bytes"] == 0
        assert row["leader"] == get_json(martlet.http, "/api/v1/status")["node_id"] and row["session"] >= 0


def test_unknown_paths_and_topics_are_404_json(martlet: MartletProcess) -> None:
    assert "error" in get_json(martlet.http, "/api/v1/topics/no-such-topic", 404)
    assert "error" in get_json(martlet.http, "/api/v1/nothing", 404)
    status, content_type, body = call(martlet.http, "PUT", "/api/v1/status")
    assert (status, content_type) == (405, "application/json") and "error" in json.loads(body)


def test_the_console_is_served_from_the_package(martlet: MartletProcess) -> None:
    status, content_type, body = call(martlet.http, "GET", "/")
    if (CONSOLE / "index.html").is_file():
        assert (status, content_type) == (200, "text/html; charset=utf-8")
        assert body == (CONSOLE / "index.html").read_bytes()
    else:
        assert (status, content_type) == (404, "application/json")
    assert call(martlet.http, "GET", "/console/../../setup.py")[0] == 404
    assert call(martlet.http, "GET", "/console/%2e%2e/app.py")[0] == 404


# -- bad requests

@pytest.mark.parametrize("data", [
    b"this is not http\r\n\r\n",
    b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
    b"POST /api/v1/topics HTTP/1.1\r\nHost: a\r\nContent-Length: nine\r\n\r\n",
    b"GET /\xff\xfe HTTP/1.1\r\nHost: a\r\n\r\n",
])
def test_a_malformed_request_is_answered_400_and_the_broker_keeps_serving(martlet: MartletProcess,
                                                                         data: bytes) -> None:
    answer = raw(martlet.http, data)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert get_json(martlet.http, "/api/v1/status")["kafka"] == martlet.bootstrap


def test_a_huge_head_is_refused_and_keep_alive_serves_several_requests(martlet: MartletProcess) -> None:
    answer = raw(martlet.http, b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"y" * 100_000 + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    two = (b"GET /api/v1/status HTTP/1.1\r\nHost: a\r\n\r\n"
           b"GET /api/v1/topics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    answers = raw(martlet.http, two)
    assert answers.count(b"HTTP/1.1 200 OK") == 2


# -- binding the port

def test_the_default_port_taken_gives_a_warning(martlet_process, tmp_path: Path) -> None:
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 9644))
        holder.listen()
    except OSError:
        pass  # something else holds it: taken all the same
    try:
        broker = martlet_process(http=None)  # no flag: the default address
        assert broker.http == ""
        assert "running without the HTTP port: the default 127.0.0.1:9644 is taken" in broker.log_tail()
    finally:
        holder.close()


def test_an_explicit_port_taken_stops_the_start(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "martlet.gateway.cli", "serve", "--listen", "127.0.0.1:0",
                               "--http", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"martlet: cannot serve HTTP on 127.0.0.1:{port}" in done.stderr
    assert done.stdout == ""


def test_http_off(martlet_process) -> None:
    broker = martlet_process(http="off")
    assert broker.http == ""
    assert "HTTP" not in broker.log_tail()
