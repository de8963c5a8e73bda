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
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.clients import (
    ADMIN_TIMEOUT_S,
    Deadline,
    confluent_consume,
    confluent_consumer,
    confluent_create_topic,
    confluent_high_watermarks,
    confluent_produce,
    confluent_wait_partitions,
    make_records,
    unique_topic,
)

pytestmark = pytest.mark.integration

HTTP_TIMEOUT_S = 30.0
CONSOLE = Path(__file__).resolve().parents[2] / "gateway" / "console"


def call(address: str, method: str, path: str, body: object = None) -> tuple[int, str, bytes]:
    """(status, content type, body) of one request on a new connection; every change says it is
    JSON, as the port wants (gateway/http/guard.py)."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=HTTP_TIMEOUT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={} if method == "GET" else {"Content-Type": "application/json"})
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


def test_another_brokers_status_fetch_is_answered(martlet: MartletProcess) -> None:
    """What a broker sends for another's status (gateway/http/brokers.py) passes that one's Host
    check (gateway/http/guard.py): it names the address the other published."""
    import asyncio

    from martlet.gateway.http.brokers import fetch_json

    doc = asyncio.run(asyncio.wait_for(fetch_json(martlet.http, "/api/v1/status"), HTTP_TIMEOUT_S))
    assert doc["kafka"] == martlet.bootstrap


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


# -- creating and deleting topics

def test_a_topic_created_over_http_is_seen_by_kafka_clients_and_deleted(martlet: MartletProcess) -> None:
    topic = unique_topic("http-create")
    status, _, body = call(martlet.http, "POST", "/api/v1/topics",
                           {"name": topic, "partitions": 4, "configs": {"cleanup.policy": "compact"}})
    assert status == 201, body
    doc = json.loads(body)
    assert doc["name"] == topic and len(doc["partitions"]) == 4 and doc["configs"]["cleanup.policy"] == "compact"
    admin = AdminClient({"bootstrap.servers": martlet.bootstrap})
    assert confluent_wait_partitions(admin, topic, 4) == 4
    configs = admin.describe_configs([_topic_resource(topic)])
    assert next(iter(configs.values())).result(ADMIN_TIMEOUT_S)["cleanup.policy"].value == "compact"

    status, _, body = call(martlet.http, "POST", "/api/v1/topics", {"name": topic, "partitions": 1})
    assert status == 409 and "error" in json.loads(body)

    status, _, body = call(martlet.http, "DELETE", f"/api/v1/topics/{topic}")
    assert (status, json.loads(body)) == (200, {"deleted": topic})
    assert wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, ADMIN_TIMEOUT_S)
    assert "error" in get_json(martlet.http, f"/api/v1/topics/{topic}", 404)
    assert call(martlet.http, "DELETE", f"/api/v1/topics/{topic}")[0] == 404


def _topic_resource(topic: str) -> object:
    from confluent_kafka.admin import ConfigResource, ResourceType

    return ConfigResource(ResourceType.TOPIC, topic)


@pytest.mark.parametrize(("body", "status"), [
    ({"partitions": 1}, 400),
    ({"name": "bad name!", "partitions": 1}, 400),
    ({"name": "http-zero", "partitions": 0}, 400),
    ({"name": "http-two", "partitions": "2"}, 400),
    ({"name": "http-config", "partitions": 1, "configs": {"retention.ms": "soon"}}, 400),
    ({"name": "http-unknown", "partitions": 1, "configs": {"no.such.config": "1"}}, 400),
    ({"name": "__consumer_offsets", "partitions": 1}, 409),
    ([1, 2], 400),
])
def test_bad_topic_creations(martlet: MartletProcess, body: object, status: int) -> None:
    got, content_type, answer = call(martlet.http, "POST", "/api/v1/topics", body)
    assert (got, content_type) == (status, "application/json"), answer
    assert json.loads(answer)["error"]
    assert call(martlet.http, "DELETE", "/api/v1/topics/__consumer_offsets")[0] == 400


def test_a_body_that_is_not_json_is_400(martlet: MartletProcess) -> None:
    answer = raw(martlet.http, b"POST /api/v1/topics HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 3\r\nConnection: close\r\n\r\n{x}" % martlet.http.encode())
    assert answer.startswith(b"HTTP/1.1 400 ")


# -- groups

def test_groups_show_what_a_consumer_committed(martlet: MartletProcess) -> None:
    topic, group = unique_topic("http-groups"), unique_topic("http-group")
    confluent_create_topic(martlet.bootstrap, topic, 2)
    confluent_produce(martlet.bootstrap, topic, make_records(200, codecs=("none",)))
    consumer = Consumer({"bootstrap.servers": martlet.bootstrap, "group.id": group, "client.id": "http-test",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = Deadline(60)
        while got < 150 and not deadline.passed:
            got += sum(1 for m in consumer.consume(200, timeout=1.0) if m.error() is None)
        assert got >= 150
        consumer.commit(offsets=[TopicPartition(topic, 0, 30), TopicPartition(topic, 1, 50)], asynchronous=False)
        high = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in (0, 1)}

        listed = {row["group_id"]: row for row in get_json(martlet.http, "/api/v1/groups")["groups"]}  # type: ignore[union-attr]
        row = listed[group]
        want_lag = high[0] - 30 + high[1] - 50
        assert (row["state"], row["protocol_type"], row["members"], row["lag"]) == ("Stable", "consumer", 1, want_lag)

        doc = get_json(martlet.http, f"/api/v1/groups/{group}")
        assert (doc["group_id"], doc["state"], doc["protocol_type"]) == (group, "Stable", "consumer")
        assert doc["protocol"] in ("range", "roundrobin", "cooperative-sticky")
        members = doc["members"]
        assert isinstance(members, list) and len(members) == 1 and members[0]["client_id"] == "http-test"
        assert sorted((a["topic"], a["partition"]) for a in members[0]["assignment"]) == [(topic, 0), (topic, 1)]
        offsets = {row["partition"]: row for row in doc["offsets"]}  # type: ignore[union-attr]
        assert {p: (r["committed"], r["high_watermark"], r["lag"]) for p, r in offsets.items()} == {
            0: (30, high[0], high[0] - 30), 1: (50, high[1], high[1] - 50)}

        def sampled() -> bool:
            history = get_json(martlet.http, f"/api/v1/groups/{group}")["lag_history"]
            return isinstance(history, list) and bool(history) and history[-1]["lag"] == want_lag

        assert wait_until(sampled, 20.0, interval_s=0.5), "no lag sample within 20 s (one every 5 s)"
    finally:
        consumer.close()
    assert "error" in get_json(martlet.http, "/api/v1/groups/no-such-group", 404)


# -- messages

def test_messages_by_offset_time_and_key(martlet: MartletProcess) -> None:
    topic = unique_topic("http-messages")
    confluent_create_topic(martlet.bootstrap, topic, 1)
    records = make_records(400, codecs=("none", "gzip", "zstd"))
    acks = confluent_produce(martlet.bootstrap, topic, records)
    by_offset = {acks[rec.seq][1]: rec for rec in records}
    consumer = confluent_consumer(martlet.bootstrap)
    try:
        got = {g.offset: g for g in confluent_consume(consumer, topic, 400, partitions=1)}
    finally:
        consumer.close()
    assert len(got) == 400

    def fetch(query: str) -> list[dict[str, object]]:
        rows = get_json(martlet.http, f"/api/v1/messages?topic={topic}&partition=0{query}")["messages"]
        assert isinstance(rows, list)
        return rows

    def same(row: dict[str, object]) -> None:
        g = got[int(row["offset"])]  # type: ignore[call-overload]
        assert row["partition"] == 0 and row["timestamp"] == g.timestamp_ms
        assert row["key"] == (None if g.key is None else g.key.decode("utf-8", "replace"))
        assert row["value"] == (None if g.value is None else g.value.decode("utf-8", "replace"))
        assert row["value_bytes"] == len(g.value or b"")
        assert row["headers"] == [[k, None if v is None else v.decode("utf-8", "replace")] for k, v in g.headers]

    last = fetch("")
    assert [r["offset"] for r in last] == list(range(350, 400))
    for row in last:
        same(row)
    assert [r["offset"] for r in fetch("&offset=120&limit=7")] == list(range(120, 127))
    assert [r["offset"] for r in fetch("&offset=398")] == [398, 399]
    assert fetch("&offset=400") == []
    target = by_offset[200].timestamp_ms
    assert [r["offset"] for r in fetch(f"&timestamp={target}&limit=3")] == [200, 201, 202]
    assert fetch(f"&timestamp={by_offset[399].timestamp_ms + 1}") == []
    key = by_offset[10].key
    assert key is not None
    with_key = [o for o in range(400) if got[o].key == key]
    rows = fetch(f"&key={key.decode()}&limit=2")
    assert [r["offset"] for r in rows] == with_key[-2:]
    for row in rows:
        same(row)


@pytest.mark.parametrize(("query", "status"), [
    ("", 400), ("?topic=x", 400), ("?topic=no-such-topic&partition=0", 404), ("?topic=T&partition=9", 404),
    ("?topic=T&partition=0&limit=501", 400), ("?topic=T&partition=0&limit=0", 400),
    ("?topic=T&partition=x", 400), ("?topic=T&partition=0&offset=1&key=k", 400)])
def test_bad_message_queries(martlet: MartletProcess, query: str, status: int) -> None:
    topic = "http-messages-errors"
    if topic not in AdminClient({"bootstrap.servers": martlet.bootstrap}).list_topics(timeout=10).topics:
        confluent_create_topic(martlet.bootstrap, topic, 1)
    assert "error" in get_json(martlet.http, "/api/v1/messages" + query.replace("=T&", f"={topic}&"), status)


def test_messages_of_a_producer_with_odd_bytes(martlet: MartletProcess) -> None:
    topic = unique_topic("http-bytes")
    confluent_create_topic(martlet.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": martlet.bootstrap})
    producer.produce(topic, key=b"\xff\xfe", value="é".encode() * 70_000, headers=[("h", b"\x00\xff")], partition=0)
    assert producer.flush(30) == 0
    (row,) = get_json(martlet.http, f"/api/v1/messages?topic={topic}&partition=0")["messages"]  # type: ignore[misc]
    assert row["key"] == "\ufffd\ufffd" and row["headers"] == [["h", "\x00\ufffd"]]
    assert row["value_bytes"] == 140_000 and row["truncated"] is True and row["value"] == "é" * (64 << 10)


# -- metrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(address: str) -> Samples:
    """Every sample of /metrics by (name, sorted labels); the text must parse."""
    status, content_type, body = call(address, "GET", "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        assert family.name.startswith("martlet_"), family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_scraped_during_load(martlet: MartletProcess) -> None:
    """Rounds of 2,000 produced records (acks=all) and some consumed by a group, /metrics
    scraped after each while the clients stay connected."""
    topic, group = unique_topic("http-metrics"), unique_topic("http-metrics-group")
    confluent_create_topic(martlet.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": martlet.bootstrap, "acks": "all", "linger.ms": 2})
    consumer = Consumer({"bootstrap.servers": martlet.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": True, "auto.commit.interval.ms": 100})
    scrapes, produced = [], 0
    try:
        consumer.subscribe([topic])
        for _ in range(4):
            for seq in range(2_000):
                producer.produce(topic, key=b"k%d" % (seq % 50), value=b"v" * 100)
                producer.poll(0)
            assert producer.flush(60) == 0
            produced += 2_000
            deadline, read = Deadline(30), 0
            while read < 1_000 and not deadline.passed:
                read += sum(1 for m in consumer.consume(500, timeout=0.5) if m.error() is None)
            scrapes.append(scrape(martlet.http))
    finally:
        consumer.close()
    AdminClient({"bootstrap.servers": martlet.bootstrap}).list_topics("http-metrics-no-such-topic", timeout=10)
    last = scrape(martlet.http)

    for name, labels in [("martlet_kafka_requests_total", {"api": "Produce"}),
                         ("martlet_kafka_requests_total", {"api": "Fetch"}),
                         ("martlet_kafka_request_duration_seconds_count", {"api": "Produce"}),
                         ("martlet_topic_records_in_total", {"topic": topic}),
                         ("martlet_topic_bytes_in_total", {"topic": topic}),
                         ("martlet_topic_records_out_total", {"topic": topic}),
                         ("martlet_topic_bytes_out_total", {"topic": topic}),
                         ("martlet_store_call_duration_seconds_count", {"operation": "write"})]:
        seen = [value(samples, name, **labels) for samples in scrapes]
        assert all(a <= b for a, b in zip(seen, seen[1:])) and seen[0] < seen[-1], (name, labels, seen)
    assert value(scrapes[-1], "martlet_topic_records_in_total", topic=topic) == produced
    assert value(last, "martlet_kafka_request_errors_total", api="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION") >= 1

    buckets = [v for (name, labels), v in last.items()
               if name == "martlet_kafka_request_duration_seconds_bucket" and ("api", "Produce") in labels]
    assert buckets == sorted(buckets) and buckets[-1] == value(last, "martlet_kafka_request_duration_seconds_count",
                                                               api="Produce")
    high = sum(value(last, "martlet_partition_high_watermark", topic=topic, partition=str(p)) for p in (0, 1))
    assert high == produced
    for p in ("0", "1"):
        assert value(last, "martlet_partition_checkpoint", topic=topic, partition=p) == value(
            last, "martlet_partition_high_watermark", topic=topic, partition=p)
        assert ("martlet_partition_unpersisted_bytes", (("partition", p), ("topic", topic))) in last
        assert ("martlet_group_lag_records", (("group", group), ("partition", p), ("topic", topic))) in last
    assert value(last, "martlet_connections_accepted_total", listener="kafka") >= 2
    assert value(last, "martlet_connections", listener="http") >= 1
    assert 0 < value(last, "martlet_memory_used_bytes") <= value(last, "martlet_memory_budget_bytes")
    assert value(last, "martlet_store_healthy") == 1 and value(last, "martlet_store_call_failures_total",
                                                                operation="write") == 0


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
    host = martlet.http.encode()
    two = (b"GET /api/v1/status HTTP/1.1\r\nHost: %s\r\n\r\n"
           b"GET /api/v1/topics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n") % (host, host)
    answers = raw(martlet.http, two)
    assert answers.count(b"HTTP/1.1 200 OK") == 2


def test_connections_beyond_the_limit_are_answered_503() -> None:
    """An HttpServer of its own (limit 2) on this test's event loop."""
    import asyncio

    from martlet.gateway.http.response import json_response
    from martlet.gateway.http.routes import Router
    from martlet.gateway.http.server import HttpServer

    async def scenario() -> list[bytes]:
        router = Router()

        async def hello(_request: object, _args: tuple[str, ...]) -> object:
            return json_response({"hello": 1})

        router.add("GET", "/", hello)  # type: ignore[arg-type]
        server = HttpServer(router, connections_max=2)
        host, port = await server.start("127.0.0.1", 0)
        held = [await asyncio.open_connection(host, port) for _ in range(2)]
        try:
            await asyncio.wait_for(_until(lambda: server.connections == 2), HTTP_TIMEOUT_S)
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            refused = await asyncio.wait_for(reader.read(), HTTP_TIMEOUT_S)
            writer.close()
            held[0][1].write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            served = await asyncio.wait_for(held[0][0].read(), HTTP_TIMEOUT_S)
            return [refused, served]
        finally:
            for _, w in held:
                w.close()
            await server.stop()

    refused, served = asyncio.run(scenario())
    assert refused.startswith(b"HTTP/1.1 503 ") and served.startswith(b"HTTP/1.1 200 OK")


async def _until(condition: object) -> None:
    import asyncio

    while not condition():  # type: ignore[operator]
        await asyncio.sleep(0.01)


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
        done = subprocess.run([sys.executable, "-m", "martlet.cli", "serve", "--listen", "127.0.0.1:0",
                               "--http", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"martlet: cannot serve HTTP on 127.0.0.1:{port}" in done.stderr
    assert done.stdout == ""


def test_http_off(martlet_process) -> None:
    broker = martlet_process(http="off")
    assert broker.http == ""
    assert wait_until(lambda: "serving Kafka on" in broker.log_tail(), 10.0), broker.log_tail()
    assert "; HTTP off;" in broker.log_tail() and "cannot serve HTTP" not in broker.log_tail()
