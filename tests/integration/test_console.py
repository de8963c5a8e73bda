"""The web console in real headless Chromium (issue 17, point 3).

One broker for the module, with a topic a confluent-kafka producer filled (a known number of
records per partition, keys, headers and timestamps of our choosing) and a consumer group whose
one member read everything and committed a known lag per partition. Every page is loaded in
Chromium and what it shows is held to what the clients did; the create and delete actions go
through the page's confirmation dialog and are checked with a Kafka AdminClient. Each page's
screenshot goes to $MARTLET_SCREENSHOTS when set (CI keeps them as artifacts; set it to docs/console
to refresh the pictures the docs show), else to a throwaway folder, so a test run leaves the tree clean.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from playwright.sync_api import Page, expect

from tests.fixtures.browser import ConsolePage
from tests.fixtures.martlet import MartletProcess, wait_until
from tests.integration.clients import Deadline, confluent_create_topic
from tests.support.console import screenshot

pytestmark = pytest.mark.integration

TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 4
COUNTS = {p: 6 + 3 * p for p in range(PARTITIONS)}  # records produced to each partition
LAG = {p: p + 1 for p in range(PARTITIONS)}  # the group commits this far short of the end
BASE_TS_MS = (int(time.time()) - 3600) * 1000  # record i of partition p: BASE + p * 100 s + i s
GROUP_CONFIG = b"[groups]\ninitial_rebalance_delay_ms = 0\n"
WAIT_S = 30.0

Pages = Callable[[str], ConsolePage]


def timestamp_ms(partition: int, index: int) -> int:
    return BASE_TS_MS + partition * 100_000 + index * 1000


def record_key(partition: int, index: int) -> str:
    return f"order-{partition}-{index}"


def record_value(partition: int, index: int) -> str:
    return json.dumps({"order": index, "partition": partition, "amount": round(9.5 * index + partition, 2)})


@dataclass
class Scene:
    broker: MartletProcess
    consumer: Consumer

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://{self.broker.http}{path}", timeout=10) as response:
            return json.load(response)


def produce(bootstrap: str) -> None:
    """COUNTS[p] records into each partition p, with keys, two headers and explicit timestamps."""
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p, count in COUNTS.items():
        for i in range(count):
            producer.produce(TOPIC, partition=p, key=record_key(p, i), value=record_value(p, i),
                             headers=[("source", b"console-test"), ("index", str(i).encode())],
                             timestamp=timestamp_ms(p, i), on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0 and not failed, failed


def consume_and_commit(bootstrap: str) -> Consumer:
    """A group member that reads every record, then commits LAG[p] short of each partition's end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "console-test"})
    consumer.subscribe([TOPIC])
    read = 0
    deadline = Deadline(WAIT_S)
    while read < sum(COUNTS.values()) and not deadline.passed:
        for message in consumer.consume(100, min(1.0, deadline.left())):
            assert message.error() is None, message.error()
            read += 1
    assert read == sum(COUNTS.values()), f"read {read} records"
    offsets = [TopicPartition(TOPIC, p, COUNTS[p] - LAG[p]) for p in range(PARTITIONS)]
    assert all(tp.error is None for tp in consumer.commit(offsets=offsets, asynchronous=False))
    return consumer


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    folder = tmp_path_factory.mktemp("console")
    config = folder / "martlet.toml"
    config.write_bytes(GROUP_CONFIG)
    broker = MartletProcess(folder / "data", ["--config", str(config)])
    broker.start()
    try:
        confluent_create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        produce(broker.bootstrap)
        consumer = consume_and_commit(broker.bootstrap)
        try:
            yield Scene(broker, consumer)
        finally:
            consumer.close()
    finally:
        broker.stop()


def cell(row: Any, field: str) -> Any:
    return row.locator(f'[data-field="{field}"]')


