"""No store call runs on the event loop once the broker serves (ARCHITECTURE.md, "Boundaries").

`LoopWatchStore` wraps the memory store and records every call made from the event loop's
thread. A workload touching every API that reaches the store (topics created, grown,
reconfigured and deleted; produce and fetch; offsets by time; DeleteRecords; producer ids;
offset commits, OffsetDelete and offset expiry; a classic group's join, sync, heartbeat and
leave; a KIP-848 member's join and leave; DeleteGroups; the group timer's ticks) must leave
that record empty. A second test stalls every store call and checks that requests that need
no store are still answered meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from martlet.engine.clock import ManualClock
from martlet.engine.groups.classic import GroupLimits
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore
from martlet.gateway.handlers import group_offsets
from tests.integration.raw_client import decode_response, encode_request, record_batch

from .handlers.harness import (
    ALTER_CONFIGS,
    API_VERSIONS,
    CREATE_PARTITIONS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    INIT_PRODUCER_ID,
    METADATA,
    NOW_MS,
    Broker,
)

OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS = 8, 9, 19
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DELETE_GROUPS, OFFSET_DELETE = 11, 12, 13, 14, 42, 47
CONSUMER_GROUP_HEARTBEAT, MEMBER_ID_REQUIRED = 68, 79
STALL_S_MAX = 10.0  # a stalled call gives up after this long, so a failing test cannot hang


class LoopWatchStore(MemoryStore):
    """A memory store that notes calls made on the loop's thread and can be stalled."""

    slow_writes = True  # like HDFS: the engine must not write from its event loop

    def __init__(self) -> None:
        super().__init__()
        self.loop_thread: int | None = None
        self.on_loop: list[str] = []
        self.released = threading.Event()
        self.released.set()

    def watched(self, name: str) -> None:
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(f"{name} from\n{''.join(traceback.format_stack(limit=8)[:-2])}")
        if not self.released.wait(STALL_S_MAX):
            raise TimeoutError("the test never released the stalled store")


def _watch(name: str) -> Callable[..., Any]:
    plain = getattr(MemoryStore, name)

    def call(self: LoopWatchStore, *args: Any, **kwargs: Any) -> Any:
        self.watched(name)
        return plain(self, *args, **kwargs)
    return call


class WatchedFile:
    """An append file whose writes, syncs and closes are watched like the store's calls."""

    def __init__(self, store: LoopWatchStore, file: Any) -> None:
        self._store = store
        self._file = file

    @property
    def size(self) -> int:
        return int(self._file.size)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._store.watched("write")
        self._file.write(data)

    def sync(self) -> None:
        self._store.watched("sync")
        self._file.sync()

    def close(self) -> None:
        self._store.watched("close")
        self._file.close()

    def abandon(self) -> None:
        self._file.abandon()


def _open_append(self: LoopWatchStore, path: str) -> WatchedFile:
    self.watched("open_append")
    return WatchedFile(self, MemoryStore.open_append(self, path))


LoopWatchStore.open_append = _open_append  # type: ignore[method-assign]
for _name in ("mkdir", "list", "size", "read", "truncate", "rename", "delete", "exists", "create_exclusive"):
    if hasattr(MemoryStore, _name):
        setattr(LoopWatchStore, _name, _watch(_name))


@pytest.fixture
def watched() -> Iterator[tuple[Broker, LoopWatchStore]]:
    store = LoopWatchStore()
    # No initial rebalance delay: a lone member's join completes at the next tick.
    # Offsets expire 1 ms after their commit: _expiry moves the clock that far, not days (every
    # timer due on the way would fire, C publishing's watchdogs included).
    settings = EngineSettings(topic_partitions_max=64, groups=GroupLimits(initial_rebalance_delay_ms=0),
                              offsets_retention_ms=1)
    broker = Broker(store=store, engine_settings=settings)
    store.loop_thread = broker.loop.run_until_complete(_loop_thread())
    broker.loop.run_until_complete(_start_group_timer(broker))
    try:
        yield broker, store
    finally:
        store.released.set()
        broker.close()


async def _loop_thread() -> int:
    return threading.get_ident()


async def _start_group_timer(broker: Broker) -> None:
    broker.engine.groups.start()  # its ticks write membership records too


def _workload(broker: Broker) -> None:
    broker.create_topic("t", 2)
    broker.append("t", 0, [b"a", b"b"], [NOW_MS, NOW_MS + 10])
    broker.produce("t", 1, record_batch([b"c"]), acks=1)
    broker.call(1, 12, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    assert broker.list_offset("t", 0, NOW_MS + 5).offset == 1  # a lookup by time reads the store
    assert broker.list_offset("t", 0, -3).offset == 1  # so does the largest timestamp
    broker.call(DELETE_RECORDS, 2, {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]}],
                                    "timeout": 1000})
    broker.call(CREATE_PARTITIONS, 3, {"topics": [{"name": "t", "count": 3, "assignments": None}], "timeout": 1000})
    broker.call(ALTER_CONFIGS, 2, {"resources": [{"resource_type": 2, "resource_name": "t",
                                                  "configs": [{"name": "retention.ms", "value": "1000"}]}]})
    assert broker.call(INIT_PRODUCER_ID, 5, {"transactional_id": None, "transaction_timeout": 1000,
                                             "producer_id": -1, "producer_epoch": -1}).error_code == 0
    _group_round(broker)
    broker.call(DELETE_TOPICS, 6, {"topics": [{"name": "t", "topic_id": None}], "timeout": 1000})


