"""A broker's membership of a cluster: the ClusterView that ZooKeeper backs (layout.py).

The broker registers itself (an ephemeral node under its node id), watches the assignment the
admin leader writes for its address, and learns who leads what (Metadata's leaders,
FindCoordinator's coordinators) from every broker's assignment and what that broker says it
leads: a unit has a leader only once its assigned broker serves it or is opening it and
holds its produce requests until it is open. Naming a broker that would still refuse them
sent producers there early: a pipelined request refused (not yet served) followed by one
accepted (opened meanwhile) reads as a sequence gap, OUT_OF_ORDER_SEQUENCE_NUMBER, on which
librdkafka bumps its producer epoch and resends records other partitions may have stored
already: duplicates. What it serves is decided by the engine's
ownership loop (engine/ownership.py), which loads and drops partitions to match the assignment
and tells this view what it holds (`set_held`); the view publishes that, with the broker's
load, in its ephemeral node every `report_ms`, and at once when it changes (the admin waits for
an old owner to let a partition go before it hands it to the next, so there is one writer).

Threads: kazoo calls back on its own threads, which must not block, so callbacks only mark
the view dirty; one refresher thread re-reads ZooKeeper and hands a snapshot to the event
loop, where every question of the ClusterView is answered from plain dicts.

Losing ZooKeeper: while the connection is only suspended the broker keeps serving what it
holds (a ZooKeeper outage moves nothing). Once its session is gone the admin may give its
partitions away, so the broker stops serving everything at once (`on_fenced`), registers
again with a new session and then takes whatever it is assigned anew. The store is the fence
for the time in between: the next owner recovers the HDFS lease of each file before it
writes, after which this broker's writes fail and its checkpoint C cannot move
(docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout, NodeExistsError, NoNodeError
from kazoo.recipe.lock import Lock

from ..clock import Clock, SystemClock
from ..cluster import ClusterChange, ClusterListener, Listeners, NodeIdentity, new_cluster_id
from ..ids import Ids, RandomIds
from ..types import TopicPartition
from .layout import (
    ADDRESSES,
    ASSIGNMENTS,
    BROKERS,
    CLUSTER_ID,
    LEADING,
    NEXT_ID,
    REASSIGNMENTS,
    TOPIC_CHANGES,
    TOPIC_LOCK,
    Assignment,
    BrokerRecord,
    leading_from_json,
    leading_to_json,
    parse_unit,
    reassignments_from_json,
    reassignments_to_json,
    split_zookeeper,
    unit_key,
)

logger = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 30.0
TICK_S = 0.1
EPHEMERAL_TRIES = 5  # takes over a node an expiring session holds (see _create_ephemeral)
# Reconnect quickly and forever: a ZooKeeper outage of a minute must end in a prompt reconnect.
RECONNECT = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the refresher read: live brokers by id, and unit -> broker id for every unit a
    live broker is assigned and leads (serves, or is opening)."""

    alive: dict[int, BrokerRecord]
    leaders: dict[str, int]
    mine: Assignment
    reassignments: dict[str, int]
    topic_changes: int


# Bytes in and out per unit since start, memory in use, and the session S of each partition served.
Traffic = Callable[[], tuple[dict[str, int], dict[str, int], int, dict[str, int]]]