def topic_names(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def test_overview_shows_the_broker_and_its_load(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/")
    status = scene.api("/api/v1/status")
    expect(page.get_by_test_id("status-version")).to_have_text(status["version"])
    expect(page.get_by_test_id("status-topics")).to_have_attribute("data-value", str(status["topics"]))
    expect(page.get_by_test_id("status-partitions")).to_have_attribute("data-value", str(status["partitions"]))
    uptime = page.get_by_test_id("status-uptime")
    first_uptime = uptime.get_attribute("data-value") or ""
    assert float(first_uptime) > 0
    expect(page.get_by_test_id("status-kafka")).to_have_text(scene.broker.bootstrap)
    expect(page.get_by_test_id("store-kind")).to_have_text("local")
    expect(page.get_by_test_id("store-health")).to_have_text("healthy")
    expect(page.get_by_test_id("memory-bar")).to_have_attribute("data-budget", str(status["memory"]["budget_bytes"]))
    rows = page.get_by_test_id("broker-row")
    expect(rows).to_have_count(len(status["brokers"]))
    expect(cell(rows.first, "partitions")).to_have_text(str(status["brokers"][0]["partitions"]))
    expect(uptime).not_to_have_attribute("data-value", first_uptime)  # refreshed by itself (every 3 s)
    screenshot(page, "overview.png")
    assert console.problems == []


def test_topic_pages_match_what_was_produced(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/topics")
    row = page.locator(f'[data-testid="topic-row"][data-topic="{TOPIC}"]')
    expect(cell(row, "partitions")).to_have_text(str(PARTITIONS))
    expect(cell(row, "records")).to_have_text(f"{sum(COUNTS.values()):,}")
    console.click_and_wait(row.get_by_role("link", name=TOPIC))
    expect(page.get_by_test_id("topic-name")).to_have_text(TOPIC)
    for p, count in COUNTS.items():
        partition = page.locator(f'[data-testid="partition-row"][data-partition="{p}"]')
        expect(cell(partition, "high_watermark")).to_have_text(f"{count:,}")
        expect(cell(partition, "log_start_offset")).to_have_text("0")
        expect(cell(partition, "records")).to_have_text(f"{count:,}")
    check_range_map(page, scene.api(f"/api/v1/topics/{TOPIC}"))
    screenshot(page, "topic.png")
    assert console.problems == []


def check_range_map(page: Page, topic: dict[str, Any]) -> None:
    """One segment per partition, at the slots the API gives, together covering 0..65535 once."""
    segments = page.get_by_test_id("range-segment")
    expect(segments).to_have_count(PARTITIONS)
    drawn = sorted((int(s.get_attribute("data-first") or -1), int(s.get_attribute("data-last") or -1),
                    int(s.get_attribute("data-partition") or -1)) for s in segments.all())
    wanted = sorted((p["slots"][0], p["slots"][1], p["partition"]) for p in topic["partitions"])
    assert drawn == wanted
    assert drawn[0][0] == 0 and drawn[-1][1] == 65535
    assert all(after[0] == before[1] + 1 for before, after in zip(drawn, drawn[1:])), drawn
    for first, last, p in drawn:
        label = page.locator(f'[data-testid="range-label"][data-partition="{p}"]')
        expect(label).to_have_text(f"P{p}: {first}–{last}")


def test_group_pages_match_the_consumer(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/groups")
    row = page.locator(f'[data-testid="group-row"][data-group="{GROUP}"]')
    expect(cell(row, "state")).to_have_text("Stable")
    expect(cell(row, "members")).to_have_text("1")
    expect(cell(row, "lag")).to_have_text(str(sum(LAG.values())))
    console.click_and_wait(row.get_by_role("link", name=GROUP))
    for p in range(PARTITIONS):
        offsets = page.locator(f'[data-testid="offset-row"][data-topic="{TOPIC}"][data-partition="{p}"]')
        expect(cell(offsets, "committed")).to_have_text(str(COUNTS[p] - LAG[p]))
        expect(cell(offsets, "high_watermark")).to_have_text(str(COUNTS[p]))
        expect(cell(offsets, "lag")).to_have_text(str(LAG[p]))
    expect(page.get_by_test_id("group-lag")).to_have_text(str(sum(LAG.values())))
    member = page.get_by_test_id("member-row")
    expect(member).to_have_count(1)
    expect(cell(member, "client_id")).to_have_text("console-test")
    expect(cell(member, "assignment")).to_have_text(f"{TOPIC} [0, 1, 2, 3]")
    chart = page.get_by_test_id("lag-chart")
    expect(chart).to_have_attribute("data-last-lag", str(sum(LAG.values())))
    # The member catches up; the page's next sample (every 5 s) shows the lag fall to 0.
    caught_up = [TopicPartition(TOPIC, p, COUNTS[p]) for p in range(PARTITIONS)]
    assert all(tp.error is None for tp in scene.consumer.commit(offsets=caught_up, asynchronous=False))
    expect(page.get_by_test_id("group-lag")).to_have_text("0")
    expect(chart).to_have_attribute("data-last-lag", "0")
    assert int(chart.get_attribute("data-points") or 0) >= 2
    screenshot(page, "group.png")
    assert console.problems == []


def search(console: ConsolePage, partition: int, mode: str, value: str) -> Any:
    """Fill the message browser's form and return the result rows once they are shown."""
    page = console.page
    page.get_by_test_id("msg-topic").select_option(TOPIC)
    page.get_by_test_id("msg-partition").select_option(str(partition))
    page.get_by_test_id("msg-mode").select_option(mode)
    page.get_by_test_id("msg-value").fill(value)
    console.click_and_wait(page.get_by_test_id("msg-search"))
    return page.get_by_test_id("message-row")


def check_record(row: Any, partition: int, index: int) -> None:
    expect(row).to_have_attribute("data-offset", str(index))
    expect(cell(row, "key")).to_have_text(record_key(partition, index))
    expect(cell(row, "value")).to_have_text(record_value(partition, index))
    expect(cell(row, "timestamp")).to_have_attribute("data-value", str(timestamp_ms(partition, index)))
    expect(cell(row, "headers")).to_have_text(f"source=console-testindex={index}")


def test_message_browser_by_offset_timestamp_and_key(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/messages")
    p = 2
    rows = search(console, p, "offset", "4")
    expect(rows).to_have_count(COUNTS[p] - 4)
    check_record(rows.first, p, 4)
    rows = search(console, p, "timestamp", str(timestamp_ms(p, 7) - 500))  # between records 6 and 7
    expect(rows).to_have_count(COUNTS[p] - 7)
    check_record(rows.first, p, 7)
    rows = search(console, p, "key", record_key(p, 5))
    expect(rows).to_have_count(1)
    check_record(rows.first, p, 5)
    rows = search(console, p, "latest", "")
    expect(rows).to_have_count(COUNTS[p])
    rows = search(console, p, "offset", "3")
    rows = search(console, p, "offset", "3")  # the same query again (no hash change) is answered too
    check_record(rows.first, p, 3)
    screenshot(page, "messages.png")
    assert console.problems == []


def create_through_page(page: Page, name: str, partitions: int, configs: str) -> None:
    page.get_by_test_id("create-topic-name").fill(name)
    page.get_by_test_id("create-topic-partitions").fill(str(partitions))
    page.get_by_test_id("create-topic-configs").fill(configs)
    page.get_by_test_id("create-topic-submit").click()
    expect(page.get_by_test_id("confirm-dialog")).to_be_visible()


def test_create_topic_through_the_confirmation(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/topics")
    create_through_page(page, "console-cancelled", 2, "")
    page.get_by_test_id("confirm-cancel").click()
    expect(page.get_by_test_id("confirm-dialog")).to_be_hidden()
    create_through_page(page, "console-created", 3, "retention.ms=3600000\ncleanup.policy=delete")
    expect(page.get_by_test_id("confirm-text")).to_contain_text('"console-created" with 3 partition(s)')
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("topic-name")).to_have_text("console-created")
    expect(page.get_by_test_id("partition-row")).to_have_count(3)
    admin = AdminClient({"bootstrap.servers": scene.broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert "console-cancelled" not in topics and "console-cancelled" not in topic_list(scene)
    assert len(topics["console-created"].partitions) == 3
    [configs] = admin.describe_configs([ConfigResource("topic", "console-created")]).values()
    assert configs.result(timeout=10)["retention.ms"].value == "3600000"
    expect(page.locator('[data-testid="config-row"][data-config="retention.ms"] [data-field="value"]')).to_have_text("3600000")
    assert console.problems == []


def topic_list(scene: Scene) -> set[str]:
    return {t["name"] for t in scene.api("/api/v1/topics")["topics"]}


def test_create_shows_the_api_error(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/topics")
    create_through_page(page, TOPIC, 1, "")
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("create-topic-error")).to_contain_text("Not created:")
    expect(page.get_by_test_id("create-topic-error")).to_contain_text(TOPIC)
    # The browser itself logs the refused request (409); nothing else may go wrong.
    assert all("status of 409" in problem for problem in console.problems), console.problems


def test_unknown_topic_shows_the_api_error(scene: Scene, console_page: Pages) -> None:
    console = console_page(scene.broker.http)
    page = console.open("#/topics/no-such-topic")
    expect(page.get_by_test_id("error-banner")).to_be_visible()
    expect(page.get_by_test_id("error-banner")).to_contain_text("no-such-topic")
    assert all("status of 404" in problem for problem in console.problems), console.problems


def test_delete_topic_through_the_confirmation(scene: Scene, console_page: Pages) -> None:
    confluent_create_topic(scene.broker.bootstrap, "console-doomed", 2)
    console = console_page(scene.broker.http)
    page = console.open("#/topics/console-doomed")
    page.get_by_test_id("delete-topic").click()
    expect(page.get_by_test_id("confirm-text")).to_contain_text('"console-doomed"')
    page.get_by_test_id("confirm-cancel").click()
    expect(page.get_by_test_id("confirm-dialog")).to_be_hidden()
    assert "console-doomed" in topic_names(scene.broker.bootstrap)
    page.get_by_test_id("delete-topic").click()
    console.click_and_wait(page.get_by_test_id("confirm-ok"))
    expect(page.get_by_test_id("notice-banner")).to_have_text('Topic "console-doomed" deleted.')
    expect(page.locator('[data-testid="topic-row"][data-topic="console-doomed"]')).to_have_count(0)
    assert wait_until(lambda: "console-doomed" not in topic_names(scene.broker.bootstrap), WAIT_S, 0.2)
    assert console.problems == []
