"""A coordinator shard (the offsets and membership machines in it) against a plain dict model:
whatever sequence of commits, deletions, expiries, staged transactional offsets, membership
records, compactions and restarts (clean or not) runs, the shard holds exactly what the model
holds after every step."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from martlet.engine.coordinator.records import Registry
from martlet.engine.coordinator.runtime import SHARDS_DIR
from martlet.engine.coordinator.shard import Shard
from martlet.engine.groups import records as membership
from martlet.engine.groups.membership import ClassicGroupRecord, ClassicMemberRecord, GroupGone, GroupRecord
from martlet.engine.offsets import state as offsets
from martlet.engine.service import MACHINES
from martlet.engine.store import MemoryStore
from martlet.engine.types import CommittedOffset

PATH = f"{SHARDS_DIR}/0"
REGISTRY = Registry(MACHINES)
GROUPS = ["a", "b", "c"]
TOPICS = ["t", "u"]
TOPIC_IDS = ["id-1", "id-2"]  # two incarnations of each topic name

groups = st.sampled_from(GROUPS)
topics = st.sampled_from(TOPICS)
partitions = st.integers(0, 2)
producers = st.integers(1, 2)
values = st.builds(
    CommittedOffset,
    offset=st.integers(-1, 2**63 - 1),
    leader_epoch=st.integers(-1, 5),
    metadata=st.none() | st.text(max_size=8),
    commit_ms=st.integers(0, 100),
    topic_id=st.sampled_from(TOPIC_IDS),
)
entries = st.lists(st.tuples(topics, partitions, values), max_size=4)
members = st.lists(st.builds(ClassicMemberRecord, member_id=st.text(max_size=6), instance_id=st.none() | st.just("i"),
                             client_id=st.just("c"), client_host=st.just("/h"), session_timeout_ms=st.just(6000),
                             rebalance_timeout_ms=st.just(3000), protocol_type=st.just("consumer"),
                             protocols=st.just((("range", b"\x00\x01"),)), assignment=st.binary(max_size=4)),
                   max_size=2)

Model = dict[str, dict[tuple[str, int], CommittedOffset]]


def open_shard(store: MemoryStore) -> Shard:
    # Small segments, so rolls and the automatic compaction happen within a run.
    return Shard.open(store, PATH, lambda: 0, REGISTRY, segment_bytes=400)


class ShardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.shard = open_shard(self.store)
        self.model: Model = {}
        self.staged: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] = {}  # group -> producer -> offsets
        self.memberships: dict[str, GroupRecord] = {}

    @property
    def offsets_state(self) -> offsets.OffsetsState:
        return self.shard.state(offsets.MACHINE)

    @property
    def membership_state(self) -> membership.MembershipState:
        return self.shard.state(membership.MACHINE)

    @rule(group=groups, generation=st.integers(0, 9), chosen=members)
    def record_membership(self, group, generation, chosen):
        record = ClassicGroupRecord(group, generation, "consumer", "range", None, tuple(chosen))
        self.shard.write(self.membership_state.change(record))
        self.memberships[group] = record

    @rule(group=groups)
    def group_gone(self, group):
        self.shard.write(self.membership_state.change(GroupGone(group)))
        self.memberships.pop(group, None)

    @rule(group=groups, request=entries)
    def commit(self, group, request):
        self.shard.write(offsets.commit(group, [(topic, value.topic_id, partition, value)
                                                for topic, partition, value in request]))
        for topic, partition, value in request:
            self.model.setdefault(group, {})[(topic, partition)] = value

    @rule(group=groups, producer=producers, request=entries)
    def commit_in_txn(self, group, producer, request):
        self.shard.write(offsets.txn_offsets(group, producer, [(topic, value.topic_id, partition, value)
                                                               for topic, partition, value in request]))
        for topic, partition, value in request:
            self.staged.setdefault(group, {}).setdefault(producer, {})[(topic, partition)] = value

    @rule(group=groups, producer=producers, commit=st.booleans())
    def end_txn(self, group, producer, commit):
        self.shard.write(self.offsets_state.txn_end(group, producer, commit))
        staged = self.staged.get(group, {}).pop(producer, {})
        if commit:
            for key, value in staged.items():
                self.model.setdefault(group, {})[key] = value
        self.staged = {group: by_producer for group, by_producer in self.staged.items() if by_producer}

    @rule(group=groups)
    def delete_group(self, group):
        self.shard.write(self.offsets_state.delete_group(group))
        self.model.pop(group, None)

    @rule(group=groups, topic=topics, chosen=st.lists(partitions, max_size=3))
    def delete_offsets(self, group, topic, chosen):
        self.shard.write(self.offsets_state.delete_offsets(group, topic, chosen))
        for partition in chosen:
            self.model.get(group, {}).pop((topic, partition), None)
        self._drop_empty_groups()

    @rule(now_ms=st.integers(0, 150), retention_ms=st.integers(0, 100), empty=st.sets(groups))
    def expire(self, now_ms, retention_ms, empty):
        expected = 0
        for group in empty & set(self.model):
            due = [key for key, value in self.model[group].items() if value.commit_ms + retention_ms <= now_ms]
            for key in due:
                del self.model[group][key]
            expected += len(due)
        self._drop_empty_groups()
        removals = self.offsets_state.expired(now_ms, retention_ms, lambda group: group in empty)
        for removal in removals:
            self.shard.write(removal)
        assert sum(len(removal.keys) for removal in removals) == expected

    @rule()
    def compact(self):
        self.shard.compact()

    @rule()
    def reopen(self):
        self.shard.close()
        self.shard = open_shard(self.store)

    @rule()
    def reopen_after_kill(self):
        # No close: no flush, no clean-shutdown marker; the next open scans and replays.
        self.shard = open_shard(self.store)

    def _drop_empty_groups(self):
        self.model = {group: offsets for group, offsets in self.model.items() if offsets}

    @invariant()
    def shard_equals_model(self):
        assert list(self.membership_state.records()) == [self.memberships[group] for group in sorted(self.memberships)]
        for group in GROUPS:
            assert self.membership_state.get(group) == self.memberships.get(group)
        state = self.offsets_state
        assert sorted(state.groups) == sorted(self.model)
        assert state.pending == self.staged
        for group in GROUPS:
            assert state.groups.get(group, {}) == self.model.get(group, {})
            for (topic, partition), value in self.model.get(group, {}).items():
                assert state.fetch(group, topic, partition, value.topic_id) == value
                other_id = TOPIC_IDS[1 - TOPIC_IDS.index(value.topic_id)]
                assert state.fetch(group, topic, partition, other_id) is None
            for producer in (1, 2):
                staging = producer in self.staged.get(group, {})
                assert (group in state.staging_groups(producer)) == staging

    def teardown(self):
        self.shard.close()


ShardMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_shard_replay = ShardMachine.TestCase
