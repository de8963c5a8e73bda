"""The set of topics, persisted as one `topic.json` per topic directory.

Layout under the store root:
    topics/<owner#name#uuid>/topic.json      the Topic (see topic.py)
    topics/<owner#name#uuid>/<index>/        one directory per physical partition
A topic being deleted is first renamed to `<resource>.deleted`, so a crash in the middle
of removing its files never brings it back.

Topics can change under a running broker: another process sharing the store may create,
grow, reconfigure or delete them. `reload` re-reads every `topic.json` and reports what
changed since this catalog last looked (CatalogChanges), so the engine can open or close
partitions. It reads the store on demand (a caller polls, or a watch from a coordination
service triggers it); it costs one list and one read per topic. A directory without a
`topic.json` yet is a create still in progress elsewhere, and is skipped until it has one.

Changes run on the engine's admin thread while the event loop reads: the table of topics is
never changed in place but replaced whole, so a reader iterates a consistent snapshot.

A topic's configuration is its overrides on top of the defaults (`defaults`): whatever a
topic.json says of a setting the topic does not override is replaced by the current
default when it is read, and `rebase` re-derives every topic when the defaults change, so a
topic without its own retention follows the broker's, as in Kafka.

Dynamic settings (`dynamic-configs.json` under the store root) are kept here for whoever
sets them (the gateway: Kafka's dynamic broker configs) as opaque text by scope, "" for the
whole cluster, a node id for one node; they travel to other nodes with the catalog.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..errors import InvalidPartitionCount, TopicExists, UnknownTopic
from ..ids import RandomIds
from ..store.atomic import read_whole, write_atomically
from ..store.base import Store
from .config import TopicConfig
from .names import RESERVED, ResourceName, check_name
from .ranges import SLOTS, initial_ranges
from .topic import Topic

TOPICS_DIR = "topics"
DELETED_SUFFIX = ".deleted"
DYNAMIC_FILE = "dynamic-configs.json"
Dynamic = dict[str, dict[str, str]]  # scope ("" or a node id) -> name -> value


def topic_dir(topic: Topic) -> str:
    return f"{TOPICS_DIR}/{topic.resource}"


Change = tuple[Topic, Topic]  # (before, after)


@dataclass(frozen=True, slots=True)
class CatalogChanges:
    """What a reload found. A topic deleted and created again under its name (a new
    resource uuid) is both deleted and created; one grown and reconfigured is in both."""

    created: tuple[Topic, ...] = ()
    deleted: tuple[Topic, ...] = ()
    grown: tuple[Change, ...] = ()
    reconfigured: tuple[Change, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.created or self.deleted or self.grown or self.reconfigured)


def compare(before: dict[str, Topic], after: dict[str, Topic]) -> CatalogChanges:
    """The changes that turn the topics `before` into the topics `after` (both by name)."""
    created, deleted, grown, reconfigured = [], [], [], []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is not None and (new is None or new.resource != old.resource):
            deleted.append(old)
        if new is not None and (old is None or new.resource != old.resource):
            created.append(new)
        if old is None or new is None or new.resource != old.resource:
            continue
        if new.ranges != old.ranges or new.version != old.version:
            grown.append((old, new))
        if new.config != old.config or new.overrides != old.overrides:
            reconfigured.append((old, new))
    return CatalogChanges(tuple(created), tuple(deleted), tuple(grown), tuple(reconfigured))


class Catalog:
    def __init__(self, store: Store, owner: str, partitions_max: int = SLOTS,
                 new_uuid: Callable[[], uuid.UUID] | None = None) -> None:
        self.store = store
        self.new_uuid = new_uuid or RandomIds().uuid  # injected (engine/ids.py), so tests can name resources deterministically
        self.owner = owner
        self.partitions_max = min(partitions_max, SLOTS)
        self._topics: dict[str, Topic] = {}
        self.defaults: TopicConfig | None = None  # None: take each topic.json as it is
        self.dynamic: Dynamic = {}

    def load(self) -> None:
        """Read the topics at start, finishing deletes a crash interrupted."""
        self.store.mkdir(TOPICS_DIR)
        for entry in self.store.list(TOPICS_DIR):
            if entry.endswith(DELETED_SUFFIX):
                self.store.delete(f"{TOPICS_DIR}/{entry}")
        self._topics = self._read_all()
        self.dynamic = self._read_dynamic()

    def reload(self) -> CatalogChanges:
        """Re-read the store (another process may have changed it) and report what changed.

        Tombstones are left alone here: their owner may still be removing them."""
        fresh = self._read_all()
        changes = compare(self._topics, fresh)
        self._topics = fresh
        self.dynamic = self._read_dynamic()
        return changes

    def rebase(self, defaults: TopicConfig) -> list[Topic]:
        """New defaults: re-derive every topic's configuration (in memory; the files are
        re-derived whenever they are read). Returns the topics whose configuration changed."""
        self.defaults = defaults
        fresh = {name: self._derived(topic) for name, topic in self._topics.items()}
        changed = [topic for name, topic in fresh.items() if topic.config != self._topics[name].config]
        self._topics = fresh
        return changed

    def _derived(self, topic: Topic) -> Topic:
        if self.defaults is None:
            return topic
        own = {name: getattr(topic.config, name) for name in topic.overrides}
        return topic.reconfigured(self.defaults.updated(own), topic.overrides)

    def save_dynamic(self, dynamic: Dynamic) -> None:
        write_atomically(self.store, DYNAMIC_FILE, json.dumps(dynamic, indent=1, sort_keys=True).encode())
        self.dynamic = dynamic

    def _read_dynamic(self) -> Dynamic:
        if not self.store.exists(DYNAMIC_FILE):
            return {}
        try:
            doc = json.loads(read_whole(self.store, DYNAMIC_FILE))
        except FileNotFoundError:
            return {}
        return {str(scope): {str(k): str(v) for k, v in values.items()} for scope, values in doc.items()}

    def _read_all(self) -> dict[str, Topic]:
        topics = {}
        for entry in self.store.list(TOPICS_DIR):
            path = f"{TOPICS_DIR}/{entry}/topic.json"
            if entry.endswith(DELETED_SUFFIX) or not self.store.exists(path):
                continue
            try:
                topic = Topic.from_json(read_whole(self.store, path))
            except FileNotFoundError:
                continue  # deleted by another process between the list and the read
            topics[topic.name] = self._derived(topic)
        return topics

    def __iter__(self) -> Iterator[Topic]:
        return iter(sorted(self._topics.values(), key=lambda t: t.name))

    def get(self, name: str) -> Topic:
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopic(f"topic {name!r} does not exist") from None

    def find(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def create(self, name: str, partitions: int, config: TopicConfig, overrides: frozenset[str], now_ms: int,
               replication_factor: int = 1) -> Topic:
        check_name(name)
        if name in self._topics or name in RESERVED:
            raise TopicExists(f"topic {name!r} already exists")
        self._check_count(partitions)
        config.check()
        topic = Topic(ResourceName.new(self.owner, name, self.new_uuid), 1, tuple(initial_ranges(partitions)),
                      config, overrides, now_ms, replication_factor)
        self.store.mkdir(topic_dir(topic))
        self._save(topic)
        return topic

    def grow(self, name: str, count: int) -> Topic:
        topic = self.get(name)
        if count <= topic.partition_count:
            raise InvalidPartitionCount(
                f"topic {name!r} has {topic.partition_count} partitions; partitions can only be added")
        self._check_count(count)
        return self._replace(topic.grown(count))

    def record_splits(self, name: str, splits: list[tuple[int, int, int]]) -> Topic:
        """Record (child, parent, offset) entries (Topic.splits) in the topic, V unchanged: an
        entry replaces the one of the same child (a pending -1 once the parent's owner knows)."""
        topic = self.get(name)
        by_child = {child: (child, parent, offset) for child, parent, offset in topic.splits + tuple(splits)}
        return self._replace(replace(topic, splits=tuple(by_child[child] for child in sorted(by_child))))

    def reconfigure(self, name: str, config: TopicConfig, overrides: frozenset[str]) -> Topic:
        config.check()
        return self._replace(self.get(name).reconfigured(config, overrides))

    def delete(self, name: str) -> Topic:
        topic = self.get(name)
        tombstone = topic_dir(topic) + DELETED_SUFFIX
        self.store.rename(topic_dir(topic), tombstone)
        self._topics = {key: value for key, value in self._topics.items() if key != name}
        self.store.delete(tombstone)
        return topic

    def _check_count(self, count: int) -> None:
        if not 1 <= count <= self.partitions_max:
            raise InvalidPartitionCount(f"partition count must be between 1 and {self.partitions_max}, not {count}")

    def _replace(self, topic: Topic) -> Topic:
        self._save(topic)
        return topic

    def _save(self, topic: Topic) -> None:
        write_atomically(self.store, f"{topic_dir(topic)}/topic.json", topic.to_json())
        self._topics = {**self._topics, topic.name: topic}

