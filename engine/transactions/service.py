"""The transaction coordinator at work: the state machine (coordinator.py) fed with requests,
its records written to the coordinator's shards (records.py, a machine of engine/coordinator),
its markers written into the partitions.

Where things live:
- A transactional id's state is a `txn` record in the coordinator shard its id hashes to (the
  same hash as a group id, Kafka's partitionFor), so the node serving that shard coordinates
  the id: FindCoordinator answers that node, any other answers NOT_COORDINATOR. Loading a
  shard replays its ids (`_shard_loaded`); dropping one forgets them.
- Offsets a transaction commits (TxnOffsetCommit) are staged in the group's shard
  (engine/offsets `txn_offsets`) and applied or dropped by the marker step (`end_offsets`, the
  offsets service's `end_txn`, given at construction).

Order of effects, as Kafka's coordinator: a request's new state is written to the log before
the answer goes out; markers are written only after the PrepareCommit/PrepareAbort record is
(so a restart finds the transaction prepared and writes them again); the transaction completes
(CompleteCommit/CompleteAbort) only once every marker is persisted (C above it) and every
group's staged offsets are ended. A marker already written is written again after a crash
between the two; readers see a second marker of the same transaction as a no-op (its
producer has no transaction open by then).

Markers go where the data is: a partition this node serves gets its control batch through
`Partitions.append_control`, a group shard it serves ends the producer's staged offsets; the
others are sent to the node serving them (`send_markers`, Kafka's WriteTxnMarkers, which the
gateway provides: the engine speaks no Kafka). A partition nobody serves right now, or a node
that does not answer, leaves the transaction prepared; the timer tries again.

A write the store refuses leaves the coordinator ahead of its log: the id is reloaded from what
its shard applied, and the caller answers COORDINATOR_NOT_AVAILABLE (retriable).

Time comes from `now_ms`; a timer aborts transactions past their timeout (`expire`) and
retries markers a failure held back. Everything runs on the event loop; store work happens
on the coordinator's writer thread and the partitions' persister.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..cluster import ClusterView, NodeIdentity
from ..coordinator.runtime import Listener, Runtime
from ..errors import CoordinatorFenced, NotServedHere, PartitionClosed, StaleProducerEpoch, UnknownPartition
from ..partitions import Partitions
from ..producer_ids import ProducerIds
from ..types import TopicPartition
from .coordinator import TransactionCoordinator
from .records import MACHINE, TxnRecord
from .types import Markers, Outcome, TxnError, TxnMetadata, TxnState

logger = logging.getLogger(__name__)

TICK_S = 1.0  # how often timeouts are checked and held-back markers retried
COORDINATOR_EPOCH = 0  # a marker's coordinator epoch: one coordinator per shard at a time


@dataclass(frozen=True, slots=True)
class RemoteMarkers:
    """What one other node is asked to mark: partitions it serves, group shards it owns."""

    producer_id: int
    epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    shards: tuple[int, ...]


# Ends a producer's staged offsets in the groups of one shard served here: (shard, producer id,
# commit).
EndOffsets = Callable[[int, int, bool], Awaitable[None]]
# Sends the markers to a node; returns what it could not mark (with why), raises OSError
# when the node cannot be reached.
SendMarkers = Callable[[NodeIdentity, RemoteMarkers], Awaitable[list[str]]]


async def _unreachable(node: NodeIdentity, markers: RemoteMarkers) -> list[str]:
    return [f"no way to send markers to node {node.node_id}"]


class StoreUnavailable(Exception):
    """The transaction log refused a write; the client may retry."""


@dataclass(frozen=True, slots=True)
class Answer:
    error: TxnError | None  # None: the log could not be written (COORDINATOR_NOT_AVAILABLE)
    producer_id: int = -1
    epoch: int = -1


class Transactions:
    def __init__(self, runtime: Runtime, end_offsets: EndOffsets, partitions: Partitions, producer_ids: ProducerIds,
                 cluster: ClusterView, now_ms: Callable[[], int], send_markers: SendMarkers | None = None) -> None:
        self._runtime = runtime
        self._end_offsets = end_offsets
        self._partitions = partitions
        self._cluster = cluster
        self._send_markers: SendMarkers = send_markers or _unreachable  # the gateway's WriteTxnMarkers client
        self._producer_ids = producer_ids
        self._now_ms = now_ms
        self.coordinator = TransactionCoordinator()
        for state in runtime.states(MACHINE):
            self.coordinator.replay(state.all())
        self._marking: dict[tuple[str, int], asyncio.Task[None]] = {}  # (id, epoch) -> its marker task
        self._timer: asyncio.Task[None] | None = None
        runtime.listen(Listener(self._shard_loaded, self._shard_dropping))

    def start(self) -> None:
        """Write the markers of transactions a restart found prepared; start the timer."""
        for markers in self.coordinator.pending_markers():
            self._mark(markers)
        self._timer = asyncio.get_running_loop().create_task(self._run_timer())

    async def close(self) -> None:
        tasks = [task for task in [self._timer, *self._marking.values()] if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def markers_settled(self) -> None:
        """Until every marker task started so far has ended (written, or held back)."""
        while self._marking:
            await asyncio.gather(*self._marking.values(), return_exceptions=True)

    # -- where ids live -------------------------------------------------------------------

    def coordinates(self, transactional_id: str) -> bool:
        return self._runtime.owns(self._runtime.shard_of(transactional_id))

    def _shard_loaded(self, number: int) -> None:
        self.coordinator.replay(self._ids_in(number))
        for markers in self.coordinator.pending_markers():
            self._mark(markers)

    async def _shard_dropping(self, number: int) -> None:
        gone = {meta.transactional_id for meta in self._ids_in(number)}
        self.coordinator.forget(gone)
        for key in [key for key in self._marking if key[0] in gone]:
            self._marking.pop(key).cancel()

    def _ids_in(self, number: int) -> list[TxnMetadata]:
        state = self._runtime.state_in(MACHINE, number)
        return [] if state is None else state.all()

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.coordinator.get(transactional_id)

    def listing(self) -> list[TxnMetadata]:
        return sorted(self.coordinator, key=lambda meta: meta.transactional_id)

    # -- client requests --------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int) -> Answer:
        fresh = await self._producer_ids.allocate() if self.coordinator.needs_producer_id(transactional_id) else -1
        outcome = self.coordinator.init_producer_id(transactional_id, timeout_ms, self._now_ms(), fresh)
        return await self._carry_out(transactional_id, outcome)

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: list[TopicPartition]) -> Answer:
        outcome = self.coordinator.add_partitions(transactional_id, producer_id, epoch, partitions, self._now_ms())
        return await self._carry_out(transactional_id, outcome)

    def verify(self, transactional_id: str, producer_id: int, epoch: int, tp: TopicPartition) -> TxnError:
        """KIP-890's verify-only check: the partition is in this producer's open transaction."""
        meta = self.coordinator.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return TxnError.INVALID_PRODUCER_ID_MAPPING
        if meta.epoch != epoch:
            return TxnError.PRODUCER_FENCED
        if meta.state is not TxnState.ONGOING or tp not in meta.partitions:
            return TxnError.INVALID_TXN_STATE
        return TxnError.NONE

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> Answer:
        outcome = self.coordinator.add_offsets(transactional_id, producer_id, epoch, group_id, self._now_ms())
        return await self._carry_out(transactional_id, outcome)

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> Answer:
        outcome = self.coordinator.end_txn(transactional_id, producer_id, epoch, commit, self._now_ms())
        return await self._carry_out(transactional_id, outcome)

    # -- carrying out an outcome ------------------------------------------------------------

    async def _carry_out(self, transactional_id: str, outcome: Outcome) -> Answer:
        """Log the outcome's records, then start its markers; the answer."""
        try:
            await self._persist(outcome.persist)
        except StoreUnavailable:
            self._reload(transactional_id)
            return Answer(None)
        for markers in outcome.markers:
            self._mark(markers)
        return Answer(outcome.error, outcome.producer_id, outcome.epoch)

    async def _persist(self, records: list[TxnMetadata]) -> None:
        written = [self._runtime.submit(TxnRecord(meta)) for meta in records]
        errors = []
        for each in written:
            try:
                await each
            except OSError as error:
                errors.append(error)
        if errors:
            logger.warning("transaction log write failed: %s", errors[0])
            raise StoreUnavailable(str(errors[0]))

    def _reload(self, transactional_id: str) -> None:
        """The coordinator moved on but its log did not: take the id back to what the log holds."""
        state = self._runtime.state(MACHINE, transactional_id)
        applied = None if state is None else state.get(transactional_id)
        if applied is None:
            self.coordinator.forget({transactional_id})
        else:
            self.coordinator.replay([applied])

    def _mark(self, markers: Markers) -> None:
        key = (markers.transactional_id, markers.epoch)
        if key in self._marking:
            return
        task = asyncio.get_running_loop().create_task(self._write_markers(markers))
        self._marking[key] = task
        task.add_done_callback(lambda _: self._marking.pop(key, None) if self._marking.get(key) is task else None)

    async def _write_markers(self, markers: Markers) -> None:
        """Every marker persisted and every group's staged offsets ended, then complete. A
        failure is retried by the timer (the transaction stays prepared meanwhile)."""
        try:
            await self._mark_everywhere(markers)
            outcome = self.coordinator.markers_written(markers.transactional_id, markers.epoch, self._now_ms())
            await self._persist(outcome.persist)
        except (OSError, PartitionClosed, NotServedHere, StoreUnavailable) as error:
            logger.warning("markers of transaction %r not written yet: %r", markers.transactional_id, error)

    async def _mark_everywhere(self, markers: Markers) -> None:
        remote: dict[NodeIdentity, tuple[list[TopicPartition], list[int]]] = {}
        local: list[Awaitable[None]] = []
        for tp in sorted(markers.partitions):
            if self._cluster.owns(tp.topic, tp.partition):
                local.append(self._marker(markers, tp))
            else:
                remote.setdefault(self._node_of(self._cluster.leader_of(tp.topic, tp.partition), tp), ([], []))[0].append(tp)
        for shard in sorted({self._runtime.shard_of(group_id) for group_id in markers.groups}):
            if self._cluster.owns_shard(shard):
                local.append(self._end_offsets(shard, markers.producer_id, markers.commit))
            else:
                remote.setdefault(self._node_of(self._cluster.shard_owner(shard), shard), ([], []))[1].append(shard)
        sent = [self._send(node, RemoteMarkers(markers.producer_id, markers.epoch, markers.commit, tuple(tps),
                                               tuple(shards)))
                for node, (tps, shards) in remote.items()]
        await asyncio.gather(*local, *sent)

    @staticmethod
    def _node_of(node: NodeIdentity | None, what: object) -> NodeIdentity:
        if node is None:
            raise NotServedHere(f"nobody serves {what} right now")
        return node

    async def _send(self, node: NodeIdentity, markers: RemoteMarkers) -> None:
        failed = await self._send_markers(node, markers)
        if failed:
            raise NotServedHere(f"node {node.node_id} did not mark: {failed[0]}")

    async def _marker(self, markers: Markers, tp: TopicPartition) -> None:
        try:
            offset = self._partitions.append_control(tp, markers.producer_id, markers.epoch, markers.commit,
                                                     COORDINATOR_EPOCH, self._now_ms())
        except UnknownPartition:
            return  # deleted since it joined the transaction: nothing left to mark
        except (StaleProducerEpoch, CoordinatorFenced) as refused:
            # Ended here by someone else already (an admin's abort with a later epoch): writing
            # it again is refused for good, so waiting on it would hold the transaction forever.
            logger.warning("marker of transaction %r refused in %s: %s", markers.transactional_id, tp, refused)
            return
        await self._partitions.wait_persisted(tp, offset)

    # -- the clock ----------------------------------------------------------------------------

    async def _run_timer(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)  # a timer, not a synchronisation: timeouts are checked each tick
            await self.tick()

    async def tick(self) -> None:
        """Abort what timed out; retry the markers of prepared transactions nobody is writing."""
        outcome = self.coordinator.expire(self._now_ms())
        try:
            await self._persist(outcome.persist)
        except StoreUnavailable:
            for meta in outcome.persist:
                self._reload(meta.transactional_id)
            return
        for markers in [*outcome.markers, *self.coordinator.pending_markers()]:
            self._mark(markers)
