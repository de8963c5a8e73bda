"""The native SDK's consumers (martlet.client: SimpleConsumer, Consumer) against the session
broker, with records written by confluent_kafka (librdkafka): what is read, in order and with
every field; group members splitting a topic and handing partitions over through KIP-848
heartbeats without losing or repeating a record; manual commits; broadcast members; and
read_committed dropping an aborted transaction."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaPartition

from martlet.client.admin import Admin
from martlet.client.consumer import AsyncConsumer, Consumer
from martlet.client.errors import BrokerError, MartletError
from martlet.client.message import Message
from martlet.client.simple_consumer import AsyncSimpleConsumer, SimpleConsumer
from tests.fixtures.martlet import wait_until
from tests.integration.clients import unique_topic
from tests.support.native_consumer import FLUSH_S, POLL_S, WAIT_S, expected, produce, read_until, values

pytestmark = pytest.mark.integration

BASE_TS_MS = 1_700_000_000_000


def create_topic(bootstrap: str, topic: str, partitions: int) -> str:
    """Create the topic; its resource name."""
    with Admin(bootstrap) as admin:
        return admin.create_topic(topic, partitions).resource_name


def test_simple_consumer_reads_in_order_from_an_offset(martlet):
    topic = unique_topic("simple")
    resource_name = create_topic(martlet.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": martlet.bootstrap})
    for i in range(20):
        producer.produce(topic, value=b"v%d" % i, key=None if i == 3 else b"k%d" % i, partition=1,
                         timestamp=BASE_TS_MS + i, headers=[("n", b"%d" % i), ("empty", None)])
    assert producer.flush(FLUSH_S) == 0
    with SimpleConsumer(martlet.bootstrap, topic, 1) as consumer:
        assert (consumer.earliest(), consumer.latest()) == (0, 20)
        got: list[Message] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 13 and time.monotonic() < deadline:
            got += consumer.fetch(7 + len(got), max_messages=4)
        assert [m.offset for m in got] == list(range(7, 20))
        for m in got:
            i = m.offset
            assert (m.topic, m.partition, m.value, m.key, m.timestamp) == (topic, 1, b"v%d" % i, b"k%d" % i, BASE_TS_MS + i)
            assert m.headers == (("n", b"%d" % i), ("empty", None))
        assert consumer.fetch(3, max_messages=1)[0].key is None
        started = time.monotonic()
        assert consumer.fetch(20, timeout_s=0.5) == []
        assert time.monotonic() - started >= 0.4  # it waited for data (Fetch's max_wait)
    with SimpleConsumer(martlet.bootstrap, resource_name, 0) as empty:
        assert (empty.earliest(), empty.latest()) == (0, 0)
    with SimpleConsumer(martlet.bootstrap, resource_name, 1) as by_resource_name:
        assert [(m.topic, m.offset) for m in by_resource_name.fetch(18)] == [(topic, 18), (topic, 19)]


def test_group_members_split_a_topic_and_hand_over(martlet):
    topic, group = unique_topic("split"), unique_topic("group")
    create_topic(martlet.bootstrap, topic, 4)
    produce(martlet.bootstrap, topic, 4, 40)
    first = Consumer(martlet.bootstrap, group, [topic], commit_interval_s=1.0)
    second = Consumer(martlet.bootstrap, group, [topic], commit_interval_s=1.0)
    seen: list[list[Message]] = [[], []]
    try:
        read_until([first, second], seen, lambda: len(first.assignment()) == 2 == len(second.assignment())
                   and len(seen[0]) + len(seen[1]) == 40)
        assert first.assignment().isdisjoint(second.assignment())
        produce(martlet.bootstrap, topic, 4, 40, first=40)
        before = [len(s) for s in seen]
        read_until([first, second], seen, lambda: len(seen[0]) + len(seen[1]) == 80)
        for member, got, start in zip([first, second], seen, before):  # each read its own partitions only
            assert {(m.topic, m.partition) for m in got[start:]} <= member.assignment()
            assert got[start:], "each member reads its share"
        second.close()  # commits its positions, then leaves
        read_until([first], seen, lambda: len(first.assignment()) == 4)
        produce(martlet.bootstrap, topic, 4, 40, first=80)
        read_until([first], seen, lambda: len(seen[0]) + len(seen[1]) == 120)
        every = seen[0] + seen[1]
        assert len({(m.partition, m.offset) for m in every}) == 120  # no record twice
        assert set(values(every)) == expected(0, 120)  # none lost
        for got in seen:  # each partition's records in offset order
            for partition in range(4):
                offsets = [m.offset for m in got if m.partition == partition]
                assert offsets == sorted(offsets)
    finally:
        first.close()
        second.close()


def test_manual_commit_is_where_the_next_member_resumes(martlet):
    topic, group = unique_topic("manual"), unique_topic("group")
    create_topic(martlet.bootstrap, topic, 2)
    produce(martlet.bootstrap, topic, 2, 10)
    seen: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, group, [topic], auto_commit=False) as consumer:
        read_until([consumer], seen, lambda: len(seen[0]) == 10)
        consumer.commit()
        produce(martlet.bootstrap, topic, 2, 6, first=10)
        read_until([consumer], seen, lambda: len(seen[0]) == 16)
    assert set(values(seen[0])) == expected(0, 16)
    after: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, group, [topic], auto_commit=False) as resumed:
        read_until([resumed], after, lambda: len(after[0]) >= 6)
        after[0] += resumed.poll(0.5)  # nothing more comes
    assert sorted(values(after[0])) == sorted(expected(10, 6))  # exactly what was read after the commit


def test_broadcast_members_each_read_everything_and_resume(martlet):
    topic, group = unique_topic("broadcast"), unique_topic("group")
    create_topic(martlet.bootstrap, topic, 3)
    produce(martlet.bootstrap, topic, 3, 30)
    one = Consumer(martlet.bootstrap, group, [topic], broadcast=True, member_name="one")
    two = Consumer(martlet.bootstrap, group, [topic], broadcast=True, member_name="two")
    seen: list[list[Message]] = [[], []]
    try:
        read_until([one, two], seen, lambda: len(seen[0]) == 30 == len(seen[1]))
        assert set(values(seen[0])) == set(values(seen[1])) == expected(0, 30)
        assert len(one.assignment()) == 3 == len(two.assignment())
    finally:
        one.close()  # commits under f"{group}.one"
        two.close()
    produce(martlet.bootstrap, topic, 3, 9, first=30)
    again: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, group, [topic], broadcast=True, member_name="one") as restarted:
        read_until([restarted], again, lambda: len(again[0]) >= 9)
        again[0] += restarted.poll(0.5)
    assert sorted(values(again[0])) == sorted(expected(30, 9))


def test_read_committed_skips_an_aborted_transaction(martlet):
    topic = unique_topic("txn")
    create_topic(martlet.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": martlet.bootstrap, "transactional.id": unique_topic("tx")})
    producer.init_transactions(FLUSH_S)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=b"%s-%d" % (outcome.encode(), i), partition=0)
        producer.flush(FLUSH_S)
        if outcome == "aborted":
            producer.abort_transaction(FLUSH_S)
        else:
            producer.commit_transaction(FLUSH_S)
    committed = [b"committed-%d" % i for i in range(5)]
    with SimpleConsumer(martlet.bootstrap, topic, 0) as simple:
        end = simple.latest()
        assert end == 12  # 10 records and two markers
        assert values(simple.fetch(0, timeout_s=5.0)) == committed
    with SimpleConsumer(martlet.bootstrap, topic, 0, read_committed=False) as uncommitted:
        assert len(uncommitted.fetch(0, timeout_s=5.0)) == 10
    seen: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, unique_topic("group"), [topic]) as consumer:
        read_until([consumer], seen, lambda: len(seen[0]) >= 5)
        seen[0] += consumer.poll(0.5)
    assert values(seen[0]) == committed


def test_an_unknown_topic_is_an_error_from_poll(martlet):
    with Consumer(martlet.bootstrap, unique_topic("group"), [unique_topic("missing")]) as consumer:
        with pytest.raises(BrokerError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            consumer.poll(1.0)


def test_partitions_added_to_a_topic_are_read(martlet):
    topic = unique_topic("grown")
    resource_name = create_topic(martlet.bootstrap, topic, 2)
    produce(martlet.bootstrap, topic, 2, 4)
    member = Consumer(martlet.bootstrap, unique_topic("group"), [resource_name])  # by resource name, as by name
    reader = Consumer(martlet.bootstrap, unique_topic("group"), [resource_name], broadcast=True)
    seen: list[list[Message]] = [[], []]
    try:
        read_until([member, reader], seen, lambda: len(seen[0]) == 4 == len(seen[1]))
        with Admin(martlet.bootstrap) as admin:
            admin.add_partitions(topic, 3)
        produce(martlet.bootstrap, topic, 3, 3, first=30)  # one record into each partition, the new one too
        read_until([member, reader], seen, lambda: len(seen[0]) == 7 == len(seen[1]))
        for got in seen:
            assert {m.partition for m in got[4:]} == {0, 1, 2}
        assert len(member.assignment()) == 3 == len(reader.assignment())
    finally:
        member.close()
        reader.close()
    with pytest.raises(MartletError, match="closed"):
        member.poll(0.1)


def test_consumers_go_on_after_the_broker_restarts(martlet_process):
    broker = martlet_process()
    topic, group = unique_topic("restart"), unique_topic("group")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 2, 10)
    seen: list[list[Message]] = [[]]
    with Consumer(broker.bootstrap, group, [topic], commit_interval_s=0.5) as member, \
            SimpleConsumer(broker.bootstrap, topic, 0) as simple:
        read_until([member], seen, lambda: len(seen[0]) == 10)
        assert len(simple.fetch(0)) == 5
        port = broker.port
        broker.stop()  # every connection breaks
        started = time.monotonic()
        assert member.poll(0.5) == []  # no broker: nothing, and no error
        assert time.monotonic() - started < 5.0
        broker.start(port)
        produce(broker.bootstrap, topic, 2, 10, first=10)
        read_until([member], seen, lambda: len(seen[0]) >= 20)
        assert [m.offset for m in simple.fetch(5, timeout_s=5.0)] == [5, 6, 7, 8, 9]
    assert sorted(values(seen[0])) == sorted(expected(0, 20))  # nothing lost, nothing twice


def test_a_position_out_of_range_resets_to_start(martlet):
    topic, group = unique_topic("range"), unique_topic("group")
    create_topic(martlet.bootstrap, topic, 1)
    produce(martlet.bootstrap, topic, 1, 5)
    committer = KafkaConsumer({"bootstrap.servers": martlet.bootstrap, "group.id": group})
    try:  # a committed offset past the end, as after the log was truncated
        committer.commit(offsets=[KafkaPartition(topic, 0, 1000)], asynchronous=False)
    finally:
        committer.close()
    seen: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, group, [topic]) as member:
        read_until([member], seen, lambda: len(seen[0]) >= 5)
    assert values(seen[0]) == [b"v%d" % i for i in range(5)]


def test_start_latest_reads_only_what_comes_after_joining(martlet):
    topic = unique_topic("latest")
    create_topic(martlet.bootstrap, topic, 2)
    produce(martlet.bootstrap, topic, 2, 6)
    seen: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, unique_topic("group"), [topic], start="latest") as member:
        read_until([member], seen, lambda: len(member.assignment()) == 2)  # positions are set once assigned
        produce(martlet.bootstrap, topic, 2, 4, first=6)
        read_until([member], seen, lambda: len(seen[0]) >= 4)
        seen[0] += member.poll(0.3)
    assert sorted(values(seen[0])) == sorted(expected(6, 4))


def test_the_asynchronous_consumers(martlet):
    topic = unique_topic("async")
    create_topic(martlet.bootstrap, topic, 2)
    produce(martlet.bootstrap, topic, 2, 8)

    async def read() -> tuple[list[Message], int, list[Message]]:
        async with AsyncConsumer(martlet.bootstrap, unique_topic("group"), [topic]) as member:
            got: list[Message] = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 8 and time.monotonic() < deadline:
                got += await member.poll(POLL_S)
        simple = AsyncSimpleConsumer(martlet.bootstrap, topic, 1)
        try:
            return got, await simple.latest(), await simple.fetch(2)
        finally:
            await simple.close()

    got, latest, fetched = asyncio.run(read())
    assert set(values(got)) == expected(0, 8)
    assert latest == 4
    assert values(fetched) == [b"v5", b"v7"]  # partition 1 holds the odd ones


def split_topic(bootstrap: str, parent_records: int) -> str:
    """A topic of one partition holding `parent_records` of 10 KB, grown to two (partition 1
    split off 0 at offset `parent_records`), then 5 records written into the child."""
    topic = unique_topic("split")
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(parent_records):
        producer.produce(topic, value=b"p%d:" % i + b"x" * 10_000, partition=0)
    assert producer.flush(FLUSH_S) == 0
    with Admin(bootstrap) as admin:
        child = admin.add_partitions(topic, 2).partitions[1]
    assert (child.parent, child.split_offset) == (0, parent_records)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, value=b"c%d" % i, partition=1)
    assert producer.flush(FLUSH_S) == 0
    return topic


def test_a_split_child_waits_until_its_parent_is_read(martlet):
    topic = split_topic(martlet.bootstrap, 300)  # 3 MB: more than one fetch of the parent
    seen: list[list[Message]] = [[]]
    with Consumer(martlet.bootstrap, unique_topic("group"), [topic], broadcast=True) as reader:
        read_until([reader], seen, lambda: len(seen[0]) == 305)
    order = [(m.partition, m.offset) for m in seen[0]]
    assert order == [(0, i) for i in range(300)] + [(1, i) for i in range(5)]


def test_a_split_child_waits_for_the_group_to_commit_its_parent(martlet):
    topic, group = split_topic(martlet.bootstrap, 30), unique_topic("group")
    first = Consumer(martlet.bootstrap, group, [topic], auto_commit=False)
    second = Consumer(martlet.bootstrap, group, [topic], auto_commit=False)
    try:  # no poll before the two own one partition each, so neither read the parent itself
        assert wait_until(lambda: len(first.assignment()) == 1 == len(second.assignment()), WAIT_S)
        parent_reader, child_reader = (first, second) if first.assignment() == {(topic, 0)} else (second, first)
        assert child_reader.poll(1.5) == []  # held: nobody committed the parent up to the split
        seen: list[list[Message]] = [[], []]
        read_until([parent_reader], seen, lambda: len(seen[0]) == 30)
        assert child_reader.poll(1.5) == []
        parent_reader.commit()
        read_until([child_reader], seen[1:], lambda: len(seen[1]) == 5)
        assert values(seen[1]) == [b"c%d" % i for i in range(5)]
    finally:
        first.close()
        second.close()
