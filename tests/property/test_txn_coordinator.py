"""The transaction coordinator (engine/transactions/coordinator.py) under random requests from
current and stale producers, marker completions, the clock moving past timeouts, and
restarts that rebuild it from its log.

A model follows each transaction a producer opened and checks what the coordinator does:
- an id's (producer id, epoch) only ever moves forward, and a producer at an older one is
  refused (PRODUCER_FENCED or INVALID_PRODUCER_ID_MAPPING), never served;
- markers go only to what the transaction added, once per transaction, commit only after an
  accepted EndTxn(commit) at the transaction's epoch and never for one aborted;
- a transaction left open past its timeout is aborted; one being prepared completes once its
  markers are written, also after a restart (its markers are due again);
- replaying the persisted records gives the coordinator it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from martlet.engine.transactions.coordinator import TransactionCoordinator
from martlet.engine.transactions.types import Markers, Outcome, TxnError, TxnMetadata, TxnState
from martlet.engine.types import TopicPartition

IDS = ("t1", "t2")
TIMEOUT_MS = 10_000
PARTITIONS = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
REFUSED = (TxnError.PRODUCER_FENCED, TxnError.INVALID_PRODUCER_ID_MAPPING)
STALE = st.sampled_from([False, False, False, True])  # mostly the current producer: transactions get far


@dataclass(eq=False)  # compared by identity: each transaction is its own
class Txn:
    """What the model knows of the current transaction of one id."""

    producer_id: int
    epoch: int
    added: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    outcome: str | None = None  # "commit" / "abort" once ended
    started_ms: int = -1


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.coordinator = TransactionCoordinator()
        self.log: list[TxnMetadata] = []
        self.now_ms = 0
        self.next_id = 1000
        self.identity: dict[str, tuple[int, int]] = {}  # latest (producer id, epoch) handed out
        self.txns: dict[str, Txn] = {}
        self.due: dict[str, Markers] = {}  # markers written by nobody yet
        self.marked: list[Txn] = []  # the transactions whose markers were handed out

    # -- driving ----------------------------------------------------------------------------

    def _take(self, outcome: Outcome) -> Outcome:
        self.log += outcome.persist
        for markers in outcome.markers:
            txn = self.txns.get(markers.transactional_id)
            assert txn is not None and markers.producer_id == txn.producer_id
            assert txn not in self.marked, f"markers twice for {markers}"  # once per transaction
            self.marked.append(txn)
            assert markers.partitions == frozenset(txn.added), (markers, txn)
            assert markers.groups == frozenset(txn.groups)
            if markers.commit:
                assert txn.outcome == "commit"
            else:
                assert txn.outcome != "commit"
                txn.outcome = "abort"
            self.due[markers.transactional_id] = markers
        return outcome

    def _fresh(self) -> int:
        self.next_id += 1
        return self.next_id

    @rule(tid=st.sampled_from(IDS), timeout_ms=st.sampled_from([TIMEOUT_MS] * 4 + [0, 3_600_001]))
    def init(self, tid: str, timeout_ms: int) -> None:
        before = self.coordinator.get(tid)
        fresh = self._fresh() if self.coordinator.needs_producer_id(tid) else -1
        outcome = self._take(self.coordinator.init_producer_id(tid, timeout_ms, self.now_ms, fresh))
        if timeout_ms != TIMEOUT_MS:
            assert outcome.error is TxnError.INVALID_TRANSACTION_TIMEOUT and not outcome.persist
            return
        if before is not None and before.state.preparing:
            assert outcome.error is TxnError.CONCURRENT_TRANSACTIONS and not outcome.persist
            return
        if before is not None and before.state is TxnState.ONGOING:
            assert outcome.error is TxnError.CONCURRENT_TRANSACTIONS
            assert [m.commit for m in outcome.markers] == [False]  # the open transaction is aborted
            assert self.coordinator.get(tid).epoch > before.epoch  # ... at a new epoch: its producer is fenced
            return
        assert outcome.error is TxnError.NONE
        previous = self.identity.get(tid)
        assert previous is None or (outcome.producer_id, outcome.epoch) > previous or outcome.producer_id > previous[0]
        self.identity[tid] = (outcome.producer_id, outcome.epoch)
        self.txns[tid] = Txn(outcome.producer_id, outcome.epoch)

    def _who(self, tid: str, stale: bool) -> tuple[int, int]:
        producer_id, epoch = self.identity.get(tid, (999, 0))
        return (producer_id, epoch - 1) if stale else (producer_id, epoch)

    @rule(tid=st.sampled_from(IDS), stale=STALE, parts=st.sets(st.sampled_from(PARTITIONS), min_size=1))
    def add(self, tid: str, stale: bool, parts: set[TopicPartition]) -> None:
        producer_id, epoch = self._who(tid, stale)
        meta = self.coordinator.get(tid)
        outcome = self._take(self.coordinator.add_partitions(tid, producer_id, epoch, parts, self.now_ms))
        if meta is None or (meta.producer_id, meta.epoch) != (producer_id, epoch):
            assert outcome.error in REFUSED
            return
        if meta.state.preparing:
            assert outcome.error is TxnError.CONCURRENT_TRANSACTIONS
            return
        assert outcome.error is TxnError.NONE
        txn = self.txns[tid]
        if meta.state is not TxnState.ONGOING:  # a new transaction at the same epoch
            txn = self.txns[tid] = Txn(producer_id, epoch, started_ms=self.now_ms)
        txn.added |= parts

    @rule(tid=st.sampled_from(IDS), group=st.sampled_from(["g1", "g2"]))
    def add_offsets(self, tid: str, group: str) -> None:
        producer_id, epoch = self._who(tid, stale=False)
        meta = self.coordinator.get(tid)
        outcome = self._take(self.coordinator.add_offsets(tid, producer_id, epoch, group, self.now_ms))
        if outcome.error is TxnError.NONE:
            assert meta is not None
            if meta.state is not TxnState.ONGOING:
                self.txns[tid] = Txn(producer_id, epoch, started_ms=self.now_ms)
            self.txns[tid].groups.add(group)

    @rule(tid=st.sampled_from(IDS), stale=STALE, commit=st.booleans())
    def end(self, tid: str, stale: bool, commit: bool) -> None:
        producer_id, epoch = self._who(tid, stale)
        meta = self.coordinator.get(tid)
        txn = self.txns.get(tid)
        if txn is not None and meta is not None and meta.state is TxnState.ONGOING and not stale \
                and (meta.producer_id, meta.epoch) == (producer_id, epoch):
            txn.outcome = "commit" if commit else "abort"  # what the markers must say
        outcome = self._take(self.coordinator.end_txn(tid, producer_id, epoch, commit, self.now_ms))
        if meta is None or (meta.producer_id, meta.epoch) != (producer_id, epoch):
            assert outcome.error in REFUSED
            return
        expected = {
            TxnState.ONGOING: TxnError.NONE,
            TxnState.EMPTY: TxnError.INVALID_TXN_STATE,
            TxnState.COMPLETE_COMMIT: TxnError.NONE if commit else TxnError.INVALID_TXN_STATE,
            TxnState.COMPLETE_ABORT: TxnError.INVALID_TXN_STATE if commit else TxnError.NONE,
            TxnState.PREPARE_COMMIT: TxnError.CONCURRENT_TRANSACTIONS if commit else TxnError.INVALID_TXN_STATE,
            TxnState.PREPARE_ABORT: TxnError.INVALID_TXN_STATE if commit else TxnError.CONCURRENT_TRANSACTIONS,
        }[meta.state]
        assert outcome.error is expected, (meta.state, commit, outcome.error)

    @precondition(lambda self: bool(self.due))
    @rule(data=st.data())
    def write_markers(self, data: st.DataObject) -> None:
        tid = data.draw(st.sampled_from(sorted(self.due)))
        markers = self.due.pop(tid)
        outcome = self._take(self.coordinator.markers_written(tid, markers.epoch, self.now_ms))
        meta = self.coordinator.get(tid)
        assert meta is not None and meta.state is (TxnState.COMPLETE_COMMIT if markers.commit
                                                    else TxnState.COMPLETE_ABORT)
        assert outcome.persist

    @rule(ms=st.sampled_from([1_000, 6_000, 11_000]))
    def tick(self, ms: int) -> None:
        self.now_ms += ms
        open_before = {tid for tid, meta in ((t, self.coordinator.get(t)) for t in IDS)
                       if meta is not None and meta.state is TxnState.ONGOING
                       and self.now_ms - meta.started_ms > meta.timeout_ms}
        outcome = self._take(self.coordinator.expire(self.now_ms))
        assert {m.transactional_id for m in outcome.markers} == open_before
        for tid in open_before:
            assert self.coordinator.get(tid).state is TxnState.PREPARE_ABORT

    @rule()
    def restart(self) -> None:
        reborn = TransactionCoordinator()
        reborn.replay(self.log)
        self.coordinator = reborn
        pending = {m.transactional_id: m for m in reborn.pending_markers()}
        assert pending == self.due  # what was being prepared is due again, nothing else

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def preparing_exactly_while_markers_are_due(self) -> None:
        preparing = {m.transactional_id for m in self.coordinator if m.state.preparing}
        assert preparing == set(self.due)

    @invariant()
    def replay_rebuilds_the_state(self) -> None:
        reborn = TransactionCoordinator()
        reborn.replay(self.log)
        assert {m.transactional_id: m for m in reborn} == {m.transactional_id: m for m in self.coordinator}


CoordinatorMachine.TestCase.settings = settings(max_examples=1000, stateful_step_count=40, deadline=None)
test_coordinator_machine = CoordinatorMachine.TestCase
