"""Consumer groups under churn with real clients, on Martlet and on the reference Kafka:
members come and go while a producer keeps writing into a 6-partition topic; a member is
killed with SIGKILL; a static member restarts; five members join at once; the broker restarts
under a group; kafka-consumer-groups reports members and lag; kafka-python and aiokafka groups
split, commit and hand over. Helpers live in group_load.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import TopicPartition

from tests.fixtures.martlet import wait_until
from tests.integration.clients import (
    PARTITIONS,
    Deadline,
    confluent_create_topic,
    confluent_produce,
    kafka,
    make_records,
    unique_topic,
)
from tests.integration.group_load import (
    ALL_PARTITIONS,
    KAFKA_SESSION_TIMEOUT_MS,
    MARTLET_SESSION_TIMEOUT_MS,
    SETTLE_S,
    ConsoleConsumer,
    Endpoint,
    Group,
    Member,
    MemberProcess,
    consumer_groups,
    describe_members,
    generation_of,
    paced_producer,
    write_group_config,
)

pytestmark = pytest.mark.integration

DWELL_S = 2.0          # consume this long in each phase, so the producer's records keep flowing
KILL_MARGIN_S = 6.0    # expiry -> the survivor's heartbeat sees the rebalance -> join -> sync
STATIC_SESSION_TIMEOUT_MS = 10_000


@pytest.fixture(params=["martlet", pytest.param("kafka", marks=pytest.mark.java)])
def endpoint(request, martlet_process, tmp_path) -> Endpoint:
    if request.param == "kafka":
        kafka_broker = request.getfixturevalue("reference_kafka")
        return Endpoint("kafka", kafka_broker.bootstrap, KAFKA_SESSION_TIMEOUT_MS, kafka_broker.log_report)
    broker = martlet_process(extra_args=["--config", str(write_group_config(tmp_path))])
    return Endpoint("martlet", broker.bootstrap, MARTLET_SESSION_TIMEOUT_MS, broker.log_tail)


@pytest.fixture
def martlet_broker(martlet_process, tmp_path):
    return martlet_process(extra_args=["--config", str(write_group_config(tmp_path))])


def new_topic(endpoint: Endpoint, prefix: str) -> tuple[str, str]:
    topic = unique_topic(prefix)
    confluent_create_topic(endpoint.bootstrap, topic, PARTITIONS)
    return topic, unique_topic(f"g-{prefix}")


def stop_producer(producer) -> None:
    producer.stop()
    assert not producer.failed, f"{len(producer.failed)} deliveries failed, first {producer.failed[:3]}"
    assert producer.unflushed == 0, producer.unflushed


def check_handover(member: Member, before: frozenset[int], revokes_before: int, cooperative: bool) -> None:
    """Incremental (cooperative) rebalancing revokes only what moves; eager revokes all."""
    after = member.owned()
    revoked = frozenset().union(*member.revokes[revokes_before:])
    if cooperative:
        kept = before & after
        assert not kept & revoked, (f"{member.name} kept {sorted(kept)} across the rebalance but they were "
                                    f"revoked: {member.revokes[revokes_before:]}")
    else:
        assert before <= revoked, f"eager rebalance revoked {sorted(revoked)} of {sorted(before)}"
    assert not member.lost, f"{member.name} lost partitions: {member.lost}"


# -- 1. confluent-kafka members going 1, 3, 1 under continuous produce -----------------------

@pytest.mark.parametrize("strategy", [None, "cooperative-sticky"], ids=["classic-eager", "cooperative-sticky"])
def test_members_1_3_1_under_produce_lose_nothing(endpoint, strategy):
    topic, group_id = new_topic(endpoint, "churn")
    extra = {} if strategy is None else {"partition.assignment.strategy": strategy}
    group = Group(endpoint, group_id, topic, commit_every_s=1.0, **extra)
    producer = paced_producer(endpoint.bootstrap, topic)
    producer.start()
    try:
        [first] = group.join()
        group.wait_balanced([6])
        group.poll_for(DWELL_S)
        before, revokes = first.owned(), len(first.revokes)
        group.join(2)
        group.wait_balanced([2, 2, 2])
        check_handover(first, before, revokes, strategy is not None)
        group.poll_for(DWELL_S)
        before, revokes = first.owned(), len(first.revokes)
        group.leave(group.live()[1:])
        group.wait_balanced([6])
        check_handover(first, before, revokes, strategy is not None)
        group.poll_for(DWELL_S)
    finally:
        stop_producer(producer)
        acked = producer.acked_offsets()
        try:
            group.drain(acked)
        finally:
            group.close()
    assert len(acked) > 1000, len(acked)
    group.check(acked)
    assert not [e for m in group.members for e in m.errors], [m.errors for m in group.members]


# -- 2. the Java console consumer going 1, 3, 1 ------------------------------------------------

def wait_java_members(kafka_tool, endpoint: Endpoint, group_id: str, consumers: list[ConsoleConsumer],
                      sizes: list[int], timeout_s: float = 120.0) -> None:
    """Describe the group until its members are exactly the live console consumers (by
    CLIENT-ID), each with a CONSUMER-ID and HOST, owning `sizes` partitions."""
    want = {c.client_id for c in consumers}
    deadline = Deadline(timeout_s)
    rows = []
    while not deadline.passed:
        for c in consumers:
            assert c.proc.poll() is None, f"{c.client_id} exited {c.proc.returncode}:\n{c.stderr_tail()}"
        rows = describe_members(kafka_tool, endpoint.bootstrap, group_id)
        if ({r.client_id for r in rows} == want and len(rows) == len(want)
                and sorted((r.partitions for r in rows), reverse=True) == sizes):
            assert all(r.consumer_id.startswith(r.client_id) and r.host.startswith("/") for r in rows), rows
            assert len({r.consumer_id for r in rows}) == len(rows), rows
            return
    raise AssertionError(f"members never became {sorted(want)} owning {sizes}: last {rows}\n{endpoint.report()}")


@pytest.mark.java
def test_java_console_consumers_1_3_1_lose_nothing(endpoint, kafka_tool, tmp_path):
    topic, group_id = new_topic(endpoint, "churnj")
    producer = paced_producer(endpoint.bootstrap, topic, rate_per_s=100)
    consumers = [ConsoleConsumer(endpoint, group_id, topic, "cc1", tmp_path)]
    producer.start()
    try:
        wait_java_members(kafka_tool, endpoint, group_id, consumers, [6])
        consumers += [ConsoleConsumer(endpoint, group_id, topic, name, tmp_path) for name in ("cc2", "cc3")]
        wait_java_members(kafka_tool, endpoint, group_id, consumers, [2, 2, 2])
        for leaving in consumers[1:]:
            leaving.terminate()
        wait_java_members(kafka_tool, endpoint, group_id, consumers[:1], [6])
        stop_producer(producer)
        acked = set(producer.acked_offsets().values())
        wait_until(lambda: acked <= printed(consumers), SETTLE_S, interval_s=0.2)
        consumers[0].terminate()
    finally:
        producer.stop()
        for c in consumers:
            c.kill()
    missing = acked - printed(consumers)
    assert len(acked) > 500, len(acked)
    assert not missing, (f"{len(missing)} of {len(acked)} acknowledged records never printed, e.g. "
                         f"{sorted(missing)[:5]}\n{endpoint.report()}")


def printed(consumers: list[ConsoleConsumer]) -> set[bytes]:
    return {line for c in consumers for line in c.lines()}


# -- 3. kill -9 of a member ---------------------------------------------------------------------

def test_killed_member_partitions_move_after_the_session_timeout(endpoint):
    topic, group_id = new_topic(endpoint, "kill9")
    victim = MemberProcess(endpoint, group_id, topic)
    group = Group(endpoint, group_id, topic)
    try:
        assert group.poll_until(lambda: victim.owned() == ALL_PARTITIONS or victim.proc.poll() is not None), (
            f"the child member never owned every partition: {victim.assignments} {victim.stderr()}")
        [survivor] = group.join()
        assert group.poll_until(lambda: len(victim.owned()) == 3 and len(survivor.owned()) == 3
                                and group.described() == ("STABLE", 2)), (
            f"no 3/3 split: child {victim.assignments}, survivor {survivor.owned()}\n{endpoint.report()}")
        assert victim.owned().isdisjoint(survivor.owned())
        killed_at = time.monotonic()
        victim.kill()
        session_s = endpoint.session_timeout_ms / 1000
        took_all = group.poll_until(lambda: survivor.owned() == ALL_PARTITIONS, session_s + KILL_MARGIN_S)
        elapsed = time.monotonic() - killed_at
    finally:
        victim.kill()
        group.close()
    assert took_all, (f"the survivor owns {sorted(survivor.owned())} {elapsed:.1f}s after the kill "
                      f"(session timeout {session_s}s)\n{endpoint.report()}")
    assert elapsed >= session_s / 2, (
        f"partitions moved {elapsed:.1f}s after the kill, before half the session timeout ({session_s}s): "
        f"not session expiry\n{endpoint.report()}")


# -- 4. static membership ------------------------------------------------------------------------

def test_static_member_restarting_within_the_session_gets_its_partitions_back(endpoint):
    topic, group_id = new_topic(endpoint, "static")
    instance = unique_topic("instance")
    group = Group(endpoint, group_id, topic, **{"session.timeout.ms": STATIC_SESSION_TIMEOUT_MS})
    try:
        [other] = group.join()  # first, so the leader is the member that stays
        group.wait_balanced([6])
        [static] = group.join(**{"group.instance.id": instance})
        group.wait_balanced([3, 3])
        generation, owned = generation_of(other), static.owned()
        assert generation_of(static) == generation
        revokes, assigns = len(other.revokes), len(other.assigns)
        closed_at = time.monotonic()
        static.close()  # a static member closes without LeaveGroup (KIP-345)
        [again] = group.join(**{"group.instance.id": instance})
        assert group.poll_until(lambda: again.owned() == owned), (
            f"restarted static member owns {sorted(again.owned())}, had {sorted(owned)}; other owns "
            f"{sorted(other.owned())}\n{endpoint.report()}")
        assert time.monotonic() - closed_at < STATIC_SESSION_TIMEOUT_MS / 1000
        group.poll_for(DWELL_S)  # room for a wrong rebalance to show itself
        assert group.described() == ("STABLE", 2)
        assert (len(other.revokes), len(other.assigns)) == (revokes, assigns), (
            f"the other member saw a rebalance: revokes {other.revokes}, assigns {other.assigns}")
        assert other.owned() == ALL_PARTITIONS - owned and again.owned() == owned
        assert generation_of(other) == generation_of(again) == generation, (
            generation, generation_of(other), generation_of(again))
    finally:
        group.close()


# -- 5. five members at once -------------------------------------------------------------------

def test_five_members_subscribing_at_once_settle_within_two_generations(martlet_process, tmp_path):
    # Martlet only, with its default initial rebalance delay (Kafka's 3 s), the mechanism that
    # lets a herd of joiners settle together: the shared reference Kafka runs with
    # group.initial.rebalance.delay.ms=0, under which it took 3 generations once in CI.
    config = tmp_path / "herd.toml"
    config.write_text("[groups]\nsession_timeout_ms_min = 1000\n")
    broker = martlet_process(extra_args=["--config", str(config)])
    endpoint = Endpoint("martlet", broker.bootstrap, MARTLET_SESSION_TIMEOUT_MS, broker.log_tail)
    topic, group_id = new_topic(endpoint, "herd")
    group = Group(endpoint, group_id, topic)
    try:
        members = group.join(5, subscribe=False)
        barrier = threading.Barrier(len(members))

        def subscribe(member: Member) -> None:
            barrier.wait(timeout=30)
            member.subscribe()

        threads = [threading.Thread(target=subscribe, args=(m,)) for m in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        group.wait_balanced([2, 1, 1, 1, 1])
        generations = {m.name: generation_of(m) for m in members}
        assigns = {m.name: len(m.assigns) for m in members}
    finally:
        group.close()
    assert len(set(generations.values())) == 1, generations
    assert max(generations.values()) <= 2, f"took {max(generations.values())} generations: {generations}"
    assert max(assigns.values()) <= 2, f"on_assign calls per member: {assigns}"


# -- 6. broker restart under a group (Martlet only) ---------------------------------------------

@pytest.mark.parametrize("hard", [False, True], ids=["graceful", "kill-9"])
def test_group_resumes_from_commits_after_broker_restart(martlet_broker, hard):
    endpoint = Endpoint("martlet", martlet_broker.bootstrap, MARTLET_SESSION_TIMEOUT_MS, martlet_broker.log_tail)
    topic, group_id = new_topic(endpoint, "grestart")
    group = Group(endpoint, group_id, topic, commit_every_s=0.5)
    producer = paced_producer(endpoint.bootstrap, topic)
    producer.start()
    try:
        group.join(2)
        group.wait_balanced([3, 3])
        group.poll_for(DWELL_S)
        committed_before = dict(group.ledger.committed)
        martlet_broker.restart(hard=hard)
        group.fresh_admin = True
        restarted_at = producer.acked_count()
        assert producer.wait_acked(restarted_at + 400, SETTLE_S), producer.client_errors[-5:]
        acked = producer.acked_offsets()
        assert group.poll_until(lambda: len(group.ledger.values.keys() & acked.keys()) > restarted_at + 200), (
            f"consumed {len(group.ledger.values)} records, {restarted_at} were acknowledged before the restart")
        group.wait_balanced([3, 3])
        group.poll_for(DWELL_S)
    finally:
        stop_producer(producer)
        acked = producer.acked_offsets()
        try:
            group.drain(acked)
        finally:
            group.close()
    group.check(acked)
    regressed = {p: (o, group.ledger.committed.get(p)) for p, o in committed_before.items()
                 if group.ledger.committed.get(p, -1) < o}
    assert not regressed, f"committed offsets went back across the restart: {regressed}"


# -- 7. kafka-consumer-groups --describe with a known lag ---------------------------------------

@pytest.mark.java
def test_consumer_groups_describe_shows_members_and_lag(endpoint, kafka_tool):
    topic, group_id = new_topic(endpoint, "lag")
    acks = confluent_produce(endpoint.bootstrap, topic, make_records(600, codecs=["none"]))
    ends = {p: sum(1 for q, _ in acks.values() if q == p) for p in range(PARTITIONS)}
    group = Group(endpoint, group_id, topic, commit_every_s=3600)  # commits only where told
    try:
        group.join(3)
        group.wait_balanced([2, 2, 2])
        assert group.poll_until(lambda: len(group.ledger.values) == 600), len(group.ledger.values)
        group.wait_balanced([2, 2, 2])
        target = {p: ends[p] // (p + 2) for p in range(PARTITIONS)}
        owner = {}
        for m in group.live():
            owned = sorted(m.owned())
            m.consumer.commit(offsets=[TopicPartition(topic, p, target[p]) for p in owned], asynchronous=False)
            m.consumer.pause(m.consumer.assignment())
            owner.update({p: (m.consumer.memberid(), m.name) for p in owned})
        with ThreadPoolExecutor(1) as pool:  # members keep polling (paused) while the tool runs
            offsets = pool.submit(consumer_groups, kafka_tool, endpoint.bootstrap, group_id)
            group.poll_until(offsets.done, 150)
            rows = offsets.result(timeout=1)
            listed = pool.submit(describe_members, kafka_tool, endpoint.bootstrap, group_id)
            group.poll_until(listed.done, 150)
            members = listed.result(timeout=1)
    finally:
        group.close()
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert sorted(int(r[2]) for r in rows) == list(range(PARTITIONS)) and all(r[1] == topic for r in rows), rows
    for r in rows:
        p = int(r[2])
        assert (int(r[3]), int(r[4]), int(r[5])) == (target[p], ends[p], ends[p] - target[p]), (p, r, ends)
        assert (r[6], r[8]) == owner[p], (p, r)  # CONSUMER-ID and CLIENT-ID of its owner
    assert len(members) == 3 and sorted(m.partitions for m in members) == [2, 2, 2], members
    assert {m.client_id for m in members} == {"m1", "m2", "m3"}, members


# -- 8. kafka-python and aiokafka groups ---------------------------------------------------------

def kafka_python_member(endpoint: Endpoint, group_id: str, topic: str):
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=endpoint.bootstrap, group_id=group_id, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=endpoint.session_timeout_ms, heartbeat_interval_ms=300,
        max_poll_interval_ms=30_000)
    consumer.subscribe([topic])
    return consumer


def kafka_python_poll(consumers, seen: dict[tuple[int, int], int], done, timeout_s: float = SETTLE_S) -> bool:
    # Polls of a second, not 100 ms: kafka-python 3.0.12 can lose a join that completes after a
    # poll gave up waiting for it (heartbeats stay off, the member is expired); this happens
    # against the reference Kafka too.
    deadline = Deadline(timeout_s)
    while not deadline.passed:
        for c in consumers:
            for tp, records in c.poll(timeout_ms=1000).items():
                for r in records:
                    seen[(tp.partition, r.offset)] = seen.get((tp.partition, r.offset), 0) + 1
        if done():
            return True
    return done()


def produce_more(endpoint: Endpoint, topic: str, count: int) -> dict[int, int]:
    """Produce `count` more records; returns partition -> how many landed there."""
    acks = confluent_produce(endpoint.bootstrap, topic, make_records(count, codecs=["none"]))
    return {p: sum(1 for q, _ in acks.values() if q == p) for p in range(PARTITIONS)}


def check_resumed(first: dict[int, int], more: dict[int, int], seen: dict[tuple[int, int], int]) -> None:
    """A new member read exactly the records after the commits (the first batch's ends)."""
    want = {(p, o) for p in range(PARTITIONS) for o in range(first[p], first[p] + more[p])}
    assert set(seen) == want, (f"resumed member read {len(seen)} records, want {len(want)}; "
                               f"extra {sorted(set(seen) - want)[:5]}, missing {sorted(want - set(seen))[:5]}")
    assert max(seen.values()) == 1


def test_kafka_python_members_split_commit_and_hand_over(endpoint):
    topic, group_id = new_topic(endpoint, "kpgroup")
    first = produce_more(endpoint, topic, 600)
    members = [kafka_python_member(endpoint, group_id, topic) for _ in range(2)]
    seen: dict[tuple[int, int], int] = {}
    try:
        split = kafka_python_poll(members, seen, lambda: len(seen) == 600
                                  and [len(m.assignment()) for m in members] == [3, 3])
        assert split, (len(seen), [m.assignment() for m in members], endpoint.report())
        owned = [{tp.partition for tp in m.assignment()} for m in members]
        assert owned[0].isdisjoint(owned[1])
        for m in members:
            m.commit()
    finally:
        for m in members:
            m.close()
    more = produce_more(endpoint, topic, 300)
    resumed: dict[tuple[int, int], int] = {}
    late = kafka_python_member(endpoint, group_id, topic)
    try:
        kafka_python_poll([late], resumed, lambda: len(resumed) >= 300)
    finally:
        late.close()
    check_resumed(first, more, resumed)


async def aiokafka_split_commit_resume(endpoint: Endpoint, group_id: str, topic: str,
                                       first: dict[int, int]) -> tuple[dict, dict]:
    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(topic, bootstrap_servers=endpoint.bootstrap, group_id=group_id,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=endpoint.session_timeout_ms, heartbeat_interval_ms=300,
                                max_poll_interval_ms=30_000)

    async def poll(consumers, seen, done) -> bool:
        deadline = Deadline(SETTLE_S)
        while not deadline.passed:
            for c in consumers:
                for tp, records in (await c.getmany(timeout_ms=100)).items():
                    for r in records:
                        seen[(tp.partition, r.offset)] = seen.get((tp.partition, r.offset), 0) + 1
            if done():
                return True
        return done()

    members = [member(), member()]
    seen: dict[tuple[int, int], int] = {}
    try:
        for m in members:
            await m.start()
        split = await poll(members, seen, lambda: len(seen) == sum(first.values())
                           and [len(m.assignment()) for m in members] == [3, 3])
        assert split, (len(seen), [m.assignment() for m in members], endpoint.report())
        owned = [{tp.partition for tp in m.assignment()} for m in members]
        assert owned[0].isdisjoint(owned[1])
        for m in members:
            await m.commit()
    finally:
        for m in members:
            await m.stop()
    more = await asyncio.to_thread(produce_more, endpoint, topic, 300)
    resumed: dict[tuple[int, int], int] = {}
    late = member()
    try:
        await late.start()
        await poll([late], resumed, lambda: len(resumed) >= 300)
    finally:
        await late.stop()
    return more, resumed


def test_aiokafka_members_split_commit_and_hand_over(endpoint):
    topic, group_id = new_topic(endpoint, "aiogroup")
    first = produce_more(endpoint, topic, 600)
    more, resumed = asyncio.run(aiokafka_split_commit_resume(endpoint, group_id, topic, first))
    check_resumed(first, more, resumed)
