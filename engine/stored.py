"""A store read from outside any broker (an export, a Spark job): the topics its catalog
holds and a read-only reader per partition (engine/log/reader.py). Nothing here writes, so it
may run beside live brokers on the same store; what it reads ends at each partition's
published checkpoint C."""

from __future__ import annotations

from .catalog.catalog import Catalog, topic_dir
from .catalog.topic import Topic
from .errors import UnknownPartition, UnknownTopic
from .log.reader import LogReader, open_readonly
from .store.base import Store
from .store.readonly import ReadOnlyStore


def stored_topics(store: Store) -> dict[str, Topic]:
    """Every topic on the store by name, as its catalog holds it now."""
    catalog = Catalog(ReadOnlyStore(store), owner="reader")
    catalog.reload()
    return {topic.name: topic for topic in catalog}


def stored_topic(store: Store, name: str) -> Topic:
    """One topic as the store holds it now; UnknownTopic if it holds none by that name."""
    topic = stored_topics(store).get(name)
    if topic is None:
        raise UnknownTopic(f"no topic {name!r} on the store")
    return topic


def partition_reader(store: Store, topic: Topic, partition: int) -> LogReader:
    """A read-only reader of one physical partition of `topic`."""
    if not 0 <= partition < topic.partition_count:
        raise UnknownPartition(f"{topic.name} has no partition {partition}")
    return open_readonly(store, f"{topic_dir(topic)}/{partition}")