class ZooKeeperCluster:
    """ClusterView of a broker in a ZooKeeper-coordinated cluster."""

    def __init__(self, zookeeper: str, session_ms: int = 6000, report_ms: int = 3000, rack: str | None = None,
                 clock: Clock | None = None, ids: Ids | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._ids: Ids = ids or RandomIds()
        self._hosts, self._root = split_zookeeper(zookeeper)
        self.session_ms = session_ms
        self.report_ms = min(report_ms, session_ms // 3)  # several reports per session timeout
        self._confirmed = self._clock.monotonic()  # when ZooKeeper last answered us
        self._ticked = self._clock.monotonic()  # the event loop's last tick (a freeze shows as an old tick)
        self._frozen_at: float | None = None  # when a freeze was seen; appends wait for ZooKeeper
        self._rack = rack
        self._machine = socket.gethostname()
        self._zk = KazooClient(hosts=self._hosts, timeout=session_ms / 1000, connection_retry=RECONNECT)
        self._node = NodeIdentity(-1, "", 0, rack)
        self._snapshot = Snapshot({}, {}, Assignment(0, frozenset()), {}, 0)
        self._serving: frozenset[str] = frozenset()  # what ClusterView.owns answers for
        self._leading: frozenset[str] = frozenset()  # served or being opened: Metadata may name us
        self._held: frozenset[str] = frozenset()  # served, opening or releasing: what the admin sees
        self._applied_epoch = 0
        self._published_leading: frozenset[str] | None = None  # in /brokers/leading/<id>; None: not yet
        self._listeners = Listeners()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self._session_lost = threading.Event()
        self._leaving = False
        self._thread: threading.Thread | None = None
        self._topic_lock: Lock | None = None
        self.traffic: Traffic = lambda: ({}, {}, 0, {})
        self.connections: Callable[[], int] = lambda: 0
        self._counted: tuple[float, dict[str, int], dict[str, int]] = (self._clock.monotonic(), {}, {})
        # Set by the engine: called on the loop with this node's assignment, and when fenced.
        self.on_assignment: Callable[[Assignment], None] = lambda assignment: None
        self.on_fenced: Callable[[], None] = lambda: None
        self.on_topics_changed: Callable[[], None] = lambda: None

    def path(self, relative: str) -> str:
        return f"{self._root}{relative}"

    # -- lifecycle

    def connect(self) -> None:
        """Connect and make the layout's fixed nodes (blocking: before anything is served)."""
        self._zk.start(timeout=CONNECT_TIMEOUT_S)
        for node in (BROKERS, LEADING, ADDRESSES, NEXT_ID, ASSIGNMENTS, TOPIC_CHANGES, "/admin"):
            self._zk.ensure_path(self.path(node))
        self._zk.add_listener(self._on_state)

    def advertise(self, host: str, port: int, rack: str | None = None, http: str | None = None,
                  endpoints: tuple[str, ...] = ()) -> NodeIdentity:
        """Take the node id of this address, register (with `http` and `endpoints`, the
        gateway's HTTP address and listeners, published as given), and start following the cluster."""
        self._loop = asyncio.get_running_loop()
        self._tick()
        address = f"{host}:{port}"
        self._node = NodeIdentity(self._node_id_for(address), host, port, rack or self._rack, http, endpoints)
        self._register()
        self._refresh()
        self._thread = threading.Thread(target=self._run, name="martlet-zookeeper", daemon=True)
        self._thread.start()
        return self._node

    def staying_peers(self) -> int:
        """Live brokers other than this one that are not leaving (a hand-over needs one)."""
        return sum(1 for node_id, record in self._snapshot.alive.items()
                   if node_id != self._node.node_id and not record.leaving)

    def leave(self) -> None:
        """A planned shutdown: ask the admin to move everything away."""
        self._leaving = True
        self._dirty.set()  # the refresher thread reports it

    def close(self) -> None:
        self._stopped.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            self._zk.stop()
            self._zk.close()
        except Exception as error:  # closing is best effort: the session ends on its own
            logger.info("closing the ZooKeeper client: %s", error)

    # -- ClusterView

    def local(self) -> NodeIdentity:
        return self._node

    def alive(self) -> tuple[NodeIdentity, ...]:
        return tuple(self._identity(record) for _, record in sorted(self._snapshot.alive.items()))

    def leader_of(self, topic: str, partition: int) -> NodeIdentity | None:
        return self._node_of(f"{topic}/{partition}")

    def owns(self, topic: str, partition: int) -> bool:
        """Only what the ownership loop has loaded: topic changes never open a partition here."""
        return f"{topic}/{partition}" in self._serving

    def leader_epoch_of(self, topic: str, partition: int) -> int:
        key = f"{topic}/{partition}"
        record = self._snapshot.alive.get(self._snapshot.leaders.get(key, -1))
        return -1 if record is None else record.sessions.get(key, -1)

    def shard_owner(self, shard: int) -> NodeIdentity | None:
        return self._node_of(unit_key(shard))

    def owns_shard(self, shard: int) -> bool:
        return unit_key(shard) in self._serving

    def cluster_id(self) -> str | None:
        """Made once by the first broker (a create that only one can win), then read."""
        path = self.path(CLUSTER_ID)
        try:
            self._zk.create(path, new_cluster_id(self._ids).encode())
        except NodeExistsError:
            pass
        return self._zk.get(path)[0].decode()  # type: ignore[no-any-return]

    def controller(self) -> NodeIdentity:
        alive = self.alive()
        return alive[0] if alive else self._node

    def reassignments(self) -> Mapping[TopicPartition, int]:
        return {unit: node for key, node in self._snapshot.reassignments.items()
                if isinstance(unit := parse_unit(key), TopicPartition)}

    async def reassign(self, moves: Mapping[TopicPartition, int | None]) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._reassign_now, dict(moves))

    def subscribe(self, listener: ClusterListener) -> Callable[[], None]:
        return self._listeners.add(listener)

    # -- for the engine

    def may_append(self) -> bool:
        """Event loop, before every append. False while this node may have lost its
        partitions without knowing it yet:
        - the process was frozen (SIGSTOP, a stalled VM) for longer than a session timeout:
          the event loop's own tick is that old (seen by the tick itself, or by the first
          append after the freeze, whichever runs first), and appends stay refused until
          ZooKeeper answers again (the session is then either intact, or lost and everything
          is dropped);
        - the connection looks up but ZooKeeper has not answered for a session timeout.
        A ZooKeeper outage is neither (the loop ticks, the connection is down): the node keeps
        serving what it holds, and the store fences it if its partitions move meanwhile."""
        now = self._clock.monotonic()
        if now - self._ticked > self.session_ms / 1000:
            self._frozen_at = now
        if self._frozen_at is not None:
            return False
        if now - self._confirmed <= self.session_ms / 1000:
            return True
        return bool(self._zk.state != KazooState.CONNECTED)

    def _tick(self) -> None:
        now = self._clock.monotonic()
        if now - self._ticked > self.session_ms / 1000:  # the loop may run timers before reading sockets
            self._frozen_at = now
        self._ticked = now
        if self._loop is not None and not self._stopped.is_set():
            self._loop.call_later(TICK_S, self._tick)

    def _confirm(self) -> None:
        """Refresher thread: ZooKeeper answered."""
        self._confirmed = self._clock.monotonic()
        frozen_at = self._frozen_at
        if frozen_at is not None and self._confirmed > frozen_at:
            self._frozen_at = None

    def set_held(self, serving: frozenset[str], opening: frozenset[str], releasing: frozenset[str],
                 applied_epoch: int) -> None:
        """Event loop: what this node serves, opens and releases (all three count as held for
        the admin; the first two as led for Metadata), and the epoch of the last assignment it
        acted on. Published at once."""
        held = serving | opening | releasing
        leading = serving | opening
        if (serving, held, leading, applied_epoch) != (self._serving, self._held, self._leading, self._applied_epoch):
            self._serving, self._held, self._leading, self._applied_epoch = serving, held, leading, applied_epoch
            self._dirty.set()  # the refresher thread reports it

    def lock_topics(self, timeout_s: float) -> None:
        """Blocking: take the cluster-wide lock held around a topic change."""
        if self._topic_lock is None:
            self._topic_lock = self._zk.Lock(self.path(TOPIC_LOCK), str(self._node.node_id))
        try:
            self._topic_lock.acquire(timeout=timeout_s)
        except LockTimeout:
            raise TimeoutError(f"another node held the topic lock for over {timeout_s:.0f} s") from None

    def unlock_topics(self) -> None:
        if self._topic_lock is not None:
            self._topic_lock.release()

    def topics_changed(self) -> None:
        """Blocking: tell every node to re-read the catalog."""
        self._zk.set(self.path(TOPIC_CHANGES), b"")

    # -- ZooKeeper work (refresher thread, or blocking start-up calls)

    def _node_id_for(self, address: str) -> int:
        path = self.path(f"{ADDRESSES}/{address}")
        try:
            return int(self._zk.get(path)[0])
        except NoNodeError:
            pass
        node_id: int = self._zk.set(self.path(NEXT_ID), b"").version  # ZooKeeper bumps it atomically
        try:
            self._zk.create(path, str(node_id).encode())
            return node_id
        except NodeExistsError:
            return int(self._zk.get(path)[0])

    def _record(self) -> BrokerRecord:
        """This node as the admin sees it; rates are bytes/s since the previous record."""
        total_in, total_out, memory, sessions = self.traffic()
        now = self._clock.monotonic()
        then, last_in, last_out = self._counted
        self._counted = (now, total_in, total_out)
        span = max(now - then, 0.001)
        rates_in = {unit: round((count - last_in.get(unit, 0)) / span) for unit, count in total_in.items()
                    if count != last_in.get(unit, 0) and unit in self._held}
        rates_out = {unit: round((count - last_out.get(unit, 0)) / span) for unit, count in total_out.items()
                     if count != last_out.get(unit, 0) and unit in self._held}
        node = self._node
        return BrokerRecord(node.node_id, node.host, node.port, self._machine, node.rack, self._held,
                            rates_in, rates_out, memory, self.connections(), self._leaving, self._applied_epoch,
                            sessions, node.http, node.endpoints)

    def _register(self) -> None:
        """Create our ephemeral nodes. One left by an earlier process on this address (killed,
        its session not yet expired) is replaced: we hold the address's port, so it is dead."""
        leading = self._leading
        self._create_ephemeral(f"{BROKERS}/{self._node.node_id}", self._record().to_json())
        self._create_ephemeral(f"{LEADING}/{self._node.node_id}", leading_to_json(leading))
        self._published_leading = leading

    def _create_ephemeral(self, relative: str, data: bytes) -> None:
        """Create the node for this session, or take it over from an earlier one (this node's
        previous process, whose session has not expired yet). That session may expire and its
        node vanish between two of these calls, so each step that finds the node gone starts
        over (measured: NoNodeError on the get, a broker restarted in the kill -9 test)."""
        path = self.path(relative)
        for _ in range(EPHEMERAL_TRIES):
            try:
                self._zk.create(path, data, ephemeral=True)
                return
            except NodeExistsError:
                pass
            try:
                _, stat = self._zk.get(path)
                if stat.ephemeralOwner == self._zk.client_id[0]:
                    self._zk.set(path, data)
                    return
                self._zk.delete(path)
            except NoNodeError:
                continue
        raise NodeExistsError(f"{path}: another session holds it after {EPHEMERAL_TRIES} tries")

    def _report(self) -> None:
        try:
            leading = self._leading
            # The record first: whoever reads the new leaders then also finds their sessions S.
            self._zk.set(self.path(f"{BROKERS}/{self._node.node_id}"), self._record().to_json())
            if leading != self._published_leading:
                self._zk.set(self.path(f"{LEADING}/{self._node.node_id}"), leading_to_json(leading))
                self._published_leading = leading
        except NoNodeError:
            self._register()

    def _run(self) -> None:
        """Refresher thread: re-read on every watch and report load every report_ms."""
        while not self._stopped.is_set():
            self._dirty.wait(self.report_ms / 1000)
            self._dirty.clear()
            if self._stopped.is_set():
                return
            try:
                if self._session_lost.is_set():
                    self._session_lost.clear()
                    self._register()
                self._report()
                self._confirm()
                self._refresh()
            except Exception as error:  # ZooKeeper away: keep serving, try again on the next round
                logger.warning("cluster refresh failed: %s", error)

    def _refresh(self) -> None:
        zk, watch = self._zk, self._watch
        alive = {int(child): BrokerRecord.from_json(data)
                 for child, data in self._children(BROKERS, watch_data=False).items()}
        leading = {int(child): leading_from_json(data) for child, data in self._children(LEADING).items()}
        by_address = {record.address: record.node_id for record in alive.values()}
        leaders: dict[str, int] = {}
        mine = Assignment(0, frozenset())
        for address, data in self._children(ASSIGNMENTS).items():
            assignment = Assignment.from_json(data)
            if address == f"{self._node.host}:{self._node.port}":
                mine = assignment
            node_id = by_address.get(address)
            if node_id is not None:
                for unit in assignment.units & leading.get(node_id, frozenset()):
                    leaders[unit] = node_id
        try:
            moves = reassignments_from_json(zk.get(self.path(REASSIGNMENTS), watch=watch)[0])
        except NoNodeError:
            zk.exists(self.path(REASSIGNMENTS), watch=watch)
            moves = {}
        changes = zk.get(self.path(TOPIC_CHANGES), watch=watch)[1].version
        snapshot = Snapshot(alive, leaders, mine, moves, changes)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._apply, snapshot)

    def _children(self, relative: str, watch_data: bool = True) -> dict[str, bytes]:
        """Name -> data of every child, watching the list (and each child's data); children
        gone between the two reads are left out. Broker records change at every load report,
        so their data is not watched: the next report round reads them."""
        found = {}
        for child in self._zk.get_children(self.path(relative), watch=self._watch):
            try:
                found[child] = self._zk.get(self.path(f"{relative}/{child}"),
                                            watch=self._watch if watch_data else None)[0]
            except NoNodeError:
                continue
        return found

    def _watch(self, _event: object) -> None:
        self._dirty.set()

    def _on_state(self, state: str) -> None:
        """Kazoo's thread: must not block."""
        if state == KazooState.LOST:
            logger.error("ZooKeeper session lost: stop serving everything, then register again")
            self._session_lost.set()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._fence)
        elif state == KazooState.SUSPENDED:
            logger.warning("ZooKeeper connection lost: serving what this node holds until it is back")
        self._dirty.set()

    def _reassign_now(self, moves: dict[TopicPartition, int | None]) -> None:
        path = self.path(REASSIGNMENTS)
        self._zk.ensure_path(path)
        while True:
            data, stat = self._zk.get(path)
            current = reassignments_from_json(data)
            for tp, node in moves.items():
                if node is None:
                    current.pop(unit_key(tp), None)
                else:
                    current[unit_key(tp)] = node
            try:
                self._zk.set(path, reassignments_to_json(current), version=stat.version)
                return
            except Exception as error:  # BadVersionError: another writer came first; read again
                if type(error).__name__ != "BadVersionError":
                    raise

    # -- event loop

    def _apply(self, snapshot: Snapshot) -> None:
        before = self._snapshot
        self._snapshot = snapshot
        if snapshot.mine != before.mine and not self._session_lost.is_set():
            self.on_assignment(snapshot.mine)
        if snapshot.topic_changes != before.topic_changes:
            self.on_topics_changed()
        if snapshot.alive != before.alive or snapshot.leaders != before.leaders:
            self._listeners.tell(ClusterChange(self.alive(), ownership_changed=snapshot.leaders != before.leaders))

    def _fence(self) -> None:
        self._snapshot = replace(self._snapshot, mine=Assignment(0, frozenset()), leaders={})
        self.on_fenced()

    def _node_of(self, unit: str) -> NodeIdentity | None:
        node_id = self._snapshot.leaders.get(unit)
        if node_id is None:
            return None
        record = self._snapshot.alive.get(node_id)
        return None if record is None else self._identity(record)

    def _identity(self, record: BrokerRecord) -> NodeIdentity:
        return NodeIdentity(record.node_id, record.host, record.port, record.rack, record.http, record.endpoints)
