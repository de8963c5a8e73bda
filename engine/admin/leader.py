"""`martlet admin`: the elected admin that places every partition and coordinator shard on a broker.

Any number of admins run; they contend in a ZooKeeper election and one leads. The leader
reads the cluster from ZooKeeper (live brokers, what each holds, its load, the assignments
written so far, operator requests) and the topics from the store's catalog, calls `place`
(placement.py, a pure function) and writes each live broker's assignment under its address.
It rounds on every change it watches and at least every `interval_s`.

One writer per partition: a unit moving from broker A to broker B is first taken out of A's
assignment; it enters B's only once A no longer lists it as held (A persisted what it had and
closed its files) or A is dead (its ZooKeeper session expired, after which A serves nothing:
member.py). So at no moment may two brokers both be told to serve it.

A standby that becomes leader starts from the assignments in ZooKeeper, so healthy partitions
do not move. A leader that loses its connection stops writing at once (another admin may lead
before it is back) and joins the election again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, replace

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from ..catalog.catalog import Catalog
from ..clock import Clock, SystemClock
from ..coordinator.runtime import COUNT_PATH, SHARDS_DEFAULT
from ..ids import Ids, RandomIds
from ..store.atomic import read_whole
from ..store.base import Store
from ..types import TopicPartition
from ..zookeeper.layout import (
    ADMIN_LEADER,
    ASSIGNMENTS,
    BROKERS,
    ELECTION,
    REASSIGNMENTS,
    TOPIC_CHANGES,
    AdminRecord,
    Assignment,
    BrokerRecord,
    reassignments_from_json,
    reassignments_to_json,
    split_zookeeper,
    unit_key,
)
from ..zookeeper.member import RECONNECT
from .placement import BrokerState, Load, Placement, Policy, Unit, place

logger = logging.getLogger(__name__)
# Measured rates are noisy, and every move costs its clients a few seconds: load alone moves
# partitions only in a balance round (at most one per BALANCE_EVERY_S), only when a broker is
# more than TOLERANCE off the mean, judged on loads smoothed over reports (SMOOTHING per report).
BALANCE_EVERY_S = 30.0
TOLERANCE = 0.25
SMOOTHING = 0.3
PROBE_EVERY_S = 0.25
PROBE_TIMEOUT_S = 0.5


@dataclass(frozen=True, slots=True)
class Round:
    """One placement round, for logs and tests."""

    decided_ms: float
    moves: int
    written: int


class Admin:
    def __init__(self, zookeeper: str, store: Store, session_ms: int = 3000, interval_s: float = 3.0,
                 policy: Policy | None = None, clock: Clock | None = None, ids: Ids | None = None) -> None:
        hosts, self._root = split_zookeeper(zookeeper)
        self._zk = KazooClient(hosts=hosts, timeout=session_ms / 1000, connection_retry=RECONNECT)
        self._catalog = Catalog(store, owner="admin")
        self._store = store
        self._interval_s = interval_s
        self._policy = policy or Policy(tolerance=TOLERANCE)
        self._clock: Clock = clock or SystemClock()
        self._balanced_at = float("-inf")
        self._smoothed: dict[str, Load] = {}  # measured load per unit, smoothed over reports
        self.admin_id = f"{socket.gethostname()}-{os.getpid()}-{(ids or RandomIds()).uuid().hex[:6]}"
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self._connected = threading.Event()
        self._intended: dict[str, int] = {}  # units between owners: where they are going
        self.leading = threading.Event()
        self._alive: dict[int, BrokerRecord] = {}  # as the last round read them (the prober's list)
        self.rounds: list[Round] = []

    def path(self, relative: str) -> str:
        return f"{self._root}{relative}"

    # -- process

    def run(self) -> None:
        """Blocking: contend, lead while elected, contend again after losing the lead."""
        self._zk.add_listener(self._on_state)
        self._zk.start(timeout=30)
        for node in (BROKERS, ASSIGNMENTS, TOPIC_CHANGES, ELECTION):
            self._zk.ensure_path(self.path(node))
        print(f"martlet admin {self.admin_id} running", flush=True)
        while not self._stop.is_set():
            election = self._zk.Election(self.path(ELECTION), self.admin_id)
            try:
                election.run(self._lead)
            except Exception as error:  # the connection went while contending: contend again
                if self._stop.is_set():
                    break
                logger.warning("admin election interrupted: %s", error)
                self._connected.wait(5)

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        try:
            self._zk.stop()
            self._zk.close()
        except Exception as error:  # closing is best effort
            logger.info("closing the ZooKeeper client: %s", error)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        self._dirty.set()

    # -- leading

    def _lead(self) -> None:
        """Runs while this admin holds the election; returns to give the lead up."""
        logger.info("admin %s leads", self.admin_id)
        try:
            self._zk.create(self.path(ADMIN_LEADER), AdminRecord(self.admin_id, socket.gethostname(),
                                                                 os.getpid()).to_json(), ephemeral=True)
        except NodeExistsError:  # the previous leader's node, until its session expires
            self._zk.set(self.path(ADMIN_LEADER), AdminRecord(self.admin_id, socket.gethostname(),
                                                              os.getpid()).to_json())
        self.leading.set()
        prober = threading.Thread(target=self._probe, name="martlet-admin-probe", daemon=True)
        prober.start()
        try:
            while not self._stop.is_set() and self._connected.is_set():
                self._dirty.clear()
                try:
                    self.place_once()
                except Exception:  # a failed round is retried on the next change or interval
                    logger.exception("placement round failed")
                self._dirty.wait(self._interval_s)
        finally:
            self.leading.clear()
            logger.info("admin %s no longer leads", self.admin_id)

    def _probe(self) -> None:
        """While leading: notice a broker process that died before ZooKeeper does. Its session
        outlives it by the session timeout, but its Kafka port refuses connections at once
        (a frozen process still holds its port, so only a gone process is seen). Twice
        refused in a row, its registration is deleted and its partitions move now."""
        refused: dict[int, int] = {}
        while self.leading.is_set() and not self._stop.wait(PROBE_EVERY_S):
            for node_id, record in list(self._alive.items()):
                if not _refuses(record.host, record.port):
                    refused.pop(node_id, None)
                    continue
                refused[node_id] = refused.get(node_id, 0) + 1
                if refused[node_id] >= 2:
                    refused.pop(node_id)
                    self._declare_dead(record)

    def _declare_dead(self, record: BrokerRecord) -> None:
        path = self.path(f"{BROKERS}/{record.node_id}")
        try:
            data, _ = self._zk.get(path)
            if BrokerRecord.from_json(data).address != record.address:
                return
            self._zk.delete(path)
        except NoNodeError:
            return
        except Exception as error:  # ZooKeeper away: its session timeout will do it
            logger.warning("could not remove dead broker %d: %s", record.node_id, error)
            return
        logger.info("broker %d (%s) refuses connections: its process is gone; moving its partitions",
                    record.node_id, record.address)
        self._dirty.set()

    def place_once(self) -> Round:
        """Read the cluster, place, write the assignments that changed."""
        alive = self._brokers()
        self._alive = alive
        written = self._assignments()
        units = self._units(alive)
        requested = reassignments_from_json(self._get(REASSIGNMENTS, watch=True) or b"")
        by_address = {record.address: node_id for node_id, record in alive.items()}
        current = self._current(written, alive, by_address)
        began = time.perf_counter()
        states = [BrokerState(node_id, record.machine, record.leaving) for node_id, record in sorted(alive.items())]
        wanted: dict[Unit, int] = {key: node for key, node in requested.items() if key in units}
        loads: dict[Unit, Load] = {key: load for key, load in self._smooth(units).items()}
        where: dict[Unit, int] = {key: node for key, node in current.items()}
        balancing = self._clock.monotonic() - self._balanced_at >= BALANCE_EVERY_S
        policy = self._policy if balancing else replace(self._policy, balance_moves_max=0)
        placement = place(states, loads, where, wanted, policy=policy)
        if balancing:
            self._balanced_at = self._clock.monotonic()
        decided_ms = (time.perf_counter() - began) * 1000
        count = self._write(placement, alive, written)
        self._settle_requests(requested, placement)
        moved = [move for move in placement.moves if move.source != move.target]
        if moved:
            logger.info("placement: %d moves (%s) in %.1f ms", len(moved),
                        ", ".join(f"{m.unit}:{m.source}->{m.target} {m.reason}" for m in moved[:5]), decided_ms)
        result = Round(decided_ms, len(moved), count)
        self.rounds = [*self.rounds[-99:], result]
        return result

    # -- reading

    def _get(self, relative: str, watch: bool = False) -> bytes | None:
        try:
            return self._zk.get(self.path(relative), watch=self._watch if watch else None)[0]  # type: ignore[no-any-return]
        except NoNodeError:
            if watch:
                self._zk.exists(self.path(relative), watch=self._watch)
            return None

    def _brokers(self) -> dict[int, BrokerRecord]:
        alive = {}
        for child in self._zk.get_children(self.path(BROKERS), watch=self._watch):
            data = self._get(f"{BROKERS}/{child}", watch=True)
            if data:
                record = BrokerRecord.from_json(data)
                alive[record.node_id] = record
        return alive

    def _assignments(self) -> dict[str, Assignment]:
        return {address: Assignment.from_json(self._get(f"{ASSIGNMENTS}/{address}") or b"")
                for address in self._zk.get_children(self.path(ASSIGNMENTS))}

    def _units(self, alive: dict[int, BrokerRecord]) -> dict[str, Load]:
        """Every partition of every topic and every coordinator shard, with its measured load."""
        self._zk.get(self.path(TOPIC_CHANGES), watch=self._watch)
        self._catalog.reload()
        keys = [unit_key(TopicPartition(topic.name, index))
                for topic in self._catalog for index in range(topic.partition_count)]
        keys += [unit_key(shard) for shard in range(self._shard_count())]
        bytes_in: dict[str, float] = {}
        bytes_out: dict[str, float] = {}
        for record in alive.values():
            bytes_in.update(record.bytes_in)
            bytes_out.update(record.bytes_out)
        return {key: Load(bytes_in.get(key, 0.0), bytes_out.get(key, 0.0)) for key in keys}

    def _smooth(self, measured: dict[str, Load]) -> dict[str, Load]:
        """Exponentially smoothed loads, so one noisy report does not move anything."""
        smoothed = {}
        for key, load in measured.items():
            before = self._smoothed.get(key, load)
            smoothed[key] = Load(before.bytes_in + SMOOTHING * (load.bytes_in - before.bytes_in),
                                 before.bytes_out + SMOOTHING * (load.bytes_out - before.bytes_out))
        self._smoothed = smoothed
        return smoothed

    def _shard_count(self) -> int:
        if self._store.exists(COUNT_PATH):
            return int(read_whole(self._store, COUNT_PATH))
        return SHARDS_DEFAULT

    def _current(self, written: dict[str, Assignment], alive: dict[int, BrokerRecord],
                 by_address: dict[str, int]) -> dict[str, int]:
        """Where each unit is: where the last round sent it if it is on its way, else its
        assigned live broker, else a live broker still holding it."""
        current: dict[str, int] = {}
        for record in alive.values():
            for key in record.held:
                current[key] = record.node_id
        for address, assignment in written.items():
            node = by_address.get(address)
            if node is not None:
                for key in assignment.units:
                    current[key] = node
        current.update((key, node) for key, node in self._intended.items() if node in alive)
        return current

    # -- writing

    def _write(self, placement: Placement, alive: dict[int, BrokerRecord], written: dict[str, Assignment]) -> int:
        """Write each broker's share. A unit enters a broker's share only if it is there
        already, or no other live broker holds it and every other live broker has acted on
        its latest assignment (so none is still about to open it): one writer at a time."""
        holders: dict[str, int] = {}
        for record in alive.values():
            for key in record.held:
                holders[key] = record.node_id
        lagging = {node_id for node_id, record in alive.items()
                   if record.applied_epoch != written.get(record.address, Assignment(0, frozenset())).epoch}
        shares: dict[str, set[str]] = {record.address: set() for record in alive.values()}
        self._intended = {}
        for unit, node in placement.assignment.items():
            key = str(unit)
            address = alive[node].address
            there = address in written and key in written[address].units
            holder = holders.get(key)
            if not there and ((holder is not None and holder != node) or lagging - {node}):
                self._intended[key] = node  # the old owner lets it go first
                continue
            shares[address].add(key)
        for address in written:
            shares.setdefault(address, set())  # a dead broker's address keeps nothing
        count = 0
        for address, units in sorted(shares.items()):
            before = written.get(address)
            if before is not None and before.units == units:
                continue
            epoch = (before.epoch if before else 0) + 1
            self._zk.ensure_path(self.path(ASSIGNMENTS))
            data = Assignment(epoch, frozenset(units)).to_json()
            path = self.path(f"{ASSIGNMENTS}/{address}")
            if before is None:
                self._zk.create(path, data)
            else:
                self._zk.set(path, data)
            count += 1
        return count

    def _settle_requests(self, requested: dict[str, int], placement: Placement) -> None:
        """Forget operator requests that are done (or name units that no longer exist)."""
        done = [key for key, node in requested.items() if placement.assignment.get(key, node) == node
                and key not in self._intended]
        if done:
            left = {key: node for key, node in requested.items() if key not in done}
            self._zk.set(self.path(REASSIGNMENTS), reassignments_to_json(left))

    def _watch(self, _event: object) -> None:
        self._dirty.set()


def _refuses(host: str, port: int) -> bool:
    """True only if the address actively refuses a connection (nothing listens there)."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:  # a timeout or an unreachable network proves nothing
        return False
