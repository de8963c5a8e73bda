"""Follow the cluster's assignment: load what this node is given, drop what it is not.

In a cluster the admin leader decides which node serves each partition and each offsets
shard (engine/zookeeper/). This loop makes the engine match the latest assignment, one
round at a time (a newer assignment waits for the round under way, then replaces whatever
was still queued):

1. drop first: each partition no longer assigned stops taking writes at once (NotServedHere,
   Kafka's NOT_LEADER_OR_FOLLOWER), persists what it holds (bounded by `drain_s`) and closes
   its files; each shard finishes its queued changes and closes its log;
2. then load: each newly assigned partition is opened from the store with a new session S
   (recovery of the last owner's files includes HDFS lease recovery, which fences that owner's
   writer); each shard is replayed and its groups resumed;
3. what is served, what is being opened or released, and the epoch of the assignment acted on
   are published; the admin hands a unit to a node only once every other live node has acted
   on its latest assignment and holds the unit in none of these ways (engine/admin/leader.py).
A partition being opened here is published as led here (Metadata names this node) only once
the engine expects it (`Topics.expect`): produce requests for it then wait for the open instead
of being refused, so a producer's pipelined requests are never refused and then accepted.
A unit that fails to load (the store is down) is tried again `retry_s` later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .coordinator.runtime import Runtime
from .topics import Topics
from .types import TopicPartition
from .zookeeper.layout import Assignment, parse_unit, unit_key

logger = logging.getLogger(__name__)
FENCED_DRAIN_S = 1.0
Publish = Callable[[frozenset[str], frozenset[str], frozenset[str], int], None]  # serving, opening, releasing, epoch


class Ownership:
    def __init__(self, topics: Topics, coordinator: Callable[[], Runtime], publish: Publish,
                 drain_s: float = 10.0, retry_s: float = 2.0) -> None:
        self._topics = topics
        self._coordinator = coordinator
        self._publish = publish
        self._drain_s = drain_s
        self._retry_s = retry_s
        self._drain_now_s: float | None = None  # a shorter drain while fenced
        self.held: set[str] = set()  # units served here
        self._opening: set[str] = set()  # assigned here, files being opened
        self._releasing: set[str] = set()  # no longer served, files still open
        self.applied_epoch = 0  # the epoch of the last assignment this node fully acted on
        self._wanted_epoch = 0
        self._wanted: frozenset[str] | None = None
        self._wake = asyncio.Event()
        self._emptied = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def follow(self, assignment: Assignment) -> None:
        """Event loop: the newest assignment; the loop catches up with it."""
        self._wanted = assignment.units
        self._wanted_epoch = assignment.epoch
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def fence(self) -> None:
        """The cluster may have given everything away (our session is gone): drop it all now.
        What is not persisted within a second is dropped: the next owners may already have
        fenced this node's files, so waiting longer would only delay them."""
        self._drain_now_s = FENCED_DRAIN_S
        self.follow(Assignment(0, frozenset()))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self._retry_s)
            except TimeoutError:
                pass
            self._wake.clear()
            wanted, epoch = self._wanted, self._wanted_epoch
            if wanted is None or (wanted == self.held and epoch == self.applied_epoch):
                continue
            try:
                await self._round(wanted)
            except Exception:  # one round's failure must not end the loop: the next retries
                logger.exception("following the cluster's assignment failed; retrying")
            else:
                self.applied_epoch = epoch
                self._drain_now_s = None
                self._publish_held()

    async def _round(self, wanted: frozenset[str]) -> None:
        dropping = sorted(self.held - wanted)
        # Partitions before shards: held produce requests wait for partitions, while group
        # clients retry a coordinator that is not ready; loading both at once slowed both.
        partitions = sorted(key for key in wanted - self.held if isinstance(parse_unit(key), TopicPartition))
        shards = sorted(key for key in wanted - self.held if not isinstance(parse_unit(key), TopicPartition))
        loading = partitions + shards
        for key in dropping:  # refuse writes to every dropped unit before waiting on any
            self.held.discard(key)
        self._releasing.update(dropping)
        self._opening.update(loading)  # held for the admin before any file is opened
        for key in partitions:
            self._topics.expect(_partition(key))  # before it is published: its produce requests wait
        self._publish_held()
        try:
            try:
                await asyncio.gather(*(self._drop(key) for key in dropping))
            finally:
                self._releasing.difference_update(dropping)  # persisted and closed: the next owner may open them
            if dropping:
                logger.info("dropped %d units: %s", len(dropping), _sample(dropping))
            loaded = await asyncio.gather(*(self._load(key) for key in partitions))
            loaded += await asyncio.gather(*(self._load(key) for key in shards))
        finally:
            self._opening.difference_update(loading)
            for key in partitions:
                self._topics.stop_expecting(_partition(key))  # opened, or not: then its requests are refused
        self._publish_held()
        done = [key for key, ok in zip(loading, loaded, strict=True) if ok]
        if done:
            logger.info("loaded %d units: %s", len(done), _sample(done))

    async def _drop(self, key: str) -> None:
        unit = parse_unit(key)
        if isinstance(unit, TopicPartition):
            if not await self._topics.unload(unit, self._drain_now_s or self._drain_s):
                logger.error("%s: dropped before everything was persisted (the store did not take it in %.0f s)",
                             key, self._drain_s)
        else:
            await self._coordinator().drop(unit)

    async def _load(self, key: str) -> bool:
        unit = parse_unit(key)
        try:
            if isinstance(unit, TopicPartition):
                ok = await self._topics.load(unit)
            else:
                await self._coordinator().load(unit)
                ok = True
        except OSError as error:
            logger.warning("%s: cannot load it yet: %s", key, error)
            return False
        if ok:
            self.held.add(key)
        return ok

    def _publish_held(self) -> None:
        self._publish(frozenset(self.held), frozenset(self._opening), frozenset(self._releasing), self.applied_epoch)
        if self.held or self._opening or self._releasing:
            self._emptied.clear()
        else:
            self._emptied.set()

    async def wait_empty(self, timeout_s: float) -> bool:
        """Until this node serves nothing (a planned stop hands everything over); False on timeout."""
        try:
            await asyncio.wait_for(self._emptied.wait(), timeout_s)
        except TimeoutError:
            return False
        return True


def _sample(keys: list[str], count: int = 5) -> str:
    return ", ".join(keys[:count]) + (f" and {len(keys) - count} more" if len(keys) > count else "")


__all__ = ["Ownership", "unit_key"]


def _partition(key: str) -> TopicPartition:
    unit = parse_unit(key)
    assert isinstance(unit, TopicPartition), f"{key} is not a partition"
    return unit
