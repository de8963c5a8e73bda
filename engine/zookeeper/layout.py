"""What a cluster keeps in ZooKeeper, and the JSON of each node.

Everything below sits under the cluster's chroot (`--zookeeper host:port/chroot`, default
`/martlet`). ZooKeeper holds only small, fast-changing coordination state; data, topics and
committed offsets live in the store (HDFS), so a ZooKeeper lost for good costs placement, not data.

    /cluster-id                    persistent: the cluster's id (Kafka's), made by the first broker
    /brokers/ids/<id>              ephemeral, one per live broker: BrokerRecord (address, machine,
                                   what it holds, its load, its HTTP address); rewritten at every
                                   load report
    /brokers/leading/<id>          ephemeral, one per live broker: the units it serves or is opening
                                   (produce requests for those wait for the open), a JSON list;
                                   rewritten only when that changes. Metadata names a leader (and
                                   FindCoordinator a coordinator) only once it is listed here
    /brokers/addresses/<host:port> persistent: the node id given to that address, once; a broker
                                   restarted on the same address keeps its id (Kafka's broker.id)
    /brokers/next-id               persistent counter: its version is the last id given out
    /assignments/<host:port>       persistent, written by the admin leader only: Assignment, what
                                   the broker at that address must serve
    /admin/election/               kazoo Election contenders (the admins)
    /admin/leader                  ephemeral: the admin leader's AdminRecord
    /admin/reassignments           persistent: operator moves not yet done, {"topic/index": node id}
    /topics/changes                persistent: a counter every topic change bumps, so brokers and
                                   the admin re-read the catalog from the store
    /topics/lock/                  kazoo Lock held around a topic change (create, delete, grow,
                                   reconfigure), so concurrent DDL on different brokers is serial

A unit of placement is a physical partition `topic/index` or a coordinator shard `@offsets/n`
("@" cannot start a topic name, so the two never clash).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..types import TopicPartition

DEFAULT_CHROOT = "/martlet"
CLUSTER_ID = "/cluster-id"
BROKERS = "/brokers/ids"
LEADING = "/brokers/leading"
ADDRESSES = "/brokers/addresses"
NEXT_ID = "/brokers/next-id"
ASSIGNMENTS = "/assignments"
ELECTION = "/admin/election"
ADMIN_LEADER = "/admin/leader"
REASSIGNMENTS = "/admin/reassignments"
TOPIC_CHANGES = "/topics/changes"
TOPIC_LOCK = "/topics/lock"
SHARD_PREFIX = "@offsets/"


def split_zookeeper(address: str) -> tuple[str, str]:
    """"host:port[,host:port...][/chroot]" -> (hosts, chroot); the chroot defaults to /martlet."""
    hosts, slash, chroot = address.partition("/")
    if not hosts:
        raise ValueError(f"ZooKeeper address {address!r} names no host")
    return hosts, f"/{chroot.strip('/')}" if slash and chroot.strip("/") else DEFAULT_CHROOT


def unit_key(unit: TopicPartition | int) -> str:
    """A partition or a coordinator shard (int) as its key in ZooKeeper's JSON."""
    if isinstance(unit, int):
        return f"{SHARD_PREFIX}{unit}"
    return f"{unit.topic}/{unit.partition}"


def parse_unit(key: str) -> TopicPartition | int:
    if key.startswith(SHARD_PREFIX):
        return int(key[len(SHARD_PREFIX):])
    topic, _, index = key.rpartition("/")
    return TopicPartition(topic, int(index))


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    """A live broker, as it describes itself in /brokers/ids/<id>."""

    node_id: int
    host: str
    port: int
    machine: str  # the host it runs on: several brokers may share one machine
    rack: str | None = None
    held: frozenset[str] = frozenset()  # units it serves now (keys of unit_key)
    bytes_in: dict[str, int] = field(default_factory=dict)  # per unit, bytes/s since the last report
    bytes_out: dict[str, int] = field(default_factory=dict)
    memory_bytes: int = 0
    connections: int = 0
    leaving: bool = False  # shutting down: give everything away
    applied_epoch: int = 0  # the epoch of the last assignment it acted on
    sessions: dict[str, int] = field(default_factory=dict)  # S of each partition it serves (Kafka's leader epoch)
    http: str | None = None  # its gateway's HTTP address, "host:port"; absent (null) in records of older brokers
    endpoints: tuple[str, ...] = ()  # its gateway's listeners, "NAME://host:port"; absent in older records

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def to_json(self) -> bytes:
        return json.dumps({
            "id": self.node_id, "host": self.host, "port": self.port, "machine": self.machine, "rack": self.rack,
            "held": sorted(self.held), "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
            "memory_bytes": self.memory_bytes, "connections": self.connections, "leaving": self.leaving,
            "applied_epoch": self.applied_epoch, "sessions": self.sessions, "http": self.http,
            "endpoints": list(self.endpoints),
        }, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> BrokerRecord:
        raw = json.loads(data)
        return cls(raw["id"], raw["host"], raw["port"], raw.get("machine", raw["host"]), raw.get("rack"),
                   frozenset(raw.get("held", ())), dict(raw.get("bytes_in", {})), dict(raw.get("bytes_out", {})),
                   int(raw.get("memory_bytes", 0)), int(raw.get("connections", 0)), bool(raw.get("leaving", False)),
                   int(raw.get("applied_epoch", 0)), dict(raw.get("sessions", {})), _text_or_none(raw.get("http")),
                   tuple(str(endpoint) for endpoint in raw.get("endpoints", ())))


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the broker at one address must serve; `epoch` rises with every write."""

    epoch: int
    units: frozenset[str]

    def to_json(self) -> bytes:
        return json.dumps({"epoch": self.epoch, "units": sorted(self.units)}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Assignment:
        if not data:
            return cls(0, frozenset())
        raw = json.loads(data)
        return cls(int(raw["epoch"]), frozenset(raw["units"]))

    def partitions(self) -> set[TopicPartition]:
        return {unit for unit in map(parse_unit, self.units) if isinstance(unit, TopicPartition)}

    def shards(self) -> set[int]:
        return {unit for unit in map(parse_unit, self.units) if isinstance(unit, int)}


@dataclass(frozen=True, slots=True)
class AdminRecord:
    admin_id: str
    machine: str
    pid: int

    def to_json(self) -> bytes:
        return json.dumps({"id": self.admin_id, "machine": self.machine, "pid": self.pid}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> AdminRecord:
        raw = json.loads(data)
        return cls(raw["id"], raw["machine"], int(raw["pid"]))


def reassignments_from_json(data: bytes) -> dict[str, int]:
    return {key: int(value) for key, value in json.loads(data).items()} if data else {}


def reassignments_to_json(moves: dict[str, int]) -> bytes:
    return json.dumps(dict(sorted(moves.items())), separators=(",", ":")).encode()


def leading_to_json(units: frozenset[str]) -> bytes:
    return json.dumps(sorted(units), separators=(",", ":")).encode()


def leading_from_json(data: bytes) -> frozenset[str]:
    return frozenset(json.loads(data))
