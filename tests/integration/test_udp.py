"""The UDP front end (issue 16, point 5; gateway/udp.py) over real sockets: a broker started
with `--udp 127.0.0.1:0` takes text and binary datagrams into topics, read back with
confluent-kafka; keyed records land in the partition the key's slot range names; malformed
datagrams are counted and dropped while the broker keeps serving; one source's burst over
the rate limit is counted rate_limited. Delivery is UDP: every assertion waits (bounded) for
the broker's own counters rather than assuming what arrived."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from martlet.engine.catalog.ranges import initial_ranges, partition_of_slot, slot_of
from martlet.records.build import NewRecord, build_batch
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.clients import confluent_consume, confluent_consumer, confluent_create_topic, unique_topic

pytestmark = pytest.mark.integration

COUNTERS_TIMEOUT_S = 20.0
HTTP_TIMEOUT_S = 10.0
PARTITIONS = 4
RATE = 50  # the rate-limited broker's datagrams a second per source


def status(process: MartletProcess) -> dict[str, object]:
    with urllib.request.urlopen(f"http://{process.http}/api/v1/status", timeout=HTTP_TIMEOUT_S) as answer:
        doc = json.loads(answer.read())
    assert isinstance(doc, dict)
    return doc


def counters(process: MartletProcess) -> dict[str, int]:
    udp = status(process)["udp"]
    assert isinstance(udp, dict)
    return udp


def wait_received(process: MartletProcess, count: int) -> dict[str, int]:
    """The counters once the broker has received `count` datagrams (fails after the deadline)."""
    seen: list[dict[str, int]] = [{}]

    def arrived() -> bool:
        seen[0] = counters(process)
        return seen[0]["received"] >= count

    assert wait_until(arrived, COUNTERS_TIMEOUT_S), f"the broker received fewer than {count}: {seen[0]}"
    return seen[0]


class Sender:
    """One UDP socket sending to the broker's UDP address."""

    def __init__(self, process: MartletProcess) -> None:
        listen = counters(process)["listen"]
        assert isinstance(listen, str)
        host, port = listen.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, *datagrams: bytes) -> None:
        for datagram in datagrams:
            self.sock.sendto(datagram, self.address)

    def close(self) -> None:
        self.sock.close()


def binary(topic: str, partition: int, batch: bytes) -> bytes:
    name = topic.encode()
    return b"\x00" + struct.pack(">h", len(name)) + name + struct.pack(">i", partition) + batch


def key_partition(key: bytes, partitions: int = PARTITIONS) -> int:
    """Where the broker's Topic.partition_for_key puts a key in a topic created with `partitions`."""
    return partition_of_slot(initial_ranges(partitions), slot_of(key))


@pytest.fixture(scope="module")
def udp_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MartletProcess]:
    process = MartletProcess(tmp_path_factory.mktemp("martlet-udp") / "data", ["--udp", "127.0.0.1:0"])
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def sender(udp_broker: MartletProcess) -> Iterator[Sender]:
    sending = Sender(udp_broker)
    yield sending
    sending.close()


def test_text_datagrams_with_and_without_keys(udp_broker: MartletProcess, sender: Sender) -> None:
    topic = unique_topic("udp-text")
    confluent_create_topic(udp_broker.bootstrap, topic, PARTITIONS)
    before = counters(udp_broker)
    keyed = {f"host{i}".encode(): f"cpu=0.{i}".encode() for i in range(20)}
    sender.send(*(topic.encode() + b" " + key + b"\n" + value for key, value in keyed.items()))
    keyless = [b"plain %d" % i for i in range(8)] + [b"", b"binary\x00\xff\nsafe"]
    sender.send(*(topic.encode() + b"\n" + value for value in keyless))
    after = wait_received(udp_broker, before["received"] + len(keyed) + len(keyless))
    assert after["accepted"] - before["accepted"] == len(keyed) + len(keyless), after
    consumer = confluent_consumer(udp_broker.bootstrap)
    try:
        got = confluent_consume(consumer, topic, len(keyed) + len(keyless), PARTITIONS)
    finally:
        consumer.close()
    assert {g.key: (g.value, g.partition) for g in got if g.key is not None} == {
        key: (value, key_partition(key)) for key, value in keyed.items()}
    unkeyed = [g for g in got if g.key is None]
    assert sorted(g.value or b"" for g in unkeyed) == sorted(keyless)
    assert len({g.partition for g in unkeyed}) == PARTITIONS  # round robin reaches every partition
    assert all(abs(g.timestamp_ms - time.time() * 1000) < 60_000 for g in got)  # stamped when taken in


