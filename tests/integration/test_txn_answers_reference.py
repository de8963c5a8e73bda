"""Whole transaction answers compared with the reference Apache Kafka: every field, not only error codes.

One transactional id lives a whole life on each broker, with the requests at the versions
real clients send today (kafka-clients 4.x and librdkafka 2.x,
/work/shared/reference/kafka-clients.md; Martlet does not finalize transaction.version, so
Java keeps to the classic flow, docs/transactions.md "Transactions V2"):

- FindCoordinator with key_type 1; InitProducerId with a timeout over the maximum, for the
  transactional id, for an idempotent producer, and again during a transaction (the fence);
- AddPartitionsToTxn in the client form (v0 or v3; Java's batched v5 too) with an unknown
  topic, a wrong epoch and the fenced epoch; AddOffsetsToTxn; TxnOffsetCommit; EndTxn commit
  and abort, with no transaction, again after a commit and with the fenced epoch; Produce of
  transactional batches (in and outside the transaction) and of an idempotent one;
- DescribeTransactions (unknown, Empty, Ongoing, CompleteCommit, after the fence),
  ListTransactions (state, producer-id and unknown-state filters) and DescribeProducers
  (a partition with an idempotent and a transactional producer; unknown partition and topic).

Producer ids are each broker's own, so the flow runs separately on each broker, threading
its own ids and epochs through, and records each answer under a label. Answers are reduced
with tests/support/answers.py's shape (ports, hosts, throttle times and messages to
null-or-not), then each broker-chosen value is normalised as `Flow._generic` says.
FindCoordinator's node id is compared as it is (both brokers are node 1); the
__transaction_state partition an id lives in, numbered differently on each broker, shows in
no answer of these APIs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from martlet.protocol.codec import build, request_type
from martlet.records.build import NewRecord, Producer, build_batch
from tests.fixtures.martlet import wait_until
from tests.integration.raw_client import RawClient, serving
from tests.support.answers import differences, shape
from tests.support.group_requests import coordinator_ready

pytestmark = [pytest.mark.integration, pytest.mark.java]

PRODUCE, METADATA, FIND_COORDINATOR, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 3, 10, 19, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
OFFSETS = "__consumer_offsets"
TIMEOUT_MS = 60_000
TIMEOUT_MS_TOO_LONG = 7_200_000  # over both maxima (Kafka 15 min, Martlet an hour)
TIMESTAMP = 1_700_000_000_000
CLIENT_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 60.0
STATE_TIMEOUT_S = 30.0  # the markers of a decided transaction are written well within this
NONE, CONCURRENT_TRANSACTIONS = 0, 51
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


@dataclass(frozen=True)
class Versions:
    """The versions one client sends to a broker without transaction.version 2, each its
    newest within Kafka 4.4's range. Java's AddPartitionsToTxn: kafka-clients.md gives v3 as
    the client maximum (LAST_CLIENT_VERSION), while docs/transactions.md ("Transactions V2") saw
    the 4.4 client send v5, the batched form with one transaction: `batched`, compared too."""

    name: str
    find: int
    init: int
    add_partitions: int
    add_offsets: int
    txn_commit: int
    end: int
    produce: int
    batched: int | None


JAVA = Versions("kafka-clients 4.x", find=6, init=5, add_partitions=3, add_offsets=4, txn_commit=4, end=4,
                produce=11, batched=5)
LIBRDKAFKA = Versions("librdkafka 2.x", find=2, init=4, add_partitions=0, add_offsets=0, txn_commit=3, end=1,
                      produce=10, batched=None)
# AddPartitionsToTxn's results, looked up by clients by name and index (see Flow._generic)
HASH_ORDERED = frozenset({"results_by_topic_v3_and_below", "topic_results", "results_by_partition"})
BROKER_TIMES = frozenset({"transaction_start_time", "last_timestamp"})  # see Flow._generic
ADMIN_LIST_VERSION = 2  # ListTransactions; DescribeTransactions and DescribeProducers have only v0


class Flow:
    """One transactional id's life on one broker: its connection and each answer by label."""

    def __init__(self, bootstrap: str, prefix: str, topic: str) -> None:
        self.client = RawClient(bootstrap, CLIENT_TIMEOUT_S, client_id="txn-answers")
        self.prefix = prefix
        self.topic = topic
        self.seen: dict[str, Any] = {}
        self.producers: dict[int, str] = {}  # a producer id -> "<producer N>", in the order handed out

    def close(self) -> None:
        self.client.close()

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        return self.client.request(build(request_type(api_key, version), body))

    def ask(self, label: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
        return self.note(label, self.request(api_key, version, body))

    def describe(self, label: str, transactional_id: str) -> dict[str, Any]:
        answer = describe_transactions(self.client, transactional_id)
        assert label not in self.seen, label
        self.seen[label] = answer
        return answer

    def note(self, label: str, answer: Any) -> Any:
        assert label not in self.seen, label
        self.seen[label] = shape(answer)
        return answer

    def producer(self, producer_id: int) -> int:
        if producer_id >= 0:
            self.producers.setdefault(producer_id, f"<producer {len(self.producers) + 1}>")
        return producer_id

    def answers(self) -> dict[str, Any]:
        return {label: self._generic(value) for label, value in self.seen.items()}

    def _generic(self, value: Any, name: str = "") -> Any:
        """Broker-chosen values made comparable:
        - producer ids: each broker hands out its own; an id reads as its place in the flow
          ("<producer 1>" is the first), which keeps "the same producer" comparable;
        - transaction_start_time, and a producer's last_timestamp once a marker (stamped by the
          coordinator) is its last write: the broker's clock, compared as set (> 0) or not;
        - the partition of __consumer_offsets a transaction holds: Kafka's reference runs
          with offsets.topic.num.partitions=1, Martlet has its own coordinator shards (a group
          lives in the shard its id hashes to), so the index differs by design;
        - ListTransactions narrowed to this flow's ids (the reference broker serves other
          tests), and lists Kafka answers in its hash maps' order (AddPartitionsToTxn's
          results, producers, partitions) sorted."""
        if isinstance(value, dict):
            shaped = {key: self._generic(item, key) for key, item in value.items()}
            if shaped.get("topic") == OFFSETS and "partitions" in shaped:  # DescribeTransactions
                shaped["partitions"] = ["<offsets partition>" for _ in shaped["partitions"]]
            return shaped
        if isinstance(value, list):
            items = [self._generic(item) for item in value]
            if name == "transaction_states":
                items = sorted((s for s in items if str(s["transactional_id"]).startswith(self.prefix)),
                               key=lambda s: str(s["transactional_id"]))
            if name == "active_producers":
                items.sort(key=lambda p: str(p["producer_id"]))
            if name in HASH_ORDERED:
                items.sort(key=lambda item: str(item.get("name", item.get("partition_index"))))
            if all(isinstance(item, int) for item in items):
                items.sort()
            return items
        if name == "producer_id" and value in self.producers:
            return self.producers[value]
        if name in BROKER_TIMES and isinstance(value, int) and value > 0 and value != TIMESTAMP:
            return "<time>"
        return value


# -- DescribeTransactions, decoded here: kio reads its transaction_start_time as a time and
# refuses the -1 Kafka sends for a transaction that has not started


class Reader:
    """A flexible (KIP-482) answer read field by field."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def fixed(self, size: int) -> int:
        value = int.from_bytes(self.data[self.at:self.at + size], "big", signed=True)
        self.at += size
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    def string(self) -> str:
        size = self.uvarint() - 1
        self.at += size
        return self.data[self.at - size:self.at].decode()

    def array(self, item: Callable[[], Any]) -> list[Any]:
        return [item() for _ in range(self.uvarint() - 1)]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()

    def ended(self) -> bool:
        return self.at == len(self.data)


def describe_transactions(client: RawClient, transactional_id: str) -> dict[str, Any]:
    """DescribeTransactions v0 of one id, shaped as tests/support/answers.py's shape shapes answers."""
    correlation_id = client.send(build(request_type(DESCRIBE_TRANSACTIONS, 0), {"transactional_ids": [transactional_id]}))
    read = Reader(client.read_frame())
    assert read.fixed(4) == correlation_id
    read.tags()
    throttle = read.fixed(4)

    def topic() -> dict[str, Any]:
        found = {"topic": read.string(), "partitions": read.array(lambda: read.fixed(4))}
        read.tags()
        return found

    def state() -> dict[str, Any]:
        found = {"error_code": read.fixed(2), "transactional_id": read.string(), "transaction_state": read.string(),
                 "transaction_timeout": read.fixed(4), "transaction_start_time": read.fixed(8),
                 "producer_id": read.fixed(8), "producer_epoch": read.fixed(2),
                 "topics": sorted(read.array(topic), key=lambda t: str(t["topic"]))}
        read.tags()
        return found

    answer = {"throttle_time": "<set>" if throttle >= 0 else None, "transaction_states": read.array(state)}
    read.tags()
    assert read.ended()
    return answer


# -- request bodies


def find_body(key: str, key_type: int = TRANSACTION_KEY) -> dict[str, Any]:
    return {"key": key, "key_type": key_type, "coordinator_keys": [key]}


def init_body(transactional_id: str | None, timeout_ms: int = TIMEOUT_MS) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "transaction_timeout": timeout_ms, "producer_id": -1,
            "producer_epoch": -1}