def _group_round(broker: Broker) -> None:
    _standalone_commit(broker, "g")
    _classic_group(broker, "classic")
    _consumer_group(broker, "kip848")
    deleted = broker.call(DELETE_GROUPS, 2, {"groups_names": ["classic", "kip848", "g"]})
    assert [r.error_code for r in deleted.results] == [0, 0, 0]
    _expiry(broker, "expiring")


def _commit(broker: Broker, group_id: str, generation: int = -1, member_id: str = "") -> None:
    commit = {"group_id": group_id, "generation_id_or_member_epoch": generation, "member_id": member_id,
              "group_instance_id": None,
              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}]}
    assert broker.call(OFFSET_COMMIT, 9, commit).topics[0].partitions[0].error_code == 0


def _committed(broker: Broker, group_id: str) -> int:
    fetched = broker.call(OFFSET_FETCH, 9, {"groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1,
                                                        "topics": [{"name": "t", "partition_indexes": [0]}]}],
                                            "require_stable": False})
    return int(fetched.groups[0].topics[0].partitions[0].committed_offset)


def _standalone_commit(broker: Broker, group_id: str) -> None:
    """A standalone consumer's commit (generation -1) and the fetch of it."""
    _commit(broker, group_id)
    assert _committed(broker, group_id) == 1