def test_a_binary_batch_datagram(udp_broker: MartletProcess, sender: Sender) -> None:
    topic = unique_topic("udp-binary")
    confluent_create_topic(udp_broker.bootstrap, topic, PARTITIONS)
    now = int(time.time() * 1000)
    batch = build_batch([NewRecord(b"k%d" % i, b"v%d" % i, now + i, (("h", b"x"),)) for i in range(5)])
    before = counters(udp_broker)
    sender.send(binary(topic, 2, batch), binary(topic, -1, batch))
    after = wait_received(udp_broker, before["received"] + 2)
    assert (after["accepted"] - before["accepted"], after["records"] - before["records"]) == (2, 10), after
    consumer = confluent_consumer(udp_broker.bootstrap)
    try:
        got = confluent_consume(consumer, topic, 10, PARTITIONS)
    finally:
        consumer.close()
    assert sorted((g.key, g.value, g.timestamp_ms) for g in got) == sorted(
        (b"k%d" % i, b"v%d" % i, now + i) for i in range(5) for _ in range(2))
    assert all(g.headers == (("h", b"x"),) for g in got)
    in_two = [g for g in got if g.partition == 2]
    assert len(in_two) >= 5 and [g.offset for g in in_two][:5] == [0, 1, 2, 3, 4]  # one batch, in order


def bad_crc(batch: bytearray) -> bytearray:
    batch[-1] ^= 0xFF
    return batch


def test_malformed_datagrams_are_counted_and_dropped(udp_broker: MartletProcess, sender: Sender) -> None:
    topic = unique_topic("udp-bad")
    confluent_create_topic(udp_broker.bootstrap, topic, 1)
    batch = build_batch([NewRecord(b"k", b"v", int(time.time() * 1000))])
    malformed = [b"\xde\xad\xbe\xef garbage without a newline", b"", b"x" * 300 + b"\nvalue",
                 binary(topic, 0, batch[:-4]), binary(topic, 0, bad_crc(bytearray(batch))), binary(topic, 7, batch),
                 b"\x00\x00", f"{topic} \nno key after the space".encode()]
    unknown = [b"no-such-topic-udp\nvalue", binary("no-such-topic-udp", 0, batch)]
    before = counters(udp_broker)
    sender.send(*malformed, *unknown)
    after = wait_received(udp_broker, before["received"] + len(malformed) + len(unknown))
    assert after["malformed"] - before["malformed"] == len(malformed), after
    assert after["unknown_topic"] - before["unknown_topic"] == len(unknown), after
    assert after["accepted"] == before["accepted"]
    # The broker still serves: Kafka, HTTP and the UDP port.
    sender.send(f"{topic}\nstill here".encode())
    assert wait_received(udp_broker, after["received"] + 1)["accepted"] == after["accepted"] + 1
    consumer = confluent_consumer(udp_broker.bootstrap)
    try:
        assert [g.value for g in confluent_consume(consumer, topic, 1, 1)] == [b"still here"]
    finally:
        consumer.close()


def test_counters_in_metrics(udp_broker: MartletProcess, sender: Sender) -> None:
    sender.send(b"not-a-topic-metrics\nx")
    wait_received(udp_broker, 1)
    with urllib.request.urlopen(f"http://{udp_broker.http}/metrics", timeout=HTTP_TIMEOUT_S) as answer:
        text = answer.read().decode()
    samples = {(s.name, s.labels.get("outcome", "")): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    now = counters(udp_broker)
    for outcome in ("accepted", "malformed", "rate_limited", "unknown_topic", "dropped_full", "not_served"):
        assert ("martlet_udp_datagrams_total", outcome) in samples
    assert samples[("martlet_udp_datagrams_total", "unknown_topic")] >= 1
    assert samples[("martlet_udp_datagrams_received_total", "")] <= now["received"]
    assert ("martlet_udp_records_total", "") in samples


def test_a_burst_over_the_rate_limit(martlet_process: Callable[..., MartletProcess], tmp_path: Path) -> None:
    config = tmp_path / "udp.toml"
    config.write_text(f'[udp]\nlisten = "127.0.0.1:0"\nrate_per_source = {RATE}\n')
    process = martlet_process(extra_args=["--config", str(config)])
    topic = unique_topic("udp-rate")
    confluent_create_topic(process.bootstrap, topic, 1)
    sending = Sender(process)
    burst, chunk = 500, 100
    started = time.monotonic()
    try:
        for sent in range(chunk, burst + 1, chunk):  # in chunks the kernel's receive buffer surely holds
            sending.send(*(f"{topic}\nrecord {i}".encode() for i in range(chunk)))
            got = wait_received(process, sent)
    finally:
        sending.close()
    refilled = (time.monotonic() - started) * RATE
    assert got["received"] == burst
    assert got["accepted"] + got["rate_limited"] == burst, got
    assert RATE <= got["accepted"] <= RATE + refilled + 1, (got, refilled)
    assert status(process)["udp"] is not None


def test_udp_is_off_by_default(martlet: MartletProcess) -> None:
    assert status(martlet)["udp"] is None


def test_bench_udp_reports_accepted_and_persisted() -> None:
    done = subprocess.run([sys.executable, "-m", "martlet.cli", "bench", "--udp", "--datagrams", "2000",
                           "--rounds", "1"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "accepted/s" in done.stdout and "persisted after" in done.stdout, done.stdout
    refused = subprocess.run([sys.executable, "-m", "martlet.cli", "bench", "--datagrams", "5"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--datagrams takes a positive count, with --udp" in refused.stderr