def add_partitions_body(transactional_id: str, producer_id: int, epoch: int,
                        topics: dict[str, list[int]]) -> dict[str, Any]:
    named = [{"name": name, "partitions": partitions} for name, partitions in topics.items()]
    return {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": named,
            "transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                              "producer_epoch": epoch, "verify_only": False, "topics": named}]}


def txn_body(transactional_id: str, producer_id: int, epoch: int, **more: Any) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch} | more


def txn_commit_body(transactional_id: str, group: str, producer_id: int, epoch: int,
                    offsets: dict[str, list[tuple[int, int]]]) -> dict[str, Any]:
    topics = [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset,
                                              "committed_leader_epoch": -1, "committed_metadata": ""}
                                             for partition, offset in partitions]}
              for topic, partitions in offsets.items()]
    return {"transactional_id": transactional_id, "group_id": group, "producer_id": producer_id,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": topics}


def produce_body(transactional_id: str | None, topic: str, partition: int, producer: Producer) -> dict[str, Any]:
    batch = build_batch([NewRecord(None, b"v", TIMESTAMP)], producer=producer,
                        transactional=transactional_id is not None)
    return {"transactional_id": transactional_id, "acks": -1, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(batch)}]}]}


def list_body(states: list[str], producer_ids: list[int]) -> dict[str, Any]:
    return {"state_filters": states, "producer_id_filters": producer_ids, "duration_filter": -1,
            "transactional_id_pattern": None}