def _classic_group(broker: Broker, group_id: str) -> None:
    """Join (twice: the first one only hands out the member id), sync, heartbeat, commit,
    leave, and OffsetDelete of the offset the member committed."""
    join = {"group_id": group_id, "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
            "reason": None}
    first = broker.call(JOIN_GROUP, 9, join)
    assert first.error_code == MEMBER_ID_REQUIRED
    joined = broker.call(JOIN_GROUP, 9, {**join, "member_id": first.member_id})
    assert joined.error_code == 0 and joined.leader == joined.member_id
    member, generation = joined.member_id, joined.generation_id
    synced = broker.call(SYNC_GROUP, 5, {"group_id": group_id, "generation_id": generation, "member_id": member,
                                         "group_instance_id": None, "protocol_type": "consumer",
                                         "protocol_name": "range",
                                         "assignments": [{"member_id": member, "assignment": b"mine"}]})
    assert synced.error_code == 0 and synced.assignment == b"mine"
    assert broker.engine.groups.membership(group_id) is not None  # a record went through the store
    beat = {"group_id": group_id, "generation_id": generation, "member_id": member, "group_instance_id": None}
    assert broker.call(HEARTBEAT, 4, beat).error_code == 0
    _commit(broker, group_id, generation, member)
    left = broker.call(LEAVE_GROUP, 5, {"group_id": group_id, "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})
    assert left.error_code == 0 and left.members[0].error_code == 0
    deleted = broker.call(OFFSET_DELETE, 0, {"group_id": group_id,
                                             "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
    assert _committed(broker, group_id) == -1


def _consumer_group(broker: Broker, group_id: str) -> None:
    """A KIP-848 member joins (epoch 0), commits, and leaves (epoch -1)."""
    member = str(uuid.uuid4())
    beat = {"group_id": group_id, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 30_000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    joined = broker.call(CONSUMER_GROUP_HEARTBEAT, 1, beat)
    assert joined.error_code == 0 and joined.member_epoch > 0
    _commit(broker, group_id, joined.member_epoch, member)
    left = broker.call(CONSUMER_GROUP_HEARTBEAT, 1, {**beat, "member_epoch": -1, "subscribed_topic_names": None,
                                                     "topic_partitions": None})
    assert left.error_code == 0 and left.member_epoch == -1


def _expiry(broker: Broker, group_id: str) -> None:
    """The retention loop's call, made on the loop as it makes it."""
    _commit(broker, group_id)
    clock = broker.engine.clock
    assert isinstance(clock, ManualClock)

    async def expire() -> int:  # on the loop: the timers the clock fires (C publishing) need it
        clock.advance(broker.engine.settings.offsets_retention_ms)
        return await broker.engine.groups.expire_offsets()

    assert broker.loop.run_until_complete(expire()) == 1
    assert _committed(broker, group_id) == -1


def test_no_store_call_runs_on_the_event_loop(watched: tuple[Broker, LoopWatchStore]) -> None:
    broker, store = watched
    _workload(broker)
    assert not store.on_loop, "store calls on the event loop:\n" + "\n".join(store.on_loop[:3])


def test_requests_that_need_no_store_are_answered_while_the_store_hangs(
        watched: tuple[Broker, LoopWatchStore]) -> None:
    broker, store = watched
    broker.create_topic("t")
    store.released.clear()

    async def scenario() -> None:
        stuck = asyncio.ensure_future(broker.dispatcher.handle(_frame(broker, CREATE_TOPICS, 7, {
            "topics": [{"name": "u", "num_partitions": 1, "replication_factor": 1, "configs": []}],
            "timeout": 1000})))
        produced = asyncio.ensure_future(broker.dispatcher.handle(_frame(broker, 0, 9, {
            "acks": 1, "timeout": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": record_batch([b"x"])}]}]})))
        for api_key, version, body in ((API_VERSIONS, 3, {"client_software_name": "unit",
                                                          "client_software_version": "1"}),
                                       (METADATA, 12, {"topics": None})):
            assert await asyncio.wait_for(broker.dispatcher.handle(_frame(broker, api_key, version, body)), 2.0)
        assert await asyncio.wait_for(produced, 2.0)  # acks=1 is answered from memory
        assert not stuck.done()  # the topic creation waits for the store ...
        store.released.set()
        assert await asyncio.wait_for(stuck, STALL_S_MAX)  # ... and completes once it answers

    broker.loop.run_until_complete(scenario())


def test_a_commit_waits_for_the_store_while_offset_fetches_answer_from_memory(
        watched: tuple[Broker, LoopWatchStore]) -> None:
    """Log first, then memory: until the store took the commit, fetch answers without it."""
    broker, store = watched
    broker.create_topic("t")
    store.released.clear()
    fetch = {"groups": [{"group_id": "g", "member_id": None, "member_epoch": -1,
                         "topics": [{"name": "t", "partition_indexes": [0]}]}], "require_stable": False}

    async def committed() -> int:
        answer = await asyncio.wait_for(broker.dispatcher.handle(_frame(broker, OFFSET_FETCH, 9, fetch)), 2.0)
        assert answer is not None
        _, decoded = decode_response(b"".join(answer)[4:], OFFSET_FETCH, 9)
        return int(decoded.groups[0].topics[0].partitions[0].committed_offset)

    async def scenario() -> None:
        commit = asyncio.ensure_future(broker.dispatcher.handle(_frame(broker, OFFSET_COMMIT, 9, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                     "committed_leader_epoch": -1, "committed_metadata": None}]}]})))
        assert await committed() == -1  # answered while the commit waits for the store
        assert not commit.done()
        store.released.set()
        assert await asyncio.wait_for(commit, STALL_S_MAX)
        assert await committed() == 5

    broker.loop.run_until_complete(scenario())


def test_a_commit_and_a_topic_creation_answer_retriably_within_their_timeouts_while_the_store_hangs(
        watched: tuple[Broker, LoopWatchStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """A store outage (hdfs-native retries for minutes) gets COORDINATOR_NOT_AVAILABLE for a
    commit after the commit timeout and REQUEST_TIMED_OUT for a creation after its timeout_ms:
    both retriable, both in time. The changes still complete once the store answers."""
    broker, store = watched
    broker.create_topic("t")
    monkeypatch.setattr(group_offsets, "COMMIT_TIMEOUT_S", 0.2)
    store.released.clear()
    fetch = {"groups": [{"group_id": "g", "member_id": None, "member_epoch": -1,
                         "topics": [{"name": "t", "partition_indexes": [0]}]}], "require_stable": False}
    commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}]}

    def create(timeout_ms: int) -> dict[str, Any]:
        return {"topics": [{"name": "u", "num_partitions": 1, "replication_factor": 1, "configs": []}],
                "timeout": timeout_ms}

    async def answer(api_key: int, version: int, body: dict[str, Any], within_s: float) -> Any:
        frame = await asyncio.wait_for(broker.dispatcher.handle(_frame(broker, api_key, version, body)), within_s)
        assert frame is not None
        return decode_response(b"".join(frame)[4:], api_key, version)[1]

    async def scenario() -> None:
        committed = await answer(OFFSET_COMMIT, 9, commit, 2.0)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.coordinator_not_available
        created = await answer(CREATE_TOPICS, 7, create(200), 2.0)
        assert created.topics[0].error_code == ErrorCode.request_timed_out
        store.released.set()
        await asyncio.wait_for(broker.engine.coordinator.wait_written(), STALL_S_MAX)
        fetched = await answer(OFFSET_FETCH, 9, fetch, 2.0)
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 5  # the timed out write went on
        again = await answer(CREATE_TOPICS, 7, create(int(STALL_S_MAX * 1000)), STALL_S_MAX + 1)
        assert again.topics[0].error_code == ErrorCode.topic_already_exists  # so did the creation

    broker.loop.run_until_complete(scenario())


def _frame(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return encode_request(broker.request(api_key, version, body), 1, "unit")[4:]
