"""Group membership is written as records and replayed: a restarted coordinator resumes its
classic and consumer (KIP-848) groups, and members keep their ids, generations and epochs."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from martlet.engine.clock import ManualClock
from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.shard import Shard
from martlet.engine.errors import CorruptBatch
from martlet.engine.groups import records as membership
from martlet.engine.groups.classic import GroupLimits
from martlet.engine.groups.consumer import ConsumerGroupLimits
from martlet.engine.groups.membership import ClassicGroupRecord, ConsumerGroupRecord
from martlet.engine.groups.service import Groups, MemberIds
from martlet.engine.groups.types import (
    ConsumerGroupState,
    GroupError,
    GroupState,
    HeartbeatRequest,
    JoinRequest,
    SyncRequest,
    TopicLookup,
)
from martlet.engine.store import MemoryStore
from martlet.records.header import BatchHeader
from tests.support.coordinator import close_groups
from tests.support.coordinator import open_groups as open_coordinator

E = GroupError
SESSION_MS = 10_000
LIMITS = GroupLimits(initial_rebalance_delay_ms=0)
CONSUMER_SESSION_MS = 45_000
REGISTRY = Registry([membership.MACHINE])
TOPICS = TopicLookup({"t": 4}.get, lambda name: "id-t" if name == "t" else None, lambda: ["t"])


def open_groups(store: MemoryStore, clock: ManualClock) -> Groups:
    ids = itertools.count()
    return open_coordinator(store, LIMITS, clock.now_ms, 1_000_000, count=4,
                            consumer_limits=ConsumerGroupLimits(session_timeout_ms=CONSUMER_SESSION_MS),
                            ids=MemberIds(lambda prefix: f"{prefix}-{next(ids)}", lambda: f"c{next(ids)}"))


def join_classic(groups: Groups, group_id: str) -> tuple[str, int]:
    """One member joins and syncs a classic group; its member id and generation."""
    request = JoinRequest(group_id, "", None, "consumer", (("range", b"meta"),), SESSION_MS, 30_000, False, "cli")
    joined = asyncio.run(groups.join(request))
    assert joined.error is E.NONE
    sync = SyncRequest(group_id, joined.member_id, joined.generation_id, None, None, None,
                       ((joined.member_id, b"assignment"),))
    synced = asyncio.run(groups.sync(sync))
    assert synced.error is E.NONE and synced.assignment == b"assignment"
    return joined.member_id, joined.generation_id


def join_consumer(groups: Groups, group_id: str) -> tuple[str, int]:
    request = HeartbeatRequest(group_id, "member-a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",),
                               owned=frozenset(), member_id_required=True)
    result = asyncio.run(groups.consumer_heartbeat(request, TOPICS))
    assert result.error is E.NONE and result.member_epoch > 0
    return result.member_id, result.member_epoch


def test_a_classic_group_survives_a_restart_and_its_member_keeps_its_id() -> None:
    store, clock = MemoryStore(), ManualClock(1_000)
    groups = open_groups(store, clock)
    member_id, generation = join_classic(groups, "classic")
    asyncio.run(close_groups(groups))

    clock.advance(SESSION_MS * 5)  # down for longer than the session: the restart restarts it
    again = open_groups(store, clock)
    assert again.heartbeat("classic", member_id, generation, None) is E.NONE
    view = again.describe("classic")
    assert view is not None and view.state is GroupState.STABLE and view.generation_id == generation
    assert [m.assignment for m in view.members] == [b"assignment"]
    clock.advance(SESSION_MS - 1)
    asyncio.run(again.tick())
    assert again.heartbeat("classic", member_id, generation, None) is E.NONE


def test_a_restored_classic_member_that_stays_silent_expires_after_a_fresh_session() -> None:
    store, clock = MemoryStore(), ManualClock(1_000)
    groups = open_groups(store, clock)
    member_id, generation = join_classic(groups, "classic")
    asyncio.run(close_groups(groups))
    again = open_groups(store, clock)
    clock.advance(SESSION_MS)
    asyncio.run(again.tick())
    assert again.heartbeat("classic", member_id, generation, None) is E.UNKNOWN_MEMBER


def test_a_consumer_group_survives_a_restart_with_its_epochs_and_assignment() -> None:
    store, clock = MemoryStore(), ManualClock(1_000)
    groups = open_groups(store, clock)
    member_id, epoch = join_consumer(groups, "kip848")
    before = groups.describe_consumer("kip848", TOPICS)
    asyncio.run(close_groups(groups))

    clock.advance(CONSUMER_SESSION_MS * 2)
    again = open_groups(store, clock)
    after = again.describe_consumer("kip848", TOPICS)
    assert after == before
    assert not isinstance(after, GroupError) and after.state is ConsumerGroupState.STABLE
    beat = HeartbeatRequest("kip848", member_id, epoch, member_id_required=True)
    result = asyncio.run(again.consumer_heartbeat(beat, TOPICS))
    asyncio.run(close_groups(again))
    assert (result.error, result.member_id, result.member_epoch) == (E.NONE, member_id, epoch)


def test_deleted_and_emptied_groups_stay_gone_after_a_restart() -> None:
    store, clock = MemoryStore(), ManualClock(1_000)
    groups = open_groups(store, clock)
    member_id, _ = join_consumer(groups, "kip848")
    leave = HeartbeatRequest("kip848", member_id, -1, member_id_required=True)
    assert asyncio.run(groups.consumer_heartbeat(leave, TOPICS)).error is E.NONE
    assert asyncio.run(groups.delete("kip848")) is E.NONE
    classic_id, _ = join_classic(groups, "classic")
    assert asyncio.run(groups.leave("classic", [(classic_id, None)])) == [E.NONE]
    asyncio.run(close_groups(groups))

    again = open_groups(store, clock)
    assert again.describe_consumer("kip848", TOPICS) is E.GROUP_NOT_FOUND
    view = again.describe("classic")
    assert view is not None and view.state is GroupState.EMPTY and view.members == ()


def test_membership_records_round_trip_through_their_encoding() -> None:
    store, clock = MemoryStore(), ManualClock(1_000)
    groups = open_groups(store, clock)
    join_classic(groups, "classic")
    join_consumer(groups, "kip848")
    records = [groups.membership("classic"), groups.membership("kip848")]
    assert {type(r) for r in records} == {ClassicGroupRecord, ConsumerGroupRecord}
    for record in records:
        assert REGISTRY.decode(REGISTRY.encode(record)) == record
    asyncio.run(close_groups(groups))


@pytest.mark.parametrize("payload", [
    b'{"v":1,"type":"classic_group","group":"g","generation":"1","protocol_type":null,"protocol":null,'
    b'"leader":null,"members":[]}',
    b'{"v":1,"type":"classic_group","group":"g","generation":1,"protocol_type":null,"protocol":null,'
    b'"leader":null,"members":[["m"]]}',
    b'{"v":1,"type":"consumer_group","group":"g","epoch":1,"assignment_epoch":1,"assignor":"uniform",'
    b'"topics":[],"target":[["m",[["id",true]]]],"members":[]}',
    b'{"v":1,"type":"classic_group","group":"g","generation":1,"protocol_type":null,"protocol":null,'
    b'"leader":null,"members":[["m",null,"c","h",1,1,"consumer",[["range","not base64!"]],""]]}',
])
def test_a_malformed_membership_record_is_corrupt(payload: bytes) -> None:
    with pytest.raises(CorruptBatch):
        REGISTRY.decode(payload)


def test_a_record_the_store_refused_is_written_after_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed record write must not hold back the replies; it is retried, not lost."""
    store, clock = MemoryStore(), ManualClock(1_000)
    groups = open_groups(store, clock)
    append = Shard.append
    failures = [OSError("store down")]

    def flaky(self: Shard, batch: bytearray, header: BatchHeader) -> int:  # on the worker thread
        if failures:
            raise failures.pop()
        return append(self, batch, header)

    monkeypatch.setattr(Shard, "append", flaky)
    member_id, epoch = join_consumer(groups, "kip848")  # answered although its record failed
    assert groups.membership("kip848") is None and not failures
    asyncio.run(groups.tick())
    record = groups.membership("kip848")
    assert isinstance(record, ConsumerGroupRecord) and record.members[0].member_id == member_id
    asyncio.run(close_groups(groups))
