"""`martlet produce` and `martlet consume` run as a user runs them (subprocesses, the broker named
by MARTLET_BOOTSTRAP), against Martlet and, where Kafka does the same, against the reference
Apache Kafka: lines in and out, keys and headers through JSON lines, format strings, where a
consume starts and stops, a group's commits, and the exit codes (0 done, 1 refused, 3
unreachable)."""

from __future__ import annotations

import base64
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import unique_topic

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "martlet.cli"]
RUN_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 30.0
UNREACHABLE_TIMEOUT_S = 1.0
SEQ_100 = "".join(f"{i}\n" for i in range(1, 101))


@pytest.fixture(scope="module", params=["martlet", "reference"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    broker = request.getfixturevalue("martlet" if request.param == "martlet" else "reference_kafka")
    return str(broker.bootstrap)


@pytest.fixture(scope="module")
def martlet_bootstrap(martlet: Any) -> str:
    return str(martlet.bootstrap)


@pytest.fixture(scope="module")
def closed_port() -> Iterator[str]:
    """A loopback port bound but not listening: connections to it are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = unique_topic("tools-msg")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: the future fails once its client is gone
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(CLIENT_TIMEOUT_S)
    return name


def martlet_cli(bootstrap: str, *args: str, stdin: str | bytes = b"", code: int = 0) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "MARTLET_BOOTSTRAP": bootstrap}
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run([*CLI, *args], env=env, input=data, capture_output=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == code, (f"martlet {' '.join(args)} at {bootstrap}: exit {done.returncode}, expected {code}\n"
                                     f"{done.stdout.decode(errors='replace')}\n{done.stderr.decode(errors='replace')}")
    return done


def lines(bootstrap: str, *args: str) -> list[str]:
    return martlet_cli(bootstrap, *args).stdout.decode().splitlines()


def records(bootstrap: str, *args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(bootstrap, *args, "--format", "json")]


def test_seq_100_in_one_record_a_line_and_back_from_the_beginning(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    produced = martlet_cli(bootstrap, "produce", topic, stdin=SEQ_100)
    assert produced.stdout == b"" and produced.stderr.decode() == f"produced 100 records to {topic}\n"
    assert lines(bootstrap, "consume", topic, "--from-beginning", "--count", "100") == [str(i) for i in range(1, 101)]
    assert lines(bootstrap, "consume", topic) == [str(i) for i in range(1, 101)]  # no --count: stops at the end
    assert lines(bootstrap, "consume", topic, "--count", "3") == ["1", "2", "3"]


def test_keys_headers_and_partitions_round_trip_through_json_lines(bootstrap: str) -> None:
    topic, copy = new_topic(bootstrap, 3), new_topic(bootstrap, 3)
    sent = [{"key": "k0", "value": "plain", "headers": {"trace": "t0", "empty": None}, "partition": 2},
            {"key": None, "value": {"n": [1, 2]}, "partition": 1},
            {"key": "k2", "value": None, "headers": [["h", "1"], ["h", "2"]], "partition": 2},
            {"key": base64.b64encode(b"\xff\xfe").decode(), "key_encoding": "base64", "value": "é", "partition": 0}]
    martlet_cli(bootstrap, "produce", topic, "--format", "json", "--header", "via=cli",
                stdin="".join(json.dumps(record) + "\n" for record in sent))
    got = sorted(records(bootstrap, "consume", topic), key=lambda r: (r["partition"], r["offset"]))
    assert [(r["partition"], r["offset"]) for r in got] == [(0, 0), (1, 0), (2, 0), (2, 1)]
    first = got[2]
    assert (first["key"], first["value"], first["headers"]) == ("k0", "plain", [["trace", "t0"], ["empty", None],
                                                                               ["via", "cli"]])
    assert (got[1]["key"], got[1]["value"]) == (None, '{"n":[1,2]}')
    assert got[3]["value"] is None and got[3]["headers"] == [["h", "1"], ["h", "2"], ["via", "cli"]]
    assert (got[0]["key"], got[0]["key_encoding"], got[0]["value"]) == ("//4=", "base64", "é")
    assert isinstance(got[0]["timestamp"], int) and got[0]["topic"] == topic
    # What consume prints, produce reads back: a copy with the same keys, values, headers and partitions.
    martlet_cli(bootstrap, "produce", copy, "--format", "json",
                stdin="".join(json.dumps(record) + "\n" for record in got))
    again = sorted(records(bootstrap, "consume", copy), key=lambda r: (r["partition"], r["offset"]))
    assert [{**r, "topic": topic, "timestamp": 0} for r in again] == [{**r, "timestamp": 0} for r in got]


def test_key_separator_headers_and_a_format_string(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    martlet_cli(bootstrap, "produce", topic, "--key-separator", ":", "--header", "a=1", "-H", "b=x=y",
                "--compression", "lz4", "--acks", "1", stdin="k1:v1\nno key\nk3:v:3\n")
    printed = lines(bootstrap, "consume", topic, "--format", "%t|%p|%o|%k|%s|%K|%S|%h\\n")
    assert printed == [f"{topic}|0|0|k1|v1|2|2|a=1,b=x=y", f"{topic}|0|1||no key|-1|6|a=1,b=x=y",
                       f"{topic}|0|2|k3|v:3|2|3|a=1,b=x=y"]
    assert lines(bootstrap, "consume", topic, "--key", "--key-separator", "=") == ["k1=v1", "=no key", "k3=v:3"]
    as_json = [json.loads(line) for line in lines(bootstrap, "consume", topic, "--output", "json", "--no-key")]
    assert [(r["value"], "key" in r) for r in as_json] == [("v1", False), ("no key", False), ("v:3", False)]
    timestamps = lines(bootstrap, "consume", topic, "--format", "%T\\n")
    assert all(abs(int(ms) - time.time() * 1000) < 600_000 for ms in timestamps)


def test_where_a_consume_starts(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    martlet_cli(bootstrap, "produce", topic, stdin="".join(f"a{i}\n" for i in range(10)))
    last_a = max(r["timestamp"] for r in records(bootstrap, "consume", topic))
    martlet_cli(bootstrap, "produce", topic, stdin="".join(f"b{i}\n" for i in range(5)))
    assert lines(bootstrap, "consume", topic, "--offset", "12") == ["b2", "b3", "b4"]
    assert lines(bootstrap, "consume", topic, "--offset", "-2") == ["b3", "b4"]
    assert lines(bootstrap, "consume", topic, "--offset", "-100", "--count", "1") == ["a0"]
    assert lines(bootstrap, "consume", topic, "--from-timestamp", str(last_a + 1)) == [f"b{i}" for i in range(5)]
    iso = datetime.datetime.fromtimestamp((last_a + 1) / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    assert lines(bootstrap, "consume", topic, "--from-timestamp", iso) == [f"b{i}" for i in range(5)]
    assert lines(bootstrap, "consume", topic, "--from-end") == []


def test_from_the_end_with_a_count_prints_only_newer_records(bootstrap: str) -> None:
    topic = new_topic(bootstrap)
    martlet_cli(bootstrap, "produce", topic, stdin="old\n")
    env = {**os.environ, "MARTLET_BOOTSTRAP": bootstrap}
    consumer = subprocess.Popen([*CLI, "consume", topic, "--from-end", "--count", "3"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    producer = Producer({"bootstrap.servers": bootstrap})
    deadline, sent = time.monotonic() + RUN_TIMEOUT_S, 0
    try:
        while consumer.poll() is None and time.monotonic() < deadline:  # until it has its 3 new records
            producer.produce(topic, value=b"new%d" % sent)
            producer.flush(CLIENT_TIMEOUT_S)
            sent += 1
            producer.poll(0.05)
        out, err = consumer.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        consumer.kill()
    assert consumer.returncode == 0, err
    printed = out.decode().splitlines()
    first = int(printed[0].removeprefix("new"))
    assert printed == [f"new{first + i}" for i in range(3)]


def test_a_group_commits_what_it_printed_and_goes_on_from_there(bootstrap: str) -> None:
    topic, group = new_topic(bootstrap, 2), unique_topic("tools-group")
    martlet_cli(bootstrap, "produce", topic, "--format", "json",
                stdin="".join(json.dumps({"value": str(i), "partition": 0}) + "\n" for i in range(1, 101)))
    assert lines(bootstrap, "consume", topic, "--from-beginning", "--count", "30", "--group", group) == [
        str(i) for i in range(1, 31)]
    assert lines(bootstrap, "consume", topic, "--group", group) == [str(i) for i in range(31, 101)]
    assert lines(bootstrap, "consume", topic, "--group", group, "--partition", "0", "--offset", "-5", "--no-commit") == [
        str(i) for i in range(96, 101)]


def test_partitions_chosen_and_checked(bootstrap: str) -> None:
    topic = new_topic(bootstrap, 3)
    martlet_cli(bootstrap, "produce", topic, "--format", "json",
                stdin="".join(json.dumps({"value": f"p{i % 3}-{i}", "partition": i % 3}) + "\n" for i in range(9)))
    martlet_cli(bootstrap, "produce", topic, "--partition", "1", stdin="p1-late\n")
    assert lines(bootstrap, "consume", topic, "--partition", "1") == ["p1-1", "p1-4", "p1-7", "p1-late"]
    assert sorted(lines(bootstrap, "consume", topic, "-p", "0", "-p", "2")) == ["p0-0", "p0-3", "p0-6",
                                                                               "p2-2", "p2-5", "p2-8"]
    stderr = martlet_cli(bootstrap, "consume", topic, "--partition", "3", code=1).stderr.decode()
    assert stderr == f"martlet: topic '{topic}' has no partition 3 (it has 3)\n"
    martlet_cli(bootstrap, "produce", topic, "--partition", "5", stdin="x\n", code=1)
    failed = martlet_cli(bootstrap, "produce", topic, "--format", "json", stdin='{"value": "x", "partition": 7}\n',
                         code=1).stderr.decode()
    assert "1 of 1 records failed" in failed and "Unknown partition" in failed


def test_an_unknown_topic_is_refused(bootstrap: str) -> None:
    for command in (["produce", "no-such-topic"], ["consume", "no-such-topic"]):
        stderr = martlet_cli(bootstrap, *command, stdin="x\n", code=1).stderr.decode()
        assert stderr.startswith("martlet: unknown topic 'no-such-topic'") and stderr.endswith(
            "(UNKNOWN_TOPIC_OR_PART)\n"), stderr


def test_no_broker_is_unreachable_within_the_timeout(closed_port: str) -> None:
    for command in (["produce", "t"], ["consume", "t"], ["consume", "t", "--group", "g"]):
        started = time.monotonic()
        stderr = martlet_cli(closed_port, *command, "--timeout", str(UNREACHABLE_TIMEOUT_S), stdin="x\n",
                             code=3).stderr.decode()
        assert stderr.startswith(f"martlet: no broker answered at {closed_port} within 1 s"), stderr
        assert time.monotonic() - started < UNREACHABLE_TIMEOUT_S + 5  # the interpreter's start included


def test_usage_errors(martlet_bootstrap: str) -> None:
    topic = new_topic(martlet_bootstrap)
    for args in (["--format", "%x"], ["--format", "jsno"], ["--count", "0"], ["--from-end", "--offset", "3"]):
        martlet_cli(martlet_bootstrap, "consume", topic, *args, code=2)
    martlet_cli(martlet_bootstrap, "produce", topic, "--header", "novalue", code=2)
    bad = martlet_cli(martlet_bootstrap, "produce", topic, "--format", "json", stdin='{"value": "ok"}\nnot json\n',
                      code=1).stderr.decode()
    assert "line 2: not JSON" in bad
    assert lines(martlet_bootstrap, "consume", topic) == ["ok"]


def test_a_large_file_with_a_progress_bar_on_stderr_only(martlet_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(martlet_bootstrap, 2)
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i:05d} {'x' * 40}\n" for i in range(20_000)))
    produced = martlet_cli(martlet_bootstrap, "produce", topic, "--file", str(path), "--progress")
    stderr = produced.stderr.decode()
    assert produced.stdout == b""
    assert f"producing to {topic}" in stderr and "1.0/1.0 MB" in stderr, stderr
    assert stderr.endswith(f"produced 20000 records to {topic}\n")
    consumed = martlet_cli(martlet_bootstrap, "consume", topic, "--progress")
    assert sorted(consumed.stdout.decode().splitlines()) == path.read_text().splitlines()
    assert "20000/20000" in consumed.stderr.decode() and b"consuming" not in consumed.stdout


def test_ctrl_c_ends_a_group_consume_cleanly_and_commits_what_it_printed(martlet_bootstrap: str) -> None:
    topic, group = new_topic(martlet_bootstrap), unique_topic("tools-group")
    martlet_cli(martlet_bootstrap, "produce", topic, stdin=SEQ_100)
    env = {**os.environ, "MARTLET_BOOTSTRAP": martlet_bootstrap}
    # The group's partition assigned (--partition): its commits without a join's wait; a subscribed
    # member commits through the same path (test_a_group_commits_what_it_printed_and_goes_on_from_there).
    consumer = subprocess.Popen([*CLI, "consume", topic, "--group", group, "--partition", "0", "--from-beginning",
                                 "--follow"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert consumer.stdout is not None
        printed = [consumer.stdout.readline() for _ in range(100)]  # all there is, then it waits for more
        consumer.send_signal(signal.SIGINT)
        out, err = consumer.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        consumer.kill()
    assert consumer.returncode == 130 and out == b"" and err.decode() == f"consumed 100 records from {topic}\n"
    assert [line.decode() for line in printed] == SEQ_100.splitlines(keepends=True)
    martlet_cli(martlet_bootstrap, "produce", topic, stdin="101\n")
    assert lines(martlet_bootstrap, "consume", topic, "--group", group, "--partition", "0") == ["101"]


def test_an_idle_timeout_ends_a_consume_that_waits_for_more(martlet_bootstrap: str) -> None:
    topic = new_topic(martlet_bootstrap)
    martlet_cli(martlet_bootstrap, "produce", topic, stdin="a\nb\n")
    started = time.monotonic()
    assert lines(martlet_bootstrap, "consume", topic, "--count", "5", "--timeout-idle", "1") == ["a", "b"]
    assert 1 <= time.monotonic() - started < RUN_TIMEOUT_S