def producers_body(topic: str) -> dict[str, Any]:
    return {"topics": [{"name": topic, "partition_indexes": [0, 1, 9]},
                       {"name": f"{topic}-none", "partition_indexes": [0]}]}


# -- the flow


def transaction_flow(flow: Flow, v: Versions) -> None:
    """Bad init, init, a committed transaction, a second one fenced by a new InitProducerId."""
    tid, topic, group = f"{flow.prefix}-tid", flow.topic, f"{flow.prefix}-group"
    flow.ask("FindCoordinator, transactional id", FIND_COORDINATOR, v.find, find_body(tid))
    flow.ask("InitProducerId, timeout over the maximum", INIT_PRODUCER_ID, v.init, init_body(tid, TIMEOUT_MS_TOO_LONG))
    flow.describe("DescribeTransactions, unknown id", tid)
    init = flow.ask("InitProducerId, transactional", INIT_PRODUCER_ID, v.init, init_body(tid))
    pid, epoch = flow.producer(init.producer_id), init.producer_epoch
    idempotent = flow.ask("InitProducerId, idempotent", INIT_PRODUCER_ID, v.init, init_body(None))
    other = flow.producer(idempotent.producer_id)
    flow.describe("DescribeTransactions, Empty", tid)
    flow.ask("EndTxn, no transaction", END_TXN, v.end, txn_body(tid, pid, epoch, committed=True))

    add = (ADD_PARTITIONS_TO_TXN, v.add_partitions)
    flow.ask("AddPartitionsToTxn, an unknown topic", *add,
             add_partitions_body(tid, pid, epoch, {f"{topic}-none": [0], topic: [1]}))
    flow.ask("AddPartitionsToTxn, a wrong epoch", *add, add_partitions_body(tid, pid, epoch + 5, {topic: [0]}))
    flow.ask("AddPartitionsToTxn", *add, add_partitions_body(tid, pid, epoch, {topic: [0]}))
    flow.ask("Produce, transactional", PRODUCE, v.produce, produce_body(tid, topic, 0, Producer(pid, epoch, 0)))
    flow.ask("Produce, idempotent", PRODUCE, v.produce, produce_body(None, topic, 0, Producer(other, 0, 0)))
    flow.ask("Produce, transactional, a partition outside the transaction", PRODUCE, v.produce,
             produce_body(tid, topic, 1, Producer(pid, epoch, 0)))
    flow.ask("FindCoordinator, group", FIND_COORDINATOR, v.find, find_body(group, GROUP_KEY))
    flow.ask("AddOffsetsToTxn", ADD_OFFSETS_TO_TXN, v.add_offsets, txn_body(tid, pid, epoch, group_id=group))
    flow.ask("TxnOffsetCommit", TXN_OFFSET_COMMIT, v.txn_commit,
             txn_commit_body(tid, group, pid, epoch, {topic: [(0, 1), (9, 1)], f"{topic}-none": [(0, 1)]}))
    admin_views(flow, "Ongoing", tid, pid)
    flow.ask("EndTxn, commit", END_TXN, v.end, txn_body(tid, pid, epoch, committed=True))
    wait_state(flow, tid, "CompleteCommit")
    admin_views(flow, "CompleteCommit", tid, pid)
    flow.ask("EndTxn, commit again", END_TXN, v.end, txn_body(tid, pid, epoch, committed=True))
    flow.ask("EndTxn, abort after the commit", END_TXN, v.end, txn_body(tid, pid, epoch, committed=False))

    flow.ask("AddPartitionsToTxn, second transaction", *add, add_partitions_body(tid, pid, epoch, {topic: [0]}))
    if v.batched is not None:
        flow.ask(f"AddPartitionsToTxn v{v.batched}, second transaction", ADD_PARTITIONS_TO_TXN, v.batched,
                 add_partitions_body(tid, pid, epoch, {topic: [1]}))
    else:
        flow.ask("AddPartitionsToTxn, second transaction, partition 1", *add,
                 add_partitions_body(tid, pid, epoch, {topic: [1]}))
    flow.ask("Produce, second transaction", PRODUCE, v.produce, produce_body(tid, topic, 1, Producer(pid, epoch, 0)))
    fence(flow, v, tid, pid, epoch, group)


