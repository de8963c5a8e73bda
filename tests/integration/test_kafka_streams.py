"""A Kafka Streams word count with exactly_once_v2 (compat/clients/streams_app.py) is killed
with -9 three times mid-run and restarted each time with a fresh state dir, so it must
restore its counts from the compacted changelog, while a producer keeps feeding it lines.
The committed output (read_committed) must end at the exact count of every word, and no
committed count may ever go past the true one, repeat or be skipped: the app has no record
cache, so each word's committed counts are 1, 2, ..., N. (Without exactly-once, the same
test fails: the app's at_least_once counts words twice after a kill.)

Run on the reference Kafka and on Martlet alike, to be sure the test itself is right.
"""

from __future__ import annotations

import random
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from martlet.compat.clients.streams_app import SIGTERM_EXIT, WordCountApp, app_classpath
from tests.fixtures.martlet import wait_until
from tests.integration.clients import (
    ADMIN_TIMEOUT_S,
    confluent_consumer,
    confluent_create_topic,
    confluent_producer_conf,
    unique_topic,
)

pytestmark = [pytest.mark.integration, pytest.mark.java]

PARTITIONS = 3
LINES = 3_000
LINES_PER_TICK = 10
TICK_S = 0.1  # the producer's pace: 100 lines a second, so the app is killed while input flows
HELD_LINES = 500  # produced only once the last run started: every kill comes before the end
VOCABULARY = ("martlet", "swift", "kestrel", "heron", "wren", "finch", "plover", "egret",
              "osprey", "dunlin", "merlin", "curlew")
KILLS = 3
RUNNING_TIMEOUT_S = 60.0
# A start after a kill waits for the killed member's session (6 s) and, with a fresh state
# dir (a new transactional id), for the killed transaction's timeout (10 s in Streams' EOS).
PROGRESS_TIMEOUT_S = 60.0
FINISH_TIMEOUT_S = 90.0
PRODUCE_TIMEOUT_S = 60.0
QUIET_S = 1.0


def make_lines(seed: int = 14) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 8))) for _ in range(LINES)]


class PacedProducer(threading.Thread):
    """Produces `lines` into `topic` at a steady pace, keyed by line number; the last
    HELD_LINES wait for `release`."""

    def __init__(self, bootstrap: str, topic: str, lines: list[str]) -> None:
        super().__init__(name="streams-input", daemon=True)
        self.producer = Producer(confluent_producer_conf(bootstrap, **{"enable.idempotence": True}))
        self.topic = topic
        self.lines = lines
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.release = threading.Event()

    def on_delivery(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))

    def run(self) -> None:
        for start in range(0, len(self.lines), LINES_PER_TICK):
            while start >= len(self.lines) - HELD_LINES and not self.release.wait(TICK_S):
                if self.stop_event.is_set():
                    return
            if self.stop_event.wait(TICK_S):
                return
            for number in range(start, min(start + LINES_PER_TICK, len(self.lines))):
                self.producer.produce(self.topic, key=str(number), value=self.lines[number],
                                      on_delivery=self.on_delivery)
            self.producer.poll(0)

    def finish(self) -> None:
        self.join(timeout=len(self.lines) / LINES_PER_TICK * TICK_S + PRODUCE_TIMEOUT_S)
        assert not self.is_alive(), "the input producer did not finish"
        left = self.producer.flush(PRODUCE_TIMEOUT_S)
        self.producer.close()
        assert left == 0 and not self.errors, f"input undelivered: {left} left, errors {self.errors[:5]}"


class CommittedCounts:
    """Reads the output topic read_committed from the start: each word's counts in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer: Consumer = confluent_consumer(bootstrap, **{"isolation.level": "read_committed"})
        self.partitions = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
        self.consumer.assign(self.partitions)
        self.history: dict[str, list[int]] = {}

    def poll(self, timeout_s: float = 0.2) -> int:
        """Read what is there; returns how many counts came."""
        messages = self.consumer.consume(500, timeout_s)
        for msg in messages:
            assert msg.error() is None, f"output consumer: {msg.error()}"
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None and len(value) == 8, (key, value)
            self.history.setdefault(key.decode(), []).append(struct.unpack(">q", value)[0])
        return len(messages)

    def wait(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Read on until `condition` holds or the time runs out."""
        def read_and_check() -> bool:
            self.poll()
            return condition()

        return wait_until(read_and_check, timeout_s)

    def catch_up(self, timeout_s: float) -> bool:
        """Read until a poll of QUIET_S finds nothing: all that is committed by now is read."""
        return wait_until(lambda: self.poll(QUIET_S) == 0, timeout_s)

    def latest(self) -> dict[str, int]:
        return {word: counts[-1] for word, counts in self.history.items()}

    def counted(self) -> int:
        """Words counted so far, as far as committed output tells."""
        return sum(self.latest().values())

    def over(self, expected: Counter[str]) -> dict[str, tuple[int, int]]:
        """Words whose committed count went past the true one: word -> (count, true count)."""
        return {word: (count, expected[word]) for word, count in self.latest().items() if count > expected[word]}

    def wait_end(self, timeout_s: float) -> bool:
        """Read up to the high watermark of every partition (no transaction may be open: the
        position passes commit and abort markers, so it reaches the watermark)."""
        ends = [self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in self.partitions]

        def at_end() -> bool:
            positions = self.consumer.position(self.partitions)
            return all(pos.offset >= end for pos, end in zip(positions, ends, strict=True))

        return self.wait(at_end, timeout_s)

    def close(self) -> None:
        self.consumer.close()


