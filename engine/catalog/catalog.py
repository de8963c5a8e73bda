"""The set of topics, persisted as one `topic.json` per topic directory.

Layout under the store root:
    topics/<owner#name#uuid>/topic.json      the Topic (see topic.py)
    topics/<owner#name#uuid>/<index>/        one directory per physical partition
A topic being deleted is first renamed to `<resource>.deleted`, so a crash in the middle
of removing its files never brings it back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

from ..errors import InvalidPartitionCount, TopicExists, UnknownTopic
from ..store.atomic import read_whole, write_atomically
from ..store.base import Store
from .config import TopicConfig
from .names import ResourceName, check_name
from .ranges import SLOTS, initial_ranges
from .topic import Topic

TOPICS_DIR = "topics"
DELETED_SUFFIX = ".deleted"


def topic_dir(topic: Topic) -> str:
    return f"{TOPICS_DIR}/{topic.resource}"


class Catalog:
    def __init__(self, store: Store, owner: str, partitions_max: int = SLOTS,
                 new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self.store = store
        self.new_uuid = new_uuid  # injected, so tests can name resources deterministically
        self.owner = owner
        self.partitions_max = min(partitions_max, SLOTS)
        self._topics: dict[str, Topic] = {}

    def load(self) -> None:
        self.store.mkdir(TOPICS_DIR)
        for entry in self.store.list(TOPICS_DIR):
            if entry.endswith(DELETED_SUFFIX):
                self.store.delete(f"{TOPICS_DIR}/{entry}")
            elif self.store.exists(f"{TOPICS_DIR}/{entry}/topic.json"):
                topic = Topic.from_json(read_whole(self.store, f"{TOPICS_DIR}/{entry}/topic.json"))
                self._topics[topic.name] = topic

    def __iter__(self) -> Iterator[Topic]:
        return iter(sorted(self._topics.values(), key=lambda t: t.name))

    def get(self, name: str) -> Topic:
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopic(f"topic {name!r} does not exist") from None

    def find(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def create(self, name: str, partitions: int, config: TopicConfig, overrides: frozenset[str], now_ms: int) -> Topic:
        check_name(name)
        if name in self._topics:
            raise TopicExists(f"topic {name!r} already exists")
        self._check_count(partitions)
        config.check()
        topic = Topic(ResourceName.new(self.owner, name, self.new_uuid), 1, tuple(initial_ranges(partitions)),
                      config, overrides, now_ms)
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

    def reconfigure(self, name: str, config: TopicConfig, overrides: frozenset[str]) -> Topic:
        config.check()
        return self._replace(self.get(name).reconfigured(config, overrides))

    def delete(self, name: str) -> Topic:
        topic = self.get(name)
        tombstone = topic_dir(topic) + DELETED_SUFFIX
        self.store.rename(topic_dir(topic), tombstone)
        del self._topics[name]
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
        self._topics[topic.name] = topic

