"""10,000 partitions (100 topics x 100) with a little traffic each: the memory pool stays
within its budget, and the whole broker, with the default configuration, stays under
512 MiB of resident memory."""

from __future__ import annotations

import asyncio
import os

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from martlet.engine import partitions as engine_partitions
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.local import LocalStore
from martlet.engine.types import TopicPartition as EngineTopicPartition
from tests.integration.clients import unique_topic
from tests.unit.engine.log.log_batches import make_batch

pytestmark = pytest.mark.integration

TOPICS, PER_TOPIC = 100, 100
RSS_LIMIT_KIB = 512 * 1024
BUDGET_BYTES = 1 << 20


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return int(fields["VmHWM"].split()[0])


def test_ten_thousand_partitions_stay_under_512_mib(martlet_process) -> None:
    broker = martlet_process()  # the default configuration
    names = [unique_topic(f"many{i}") for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for start in range(0, TOPICS, 10):
        futures = admin.create_topics([NewTopic(n, PER_TOPIC, 1) for n in names[start:start + 10]],
                                      request_timeout=120)
        for future in futures.values():
            future.result(120)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for _ in range(2):
        for name in names:
            for partition in range(PER_TOPIC):
                producer.produce(name, value=b"v" * 200, partition=partition)
            producer.poll(0)
        assert producer.flush(120) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "many", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(n, p, 0) for n in names for p in range(PER_TOPIC)])
        got = 0
        for _ in range(120):
            got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
            if got >= 2 * TOPICS * PER_TOPIC:
                break
    finally:
        consumer.close()
    assert got == 2 * TOPICS * PER_TOPIC
    assert broker.proc is not None
    peak = _peak_rss_kib(broker.proc.pid)
    print(f"10,000 partitions: peak RSS {peak / 1024:.0f} MiB")
    assert peak < RSS_LIMIT_KIB, f"peak RSS {peak / 1024:.0f} MiB with 10,000 partitions"


def test_the_memory_pool_stays_within_its_budget_across_ten_thousand_partitions(tmp_path) -> None:
    async def scenario() -> None:
        engine = Engine(LocalStore(str(tmp_path)), EngineSettings(memory_bytes=BUDGET_BYTES))
        engine.open()
        engine.start_background()
        try:
            for topic in range(TOPICS):
                await engine.topics.create(f"t{topic}", PER_TOPIC, {})
            peak = 0
            for topic in range(TOPICS):
                for partition in range(PER_TOPIC):
                    engine.partitions.append(EngineTopicPartition(f"t{topic}", partition),
                                             *make_batch(record_count=4, payload=b"p" * 2000),
                                             engine_partitions.Durability.MEMORY)
                await engine.flush()
                peak = max(peak, engine.pool.used_bytes)
            assert peak <= BUDGET_BYTES, f"the pool held {peak} bytes, over its {BUDGET_BYTES}-byte budget"
            # 20 MB went in; what memory gave up is read back from the store
            for topic in (0, TOPICS // 2, TOPICS - 1):
                data = await engine.partitions.read(EngineTopicPartition(f"t{topic}", 7), 0, 1 << 20)
                assert len(data) == len(make_batch(record_count=4, payload=b"p" * 2000)[0])
            assert engine.pool.used_bytes <= BUDGET_BYTES
        finally:
            await engine.close()

    asyncio.run(scenario())
    assert os.listdir(tmp_path)