def _runs(counts: list[int]) -> str:
    """1, 2, 3, 5, 6 -> "1-3, 5-6": a long sequence shown short."""
    spans: list[list[int]] = []
    for count in counts:
        if spans and count == spans[-1][1] + 1:
            spans[-1][1] = count
        else:
            spans.append([count, count])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def cleanup_policy(bootstrap: str, topic: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    configs = admin.describe_configs([resource])[resource].result(timeout=ADMIN_TIMEOUT_S)
    return str(configs["cleanup.policy"].value)


@pytest.fixture(params=["reference", "martlet"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "reference":
        return str(request.getfixturevalue("reference_kafka").bootstrap)
    return str(request.getfixturevalue("martlet_process")().bootstrap)


@pytest.fixture
def apps() -> Iterator[list[WordCountApp]]:
    started: list[WordCountApp] = []
    try:
        yield started
    finally:
        for app in started:
            app.kill()


def test_word_count_exactly_once_across_kill_9(bootstrap: str, apps: list[WordCountApp], tmp_path: Path) -> None:
    app_classpath()  # build (or find) the app before anything is timed
    input_topic, output_topic = unique_topic("streams-in"), unique_topic("streams-out")
    application_id = unique_topic("wordcount")
    for topic in (input_topic, output_topic):
        confluent_create_topic(bootstrap, topic, PARTITIONS)
    lines = make_lines()
    expected = Counter(word for line in lines for word in line.split())
    total = sum(expected.values())

    def start(run: int) -> WordCountApp:
        # a fresh state dir each run: the counts come back from the changelog only
        app = WordCountApp(bootstrap, application_id, input_topic, output_topic,
                           tmp_path / f"state-{run}", tmp_path / f"app-{run}.log")
        apps.append(app)
        app.wait_state("RUNNING", RUNNING_TIMEOUT_S)
        return app

    began = time.monotonic()
    producer = PacedProducer(bootstrap, input_topic, lines)
    output = CommittedCounts(bootstrap, output_topic)
    try:
        producer.start()
        killed_at: list[int] = []
        for run in range(KILLS):
            app = start(run)
            floor = output.counted()
            moved = output.wait(lambda: output.counted() > floor, PROGRESS_TIMEOUT_S)  # noqa: B023
            assert moved, f"run {run}: no new committed output; app log:\n{app.log_tail()}"
            app.kill()  # now: it has committed, and has lines to go
            assert output.catch_up(PROGRESS_TIMEOUT_S), "the output never stopped coming after a kill"
            killed_at.append(output.counted())
            assert killed_at[-1] < total, f"run {run} had counted every word when it was killed"
        app = start(KILLS)
        producer.release.set()
        producer.finish()
        done = output.wait(lambda: output.latest() == expected or bool(output.over(expected)), FINISH_TIMEOUT_S)
        assert not output.over(expected), f"counted past the true counts: {output.over(expected)}"
        assert done, (f"counts never reached the expected ones: got {output.latest()}, want {dict(expected)}; "
                      f"app log:\n{app.log_tail()}")
        assert app.stop() == SIGTERM_EXIT, f"the app failed on close; log:\n{app.log_tail()}"
        # whatever the close committed is read too
        assert output.wait_end(PROGRESS_TIMEOUT_S), "the output's end was never reached"
    finally:
        producer.stop_event.set()
        producer.join(timeout=5)
        output.close()

    # the counts came back from these after each kill (Streams made them)
    assert cleanup_policy(bootstrap, f"{application_id}-counts-changelog") == "compact"
    assert cleanup_policy(bootstrap, f"{application_id}-words-repartition") == "delete"
    assert output.latest() == expected
    for word, counts in output.history.items():
        # the app has no record cache: each word's committed counts are 1, 2, ... exactly once
        assert counts == list(range(1, expected[word] + 1)), (
            f"{word}: committed counts repeat, skip or overshoot: {_runs(counts)}")
    print(f"killed with {killed_at} of {total} words counted; "
          f"{sum(map(len, output.history.values()))} committed counts; {time.monotonic() - began:.1f}s")