def fence(flow: Flow, v: Versions, tid: str, pid: int, epoch: int, group: str) -> None:
    """A new InitProducerId aborts the open transaction and fences the old epoch."""
    answers = [flow.ask("InitProducerId, during a transaction", INIT_PRODUCER_ID, v.init, init_body(tid))]

    def retried() -> bool:  # as clients retry CONCURRENT_TRANSACTIONS while the abort completes
        if answers[-1].error_code != CONCURRENT_TRANSACTIONS:
            return True
        answers.append(flow.request(INIT_PRODUCER_ID, v.init, init_body(tid)))
        return False
    assert wait_until(retried, STATE_TIMEOUT_S), answers[-1]
    fenced = flow.note("InitProducerId, the retry after the abort", answers[-1])
    flow.producer(fenced.producer_id)
    wait_state(flow, tid, "Empty", "CompleteAbort")
    flow.describe("DescribeTransactions, after the fence", tid)
    flow.ask("DescribeProducers, after the abort", DESCRIBE_PRODUCERS, 0, producers_body(flow.topic))
    flow.ask("AddPartitionsToTxn, the fenced epoch", ADD_PARTITIONS_TO_TXN, v.add_partitions,
             add_partitions_body(tid, pid, epoch, {flow.topic: [0]}))
    flow.ask("AddOffsetsToTxn, the fenced epoch", ADD_OFFSETS_TO_TXN, v.add_offsets,
             txn_body(tid, pid, epoch, group_id=group))
    flow.ask("EndTxn, the fenced epoch", END_TXN, v.end, txn_body(tid, pid, epoch, committed=False))
    flow.ask("EndTxn, abort with no transaction", END_TXN, v.end,
             txn_body(tid, fenced.producer_id, fenced.producer_epoch, committed=False))


