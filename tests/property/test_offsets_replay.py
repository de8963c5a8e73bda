"""The committed-offsets store against a plain dict model: whatever sequence of commits,
deletions, expiries, membership records, compactions and restarts (clean or not) runs, the
store holds exactly what the model holds after every step."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from martlet.engine.groups.membership import ClassicGroupRecord, ClassicMemberRecord, GroupGone, GroupRecord
from martlet.engine.groups.offsets import CommittedOffset, OffsetStore
from martlet.engine.store import MemoryStore

PATH = "internal/group-offsets"
GROUPS = ["a", "b", "c"]
TOPICS = ["t", "u"]
TOPIC_IDS = ["id-1", "id-2"]  # two incarnations of each topic name

groups = st.sampled_from(GROUPS)
topics = st.sampled_from(TOPICS)
partitions = st.integers(0, 2)
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


class OffsetsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        # Small segments, so rolls and the automatic compaction happen within a run.
        self.offsets = OffsetStore.open(self.store, PATH, lambda: 0, segment_bytes=400)
        self.model: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self.memberships: dict[str, GroupRecord] = {}

    @rule(group=groups, generation=st.integers(0, 9), chosen=members)
    def record_membership(self, group, generation, chosen):
        record = ClassicGroupRecord(group, generation, "consumer", "range", None, tuple(chosen))
        self.offsets.record_membership(record)
        self.memberships[group] = record

    @rule(group=groups)
    def group_gone(self, group):
        self.offsets.record_membership(GroupGone(group))
        self.memberships.pop(group, None)

    @rule(group=groups, request=entries)
    def commit(self, group, request):
        self.offsets.commit(group, [(topic, value.topic_id, partition, value) for topic, partition, value in request])
        for topic, partition, value in request:
            self.model.setdefault(group, {})[(topic, partition)] = value

    @rule(group=groups)
    def delete_group(self, group):
        self.offsets.delete_group(group)
        self.model.pop(group, None)

    @rule(group=groups, topic=topics, chosen=st.lists(partitions, max_size=3))
    def delete_offsets(self, group, topic, chosen):
        self.offsets.delete_offsets(group, topic, chosen)
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
        assert self.offsets.expire(now_ms, retention_ms, lambda group: group in empty) == expected

    @rule()
    def compact(self):
        self.offsets.compact()

    @rule()
    def reopen(self):
        self.offsets.close()
        self.offsets = OffsetStore.open(self.store, PATH, lambda: 0, segment_bytes=400)

    @rule()
    def reopen_after_kill(self):
        # No close: no flush, no clean-shutdown marker; the next open scans and replays.
        self.offsets = OffsetStore.open(self.store, PATH, lambda: 0, segment_bytes=400)

    def _drop_empty_groups(self):
        self.model = {group: offsets for group, offsets in self.model.items() if offsets}

    @invariant()
    def store_equals_model(self):
        assert self.offsets.memberships() == [self.memberships[group] for group in sorted(self.memberships)]
        assert self.offsets.groups() == sorted(self.model)
        for group in GROUPS:
            assert self.offsets.group_offsets(group) == self.model.get(group, {})
            for (topic, partition), value in self.model.get(group, {}).items():
                assert self.offsets.fetch(group, topic, partition, value.topic_id) == value
                other_id = TOPIC_IDS[1 - TOPIC_IDS.index(value.topic_id)]
                assert self.offsets.fetch(group, topic, partition, other_id) is None

    def teardown(self):
        self.offsets.close()


OffsetsMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_offsets_replay = OffsetsMachine.TestCase
