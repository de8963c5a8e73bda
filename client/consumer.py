"""Consumer: a member of a consumer group, as Talos' Consumer; or, in broadcast mode, a reader
of everything. Reading is fetching.py's; this module keeps positions, membership and commits.

Group mode is KIP-848's consumer protocol: the member sends ConsumerGroupHeartbeat (API 68)
to the group's coordinator (FindCoordinator), in the background on the event loop, every
heartbeat interval the coordinator names, and at once after its partitions changed so the
coordinator learns what it owns. The coordinator's assignor decides who reads what: an answer
with an assignment is the member's whole new set. Partitions it loses are revoked first (their
positions committed when auto_commit) and the next heartbeat reports them gone, which lets
the coordinator hand them to another member; partitions it gains start at the group's
committed offset, else at `start`. A member the coordinator fenced or forgot
(FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) loses everything without committing, as Kafka's
onPartitionsLost, and joins again with epoch 0. close() leaves with member epoch -1.

Offsets are committed with OffsetCommit v9 / read with OffsetFetch v9 naming the member id
and epoch (KIP-848). What is committed is the position: the offset after the last message
poll() returned, so auto commit (every commit_interval_s, on revocation and on close) never
skips a message poll() did not return; a crash re-delivers at most what poll() returned
since the last commit.

Broadcast mode: no group membership; every member reads every partition of the topics,
keeps its own positions and commits them under a group of its own, f"{group}.{member_name}"
(member_name defaults to host name and pid: give a stable one so that a restarted member
resumes where it stopped).

Both modes read LAYOUT again every LAYOUT_REFRESH_S, for moved leaders and for partitions
added to a topic (broadcast members start reading those; a group's coordinator assigns them).
A partition added by an online split (docs/native-sdk.md) is held back until its parent has
been read up to the split point, by this member or, when another member reads the parent,
by the group (its committed offset, asked every PARENT_CHECK_S): so a key's records are
delivered in order across the split. A group whose parent's reader never commits holds the
child back for good. In a cluster the split point may be pending (-1) for a moment, until the
parent's owner records it: the child is held meanwhile (at most PENDING_SPLIT_MAX_S).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypedDict, TypeVar, Unpack

from kio.schema.errors import ErrorCode

from ..protocol.sasl_client import Login
from .brokers import Brokers
from .connection import Connection
from .errors import BrokerError, Disconnected, MartletError, check
from .fetching import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    STALE_LAYOUT,
    Fetched,
    Leaders,
    TopicPartition,
    fetch,
    list_offsets,
)
from .loop import Synchronous
from .message import Message

log = logging.getLogger(__name__)
T = TypeVar("T")

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, CONSUMER_GROUP_HEARTBEAT = 8, 9, 10, 68
OFFSETS_VERSION = 9  # OffsetCommit and OffsetFetch: the first with KIP-848's member epoch, topics by name
FIND_COORDINATOR_VERSION = 4
HEARTBEAT_VERSION = 1
GROUP_KEY = 0
JOIN_EPOCH, LEAVE_EPOCH, NO_EPOCH = 0, -1, -1
REBALANCE_TIMEOUT_MS = 60_000
LAYOUT_REFRESH_S = 3.0
LAYOUT_WAIT_MIN_S = 1.0
PARENT_CHECK_S = 1.0  # how often a held child of a split asks for its parent's committed offset
PENDING_SPLIT_S = 0.5  # how often the layout is re-read while a split point is pending
PENDING_SPLIT_MAX_S = 60.0  # a split point still pending then is given up: the child is released
FETCH_WAIT_MAX_S = 1.0  # a poll re-reads its assignment at least this often while it waits
RETRY_PAUSE_S = 0.1
COMMIT_ATTEMPTS = 3
DEFAULT_TIMEOUT_S = 30.0
COORDINATOR_ERRORS = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                                ErrorCode.coordinator_load_in_progress})
LOST = frozenset({ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch})
START_OFFSETS = {"earliest": EARLIEST, "latest": LATEST}


class ConsumerOptions(TypedDict, total=False):
    member_name: str  # broadcast mode: names the member's own commit group (default host-pid)
    client_id: str
    timeout_s: float  # how long one request looks for a broker (or coordinator) that answers
    read_committed: bool  # default True
    tls: ssl.SSLContext  # connect with TLS (a broker's SSL listener)
    sasl: Login  # authenticate so (a broker's SASL listener): Login("SCRAM-SHA-512", "user", "password")


class _Coordinator:
    """The group's coordinator: found with FindCoordinator, found again when it moved."""

    def __init__(self, brokers: Brokers, group: str, timeout_s: float) -> None:
        self.brokers, self.group, self.timeout_s = brokers, group, timeout_s
        self._address: tuple[str, int] | None = None

    async def call(self, api_key: int, version: int, body: Callable[[], dict[str, Any]],
                   code_of: Callable[[Any], int]) -> Any:
        """The coordinator's answer to the request `body()` builds (again on every attempt);
        retried while it is not the coordinator, loading, or unreachable, up to timeout_s."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                connection = await self._connection()
                if connection is not None:
                    answer = await connection.kafka(api_key, version, body())
                    code = code_of(answer)
                    if code not in COORDINATOR_ERRORS:
                        return answer
                    self._address = None
            except Disconnected:
                self._address = None
                if time.monotonic() >= deadline:
                    raise
            if time.monotonic() >= deadline:
                raise BrokerError(ErrorCode.coordinator_not_available, f"group {self.group!r}")
            await asyncio.sleep(RETRY_PAUSE_S)

    async def _connection(self) -> Connection | None:
        if self._address is None:
            answer = await self.brokers.kafka(FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                                              {"key_type": GROUP_KEY, "coordinator_keys": [self.group]})
            (found,) = answer.coordinators
            if found.error_code in COORDINATOR_ERRORS:
                return None
            check(found.error_code, found.error_message)
            self._address = (found.host, found.port)
        return await self.brokers.at(*self._address)


class AsyncConsumer:
    """A group member (or, with `broadcast`, a reader of every partition): poll() returns what
    its partitions have next. Topics are named by name or resource name. Background work
    (heartbeats, auto commits) starts with the first call, on the running event loop. See
    the module docstring for the protocol."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], auto_commit: bool = True,
                 commit_interval_s: float = 5.0, broadcast: bool = False,
                 start: Literal["earliest", "latest"] = "earliest", **options: Unpack[ConsumerOptions]) -> None:
        self.group, self.topics = group, sorted(set(topics))
        self.auto_commit, self.commit_interval_s, self.broadcast = auto_commit, commit_interval_s, broadcast
        self.start_offset = START_OFFSETS[start]
        self.member_name = options.get("member_name") or f"{socket.gethostname()}-{os.getpid()}"
        self.commit_group = f"{group}.{self.member_name}" if broadcast else group
        self.timeout_s = options.get("timeout_s", DEFAULT_TIMEOUT_S)
        self.isolation_level = READ_COMMITTED if options.get("read_committed", True) else READ_UNCOMMITTED
        brokers = Brokers(bootstrap, options.get("client_id", "martlet-consumer"), self.timeout_s, options.get("tls"),
                          options.get("sasl"))
        self._leaders = Leaders(brokers)
        self._coordinator = _Coordinator(brokers, self.commit_group, self.timeout_s)
        self._positions: dict[TopicPartition, int] = {}  # of the partitions it owns
        self._committed: dict[TopicPartition, int] = {}
        self._member_id, self._epoch = uuid.uuid4().hex, JOIN_EPOCH
        self._layout_read_at = -LAYOUT_REFRESH_S
        self._released: set[TopicPartition] = set()  # children of splits no longer held (_held)
        self._parents_committed: dict[TopicPartition, int] = {}
        self._parents_read_at = -PARENT_CHECK_S
        self._pending_since: dict[TopicPartition, float] = {}  # children whose split point is not recorded yet
        self._changed = asyncio.Event()  # the assignment changed (or the background failed)
        self._closing = asyncio.Event()
        self._failure: BaseException | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started = self._closed = False

    # -- the calls

    async def poll(self, timeout_s: float = 1.0) -> list[Message]:
        """What the member's partitions have from their positions on, waiting up to
        `timeout_s` for something; [] if nothing came, or no broker answers now (the next
        poll tries again). BrokerError for a topic that does not exist (or a failure of the
        background membership)."""
        await self.start()
        deadline = time.monotonic() + timeout_s
        while True:
            self._raise_failure()
            if not await self._layout_read(deadline):
                return []
            if self.broadcast:
                await self._follow_partitions()
            fetchable = await self._fetchable()
            remaining = deadline - time.monotonic()
            if not fetchable:
                if remaining <= 0:
                    return []
                await self._wait_changed(min(remaining, PARENT_CHECK_S if self._positions else LAYOUT_REFRESH_S))
                continue
            found = await fetch(self._leaders, fetchable, min(max(remaining, 0.0), FETCH_WAIT_MAX_S), self.isolation_level)
            messages = await self._take(found)
            if messages or time.monotonic() >= deadline:
                return messages

    async def commit(self) -> None:
        """Commit the positions: every message poll() returned so far counts as consumed."""
        await self.start()
        await self._commit(dict(self._positions))

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member reads now."""
        return set(self._positions)

    async def start(self) -> None:
        """Start the background work (the first call of any other does). MartletError once closed."""
        if self._closed:
            raise MartletError("the consumer is closed")
        if self._started:
            return
        self._started = True
        if not self.broadcast:
            self._tasks.append(asyncio.ensure_future(self._heartbeats()))
        if self.auto_commit:
            self._tasks.append(asyncio.ensure_future(self._auto_commits()))

    async def close(self) -> None:
        """Stop; commit the positions first when auto_commit, and leave the group."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            if self.auto_commit:
                await self._commit(dict(self._positions))
            if not self.broadcast and self._epoch > JOIN_EPOCH:
                await self._leave()
        finally:
            self._positions.clear()
            await self._leaders.brokers.close()

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- reading

    async def _take(self, found: list[Fetched]) -> list[Message]:
        """Apply a fetch's results: the messages of partitions still at the offset fetched
        (a partition revoked or reset meanwhile is ignored), positions moved past them."""
        messages: list[Message] = []
        reset, stale = [], False
        for item in found:
            if self._positions.get(item.tp) != item.offset:
                continue
            if item.error_code == ErrorCode.none:
                self._positions[item.tp] = item.next_offset
                messages += item.messages
            elif item.error_code == ErrorCode.offset_out_of_range:
                reset.append(item.tp)
            elif item.error_code in STALE_LAYOUT or item.error_code == ErrorCode.unknown_topic_or_partition:
                stale = True
            else:
                raise BrokerError(item.error_code, f"{item.tp.topic}[{item.tp.partition}]")
        if reset:
            for tp, offset in (await self._start_offsets(reset)).items():
                if tp in self._positions:  # not revoked meanwhile
                    self._positions[tp] = offset
        if stale:
            self._layout_read_at = -LAYOUT_REFRESH_S
            await asyncio.sleep(RETRY_PAUSE_S)
        return messages

    async def _refresh_layout(self, force: bool = False) -> None:
        """Read LAYOUT again when it is LAYOUT_REFRESH_S old. BrokerError for a topic that
        does not exist."""
        if not force and time.monotonic() - self._layout_read_at < LAYOUT_REFRESH_S:
            return
        await self._leaders.refresh(self.topics)
        self._layout_read_at = time.monotonic()

    async def _follow_partitions(self) -> None:
        """Broadcast mode: take up every partition of the topics the layout names."""
        new = {tp for topic in self._names() for tp in self._leaders.partitions(topic)} - set(self._positions)
        if new:
            await self._add(new)

    async def _layout_read(self, deadline: float) -> bool:
        """Refresh the layout when due, within the poll's time (at least LAYOUT_WAIT_MIN_S);
        False if no broker answered by then: the next poll tries again."""
        try:
            await asyncio.wait_for(self._refresh_layout(), max(deadline - time.monotonic(), LAYOUT_WAIT_MIN_S))
        except (TimeoutError, Disconnected) as error:
            log.info("group %s: no layout yet: %s", self.group, error or type(error).__name__)
            return False
        return True

    async def _start_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's `start` offset (earliest or latest), retried past moved leaders."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            found = await list_offsets(self._leaders, tps, self.start_offset, self.isolation_level)
            errors = [code for code in found.values() if isinstance(code, ErrorCode)]
            if not errors:
                return {tp: int(offset) for tp, offset in found.items()}
            if any(code not in STALE_LAYOUT for code in errors) or time.monotonic() >= deadline:
                raise BrokerError(errors[0], "list offsets")
            await asyncio.sleep(RETRY_PAUSE_S)
            await self._refresh_layout(force=True)

    # -- online split: a child partition waits for its parent

    async def _fetchable(self) -> dict[TopicPartition, int]:
        """The positions of the partitions not held back (see _held)."""
        await self._check_parents()
        return {tp: offset for tp, offset in self._positions.items() if not self._held(tp)}

    def _split_point(self, tp: TopicPartition) -> tuple[TopicPartition, int] | None:
        """(parent, split offset) of a partition a split added (offset -1 while pending: in a
        cluster the parent's owner records it a moment after the split); None for another."""
        partition = self._leaders.topics[tp.topic].partitions[tp.partition]
        if partition.parent < 0:
            return None
        return TopicPartition(tp.topic, partition.parent), partition.split_offset

    def _pending(self, tp: TopicPartition) -> bool:
        """Whether a child's split point is still to be recorded: it is held, and the layout
        re-read every PENDING_SPLIT_S, for at most PENDING_SPLIT_MAX_S (then released with a
        warning: order across the split is then Kafka's, none)."""
        now = time.monotonic()
        since = self._pending_since.setdefault(tp, now)
        if now - since > PENDING_SPLIT_MAX_S:
            log.warning("%s[%d]: its split point was not recorded within %.0f s; reading it without holding it "
                        "back for its parent", tp.topic, tp.partition, PENDING_SPLIT_MAX_S)
            return False
        self._layout_read_at = min(self._layout_read_at, now - LAYOUT_REFRESH_S + PENDING_SPLIT_S)
        return True

    def _known(self, tp: TopicPartition) -> bool:
        topic = self._leaders.topics.get(tp.topic)
        return topic is not None and tp.partition < len(topic.partitions)

    def _held(self, tp: TopicPartition) -> bool:
        """Whether a child of a split waits, so that a key's records come in order across the
        split: until its parent is read up to the split point, by this member (its position)
        or else by the group (its committed offset). A partition the layout does not name yet
        waits for the layout; one released stays released."""
        if tp in self._released:
            return False
        if not self._known(tp):
            self._layout_read_at = -LAYOUT_REFRESH_S
            return True
        split = self._split_point(tp)
        if split is not None:
            parent, offset = split
            if offset < 0 and self._pending(tp):
                return True
            if offset > 0 and self._positions.get(parent, self._parents_committed.get(parent, -1)) < offset:
                return True
        self._released.add(tp)
        return False

    async def _check_parents(self) -> None:
        """Read the group's committed offsets of the parents of held partitions that another
        member reads, every PARENT_CHECK_S."""
        if time.monotonic() - self._parents_read_at < PARENT_CHECK_S:
            return
        waiting = set()
        for tp in self._positions:
            split = self._split_point(tp) if tp not in self._released and self._known(tp) else None
            if split is not None and split[1] >= 0 and split[0] not in self._positions:
                waiting.add(split[0])
        if waiting:
            self._parents_read_at = time.monotonic()
            self._parents_committed.update(await self._fetch_committed(waiting))

    def _names(self) -> list[str]:
        """The topics' names (the layout names those asked for by resource name)."""
        return [self._leaders.name(topic) or topic for topic in self.topics]

    async def _wait_changed(self, timeout_s: float) -> None:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except TimeoutError:
            pass

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    # -- assignment

    async def _add(self, tps: set[TopicPartition]) -> None:
        """Own these partitions: from the committed offsets, else from `start`."""
        committed = await self._fetch_committed(tps)
        missing = sorted(tps - committed.keys())
        starts = await self._start_offsets(missing) if missing else {}
        self._committed.update(committed)
        self._positions.update(committed)
        self._positions.update(starts)
        self._changed.set()

    async def _drop(self, tps: set[TopicPartition], commit: bool) -> None:
        """Give these partitions up, committing their positions first if `commit` (taken out
        of the positions before, so no poll moves them past what is committed)."""
        positions = {tp: self._positions.pop(tp) for tp in tps if tp in self._positions}
        try:
            if commit:
                await self._commit(positions)
        except MartletError as error:
            log.warning("group %s: committing revoked partitions failed: %s", self.group, error)
        finally:
            for tp in tps:
                self._committed.pop(tp, None)
            self._changed.set()

    # -- committed offsets

    def _member(self) -> tuple[str, int]:
        """(member id, epoch) as offset requests name them: none in broadcast mode."""
        return ("", NO_EPOCH) if self.broadcast else (self._member_id, self._epoch)

    async def _commit(self, positions: dict[TopicPartition, int]) -> None:
        todo = {tp: offset for tp, offset in positions.items() if self._committed.get(tp) != offset}
        if not todo:
            return
        for attempt in range(COMMIT_ATTEMPTS):
            answer = await self._coordinator.call(OFFSET_COMMIT, OFFSETS_VERSION, lambda: self._commit_body(todo),
                                                  _first_commit_error)
            code = _first_commit_error(answer)
            if code == ErrorCode.none:
                self._committed.update(todo)
                return
            if code != ErrorCode.stale_member_epoch or attempt == COMMIT_ATTEMPTS - 1:
                raise BrokerError(code, f"commit of group {self.commit_group!r}")
            await asyncio.sleep(RETRY_PAUSE_S)  # a heartbeat moved the epoch on: commit with the new one

    def _commit_body(self, offsets: dict[TopicPartition, int]) -> dict[str, Any]:
        member_id, epoch = self._member()
        return {"group_id": self.commit_group, "generation_id_or_member_epoch": epoch, "member_id": member_id,
                "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": tp.partition, "committed_offset": offset, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for tp, offset in sorted(offsets.items()) if tp.topic == topic]}
                    for topic in sorted({tp.topic for tp in offsets})]}

    async def _fetch_committed(self, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of these partitions (those it has)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            answer = await self._coordinator.call(OFFSET_FETCH, OFFSETS_VERSION, lambda: self._fetch_body(tps),
                                                  lambda a: a.groups[0].error_code)
            (group,) = answer.groups
            check(group.error_code, f"offsets of group {self.commit_group!r}")
            found, unstable = _committed_offsets(group)
            if not unstable or time.monotonic() >= deadline:
                check(ErrorCode.unstable_offset_commit if unstable else ErrorCode.none, self.commit_group)
                return found
            await asyncio.sleep(RETRY_PAUSE_S)  # a transaction stages an offset: wait for its end

    def _fetch_body(self, tps: set[TopicPartition]) -> dict[str, Any]:
        member_id, epoch = self._member()
        topics = sorted({tp.topic for tp in tps})
        return {"require_stable": True, "groups": [{
            "group_id": self.commit_group, "member_id": member_id or None, "member_epoch": epoch,
            "topics": [{"name": topic, "partition_indexes": sorted(tp.partition for tp in tps if tp.topic == topic)}
                       for topic in topics]}]}

    async def _auto_commits(self) -> None:
        while not await _wait_set(self._closing, self.commit_interval_s):
            try:
                await self._commit(dict(self._positions))
            except MartletError as error:
                log.warning("group %s: auto commit failed: %s", self.commit_group, error)

    # -- membership (KIP-848)

    async def _heartbeats(self) -> None:
        wait_s = 0.0
        while not await _wait_set(self._closing, wait_s):
            try:
                wait_s = await self._heartbeat()
            except (Disconnected, BrokerError) as error:
                if isinstance(error, BrokerError) and not error.retriable:
                    self._fail(error)
                    return
                log.info("group %s: heartbeat failed, retrying: %s", self.group, error)
                wait_s = RETRY_PAUSE_S * 10
            except asyncio.CancelledError:
                raise
            except BaseException as error:  # a bug of ours: poll() raises it
                self._fail(error)
                raise

    async def _heartbeat(self) -> float:
        """One heartbeat and what its answer asks; how long until the next one."""
        if any(self._leaders.name(topic) is None for topic in self.topics):
            await self._refresh_layout(force=True)  # the group subscribes by name
        answer = await self._coordinator.call(CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, self._heartbeat_body,
                                              lambda a: a.error_code)
        if answer.error_code in LOST:
            log.info("group %s: member %s lost its partitions (%s); joining again", self.group, self._member_id,
                     ErrorCode(answer.error_code).name)
            await self._drop(set(self._positions), commit=False)
            self._epoch = JOIN_EPOCH
            return 0.0
        check(answer.error_code, answer.error_message)
        self._epoch = answer.member_epoch
        if answer.assignment is not None and await self._reconcile(answer.assignment.topic_partitions):
            return 0.0  # tell the coordinator what it owns now
        interval_s: float = answer.heartbeat_interval.total_seconds()
        return interval_s

    def _heartbeat_body(self) -> dict[str, Any]:
        owned: dict[uuid.UUID, list[int]] = {}
        for tp in sorted(self._positions):
            owned.setdefault(self._leaders.topics[tp.topic].topic_id, []).append(tp.partition)
        return {"group_id": self.group, "member_id": self._member_id, "member_epoch": self._epoch,
                "instance_id": None, "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=REBALANCE_TIMEOUT_MS),
                "subscribed_topic_names": self._names(), "subscribed_topic_regex": None, "server_assignor": None,
                "topic_partitions": [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in owned.items()]}

    async def _reconcile(self, assigned: Iterable[Any]) -> bool:
        """Take the coordinator's assignment (the whole set): revoke what is not in it, add
        what is new. Whether anything changed."""
        target = set()
        for entry in assigned:
            name = self._leaders.name_of(entry.topic_id)
            if name is None:
                await self._refresh_layout(force=True)
                name = self._leaders.name_of(entry.topic_id)
            target |= {TopicPartition(name, int(p)) for p in entry.partitions} if name is not None else set()
        owned = set(self._positions)
        lost, gained = owned - target, target - owned
        if lost:
            await self._drop(lost, commit=self.auto_commit)
        if gained:
            await self._add(gained)
        return bool(lost or gained)

    async def _leave(self) -> None:
        def body() -> dict[str, Any]:
            return {**self._heartbeat_body(), "member_epoch": LEAVE_EPOCH, "topic_partitions": None,
                    "subscribed_topic_names": None, "rebalance_timeout": datetime.timedelta(milliseconds=-1)}

        try:
            await self._coordinator.call(CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSION, body, lambda a: a.error_code)
        except MartletError as error:
            log.info("group %s: leaving failed (the session expires instead): %s", self.group, error)
        self._epoch = LEAVE_EPOCH

    def _fail(self, error: BaseException) -> None:
        self._failure = error
        self._changed.set()


def _first_commit_error(answer: Any) -> int:
    return next((p.error_code for t in answer.topics for p in t.partitions if p.error_code), ErrorCode.none)


def _committed_offsets(group: Any) -> tuple[dict[TopicPartition, int], bool]:
    """The committed offsets an OffsetFetch group answer names, and whether one was unstable."""
    found, unstable = {}, False
    for topic in group.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.unstable_offset_commit:
                unstable = True
            elif p.error_code:
                raise BrokerError(p.error_code, f"{topic.name}[{p.partition_index}]")
            elif p.committed_offset >= 0:
                found[TopicPartition(topic.name, p.partition_index)] = int(p.committed_offset)
    return found, unstable


async def _wait_set(event: asyncio.Event, timeout_s: float) -> bool:
    """Whether `event` is set within `timeout_s`."""
    try:
        await asyncio.wait_for(event.wait(), max(timeout_s, 0.0))
    except TimeoutError:
        return False
    return True


class Consumer(Synchronous):
    """The synchronous Consumer: the same calls, each waiting for its answer; heartbeats and
    auto commits go on in the background thread between calls."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], auto_commit: bool = True,
                 commit_interval_s: float = 5.0, broadcast: bool = False,
                 start: Literal["earliest", "latest"] = "earliest", **options: Unpack[ConsumerOptions]) -> None:
        self._consumer = AsyncConsumer(bootstrap, group, topics, auto_commit, commit_interval_s, broadcast, start,
                                       **options)
        super().__init__("martlet-consumer", self._consumer, "consumer")
        self._loop.run(self._consumer.start())

    def poll(self, timeout_s: float = 1.0) -> list[Message]:
        return self._run(self._consumer.poll(timeout_s))

    def commit(self) -> None:
        self._run(self._consumer.commit())

    def assignment(self) -> set[TopicPartition]:
        async def read() -> set[TopicPartition]:
            return self._consumer.assignment()

        return self._run(read())