def admin_views(flow: Flow, when: str, tid: str, pid: int) -> None:
    flow.describe(f"DescribeTransactions, {when}", tid)
    flow.ask(f"ListTransactions, state {when}", LIST_TRANSACTIONS, ADMIN_LIST_VERSION, list_body([when], []))
    flow.ask(f"ListTransactions, producer id, {when}", LIST_TRANSACTIONS, ADMIN_LIST_VERSION, list_body([], [pid]))
    flow.ask(f"ListTransactions, an unknown state, {when}", LIST_TRANSACTIONS, ADMIN_LIST_VERSION,
             list_body(["Bogus", when], []))
    flow.ask(f"DescribeProducers, {when}", DESCRIBE_PRODUCERS, 0, producers_body(flow.topic))


def wait_state(flow: Flow, tid: str, *states: str) -> None:
    """The coordinator has written the markers of the decided transaction (bounded)."""
    def reached() -> bool:
        return describe_transactions(flow.client, tid)["transaction_states"][0]["transaction_state"] in states
    assert wait_until(reached, STATE_TIMEOUT_S), f"{tid} not in {states}"


# -- brokers


@pytest.fixture(scope="module")
def bootstraps(martlet: Any, reference_kafka: Any) -> dict[str, str]:
    """Both brokers with a transaction and a group coordinator that serve (Kafka makes and
    loads __transaction_state and __consumer_offsets at their first FindCoordinator)."""
    found = {"Martlet": martlet.bootstrap, "Kafka": reference_kafka.bootstrap}
    warmup = f"txa-warmup-{uuid.uuid4().hex[:8]}"
    for bootstrap in found.values():
        with RawClient(bootstrap, CLIENT_TIMEOUT_S) as client:
            assert wait_until(lambda c=client: _transactions_ready(c, warmup), READY_TIMEOUT_S), bootstrap
            assert wait_until(lambda c=client: coordinator_ready(c), READY_TIMEOUT_S), bootstrap
    return found


def _transactions_ready(client: RawClient, transactional_id: str) -> bool:
    found = client.request(build(request_type(FIND_COORDINATOR, 4), find_body(transactional_id)))
    if found.coordinators[0].error_code != NONE:
        return False
    return client.request(build(request_type(INIT_PRODUCER_ID, 4), init_body(transactional_id))).error_code == NONE


def make_topic(bootstrap: str, name: str) -> None:
    with RawClient(bootstrap, CLIENT_TIMEOUT_S) as client:
        body = {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout": 30_000}
        answer = client.request(build(request_type(CREATE_TOPICS, 7), body))
        assert answer.topics[0].error_code == NONE, answer

        assert wait_until(lambda: serving(client, {name: 2}), READY_TIMEOUT_S), name


def run(bootstrap: str, prefix: str, flow_of: Callable[[Flow], None]) -> dict[str, Any]:
    topic = f"{prefix}-topic"
    make_topic(bootstrap, topic)
    flow = Flow(bootstrap, prefix, topic)
    try:
        flow_of(flow)
    finally:
        flow.close()
    return flow.answers()


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    return [f"{label} {found}" for label in dict.fromkeys([*theirs, *ours])
            for found in differences(ours.get(label), theirs.get(label))]


@pytest.mark.parametrize("versions", [JAVA, LIBRDKAFKA], ids=lambda v: v.name.split()[0])
def test_transaction_answers(bootstraps: dict[str, str], versions: Versions) -> None:
    prefix = f"txa-{uuid.uuid4().hex[:8]}"  # the same names on both brokers
    ours, theirs = (run(bootstrap, prefix, lambda flow: transaction_flow(flow, versions))
                    for bootstrap in bootstraps.values())
    problems = compare(ours, theirs)
    assert not problems, f"{versions.name}:\n" + "\n".join(problems)

