"""What `martlet bench` runs against one endpoint, and what each run reports.

Every workload gets fresh topics (named by round, so rounds never share data) and runs its
load in separate processes (`load.py`). A run returns metrics by name; `Metric` says each
one's unit and which way is better, so the report can compare without knowing workloads.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka.admin import KafkaAdminClient

from .probe import Probe, rss_bytes

LOAD_TIMEOUT_S = 900.0
LOAD_MODULE = "martlet.compat.bench.load"  # the confluent-kafka roles, each run as `python -m` of it
ADMIN_TIMEOUT_S = 120.0
SPREAD_CREATE_TIMEOUT_S = 300.0  # one CreateTopics of 5,000 partitions (on the reference HDFS: 34 s)
SOCKET_TIMEOUT_MS_MAX = 300_000  # librdkafka cuts any request in flight longer than socket.timeout.ms
MB = 1_000_000
CORES = os.cpu_count() or 1  # /proc/stat counts them all


@dataclass(frozen=True, slots=True)
class Metric:
    unit: str
    higher_is_better: bool


METRICS = {
    "MB/s": Metric("MB/s", True),
    "records/s": Metric("records/s", True),
    "cpu s/GB": Metric("s", False),
    "cpu s": Metric("s", False),
    "peak RSS MiB": Metric("MiB", False),
    "store cpu s/GB": Metric("s", False),
    "machine cpu s/GB": Metric("s", False),
    "machine busy %": Metric("%", False),
    "p50 ms": Metric("ms", False),
    "commit p50 ms": Metric("ms", False),
    "commit p99 ms": Metric("ms", False),
    "p99 ms": Metric("ms", False),
    "p99.9 ms": Metric("ms", False),
    "create s": Metric("s", False),
    "metadata ms": Metric("ms", False),
    "RSS MiB": Metric("MiB", False),
    "compaction s": Metric("s", False),
    "kept %": Metric("%", False),
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    bootstrap: str
    pid: int | None  # the broker process, for CPU and RSS; None for an outside endpoint
    store_pid: int | None = None  # the process serving its store (the reference HDFS), for CPU
    # A secured listener (`bench --secured`): the librdkafka settings each load client adds
    # (security.protocol, sasl.*, ssl.ca.location), and the same broker's plaintext listener,
    # where the bench makes, watches and deletes its topics unmeasured.
    client: dict[str, str] = field(default_factory=dict)
    admin_bootstrap: str | None = None

    @property
    def admin(self) -> str:
        """Where topics are made and deleted: the plaintext listener of a secured endpoint's broker."""
        return self.admin_bootstrap or self.bootstrap


@dataclass(frozen=True, slots=True)
class Scale:
    produce_bytes: int = 1000 * MB  # per 1 KB produce workload
    small_records: int = 1_000_000  # 100-byte records at linger.ms=0
    sync_records: int = 100_000  # 100-byte records sent one at a time (produce-100b-sync)
    latency_seconds: int = 30
    latency_rate: int = 1000
    partition_topics: int = 100  # 10,000 partitions: topics x 100
    partitions_per_topic: int = 100
    spread_partitions: int = 5000  # partitions-5k-traffic: one topic, every partition written
    spread_seconds: int = 60  # ... for this long
    # ... at this many records a second each: "a little traffic". At 1 a second Kafka 4.4 on
    # this machine fell behind until the producer's queue was full (its request threads spent
    # 94 % of their time in the kernel); at 0.2 its acknowledgements took 25-29 s (p50).
    spread_rate: float = 0.2
    warm_up_bytes: int = 300 * MB  # produced and read back, unmeasured, before round 1


QUICK = Scale(produce_bytes=100 * MB, small_records=200_000, sync_records=20_000, latency_seconds=10,
              partition_topics=10, spread_partitions=1000, spread_seconds=20)


@dataclass(slots=True)
class Context:
    endpoint: Endpoint
    scale: Scale
    round: int
    produced: dict[str, int] = field(default_factory=dict)  # topic -> records, for consume

    def topic(self, workload: str) -> str:
        """Named by endpoint too: two endpoints may be two listeners of one broker."""
        return f"bench-{self.endpoint.name}-{workload}-r{self.round}"


def run_load(spec: dict[str, Any], timeout_s: float = LOAD_TIMEOUT_S, module: str = LOAD_MODULE) -> dict[str, Any]:
    """The role `spec["role"]` of `module` (load.py's by default) in a process of its own; its JSON result."""
    proc = _start_load(spec, module)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{spec['role']} load did not finish in {timeout_s:.0f} s") from None
    return _result(spec, out.decode().strip().splitlines()[-1:], proc.returncode)


def run_loads(specs: list[dict[str, Any]], timeout_s: float = LOAD_TIMEOUT_S) -> list[dict[str, Any]]:
    """Several load processes side by side (one per producer); their results in order."""
    procs = [_start_load(spec) for spec in specs]
    deadline = time.monotonic() + timeout_s
    try:
        outs = [proc.communicate(timeout=max(0.0, deadline - time.monotonic()))[0] for proc in procs]
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{specs[0]['role']} loads did not finish in {timeout_s:.0f} s") from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return [_result(spec, out.decode().strip().splitlines()[-1:], proc.returncode)
            for spec, proc, out in zip(specs, procs, outs, strict=True)]


def _start_load(spec: dict[str, Any], module: str = LOAD_MODULE) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", module, json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _result(spec: dict[str, Any], lines: list[str], returncode: int | None) -> dict[str, Any]:
    result = json.loads(lines[0]) if lines else {"error": "no output"}
    if returncode != 0 or "error" in result:
        raise RuntimeError(f"{spec['role']} load failed: {result.get('error', returncode)}")
    return result


def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None,
                 timeout_s: float = ADMIN_TIMEOUT_S) -> None:
    admin = _admin(bootstrap, timeout_s)
    new = NewTopic(topic, partitions, 1, config=configs or {})
    future = admin.create_topics([new], request_timeout=timeout_s, operation_timeout=timeout_s)[topic]
    future.result(timeout=timeout_s)


def delete_topics(bootstrap: str, prefix: str, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
    admin = _admin(bootstrap, timeout_s)
    names = [t for t in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics if t.startswith(prefix)]
    if names:
        for future in admin.delete_topics(names, request_timeout=timeout_s, operation_timeout=timeout_s).values():
            try:
                future.result(timeout=timeout_s)
            except KafkaException as error:  # Kafka's metadata may still list a topic just deleted
                if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise


def _admin(bootstrap: str, timeout_s: float) -> AdminClient:
    """An AdminClient that keeps a request in flight for `timeout_s` (librdkafka's
    socket.timeout.ms, at least its 60 s default and at most its 300 s)."""
    return AdminClient({"bootstrap.servers": bootstrap,
                        "socket.timeout.ms": min(SOCKET_TIMEOUT_MS_MAX, max(60_000, int(timeout_s * 1000)))})


def _probe(ctx: Context) -> Probe:
    """The probe of the endpoint's broker and of the process serving its store, if any."""
    return Probe(ctx.endpoint.pid, ctx.endpoint.store_pid)


def _throughput(result: dict[str, Any], probe: Probe) -> dict[str, float]:
    metrics = {"MB/s": result["bytes"] / MB / result["seconds"],
               "records/s": result["records"] / result["seconds"]}
    return metrics | _broker(probe, result["bytes"])


def _broker(probe: Probe, gigabytes_of: int | None = None) -> dict[str, float]:
    if probe.cpu_s is None or probe.peak_rss_bytes is None:
        return {}
    metrics = {"cpu s": probe.cpu_s, "peak RSS MiB": probe.peak_rss_bytes / (1 << 20)}
    if gigabytes_of:
        gigabytes = gigabytes_of / 1e9
        metrics["cpu s/GB"] = probe.cpu_s / gigabytes
        if probe.store_cpu_s is not None:
            metrics["store cpu s/GB"] = probe.store_cpu_s / gigabytes
        # everything the machine did for the workload: client, broker, store, and the
        # idle endpoints beside them
        metrics["machine cpu s/GB"] = probe.busy_cpu_s / gigabytes
        metrics["machine busy %"] = 100 * probe.busy_cpu_s / (probe.seconds * CORES) if probe.seconds else 0.0
    return metrics


def _produce(name: str, acks: str, idempotent: bool, partitions: int = 1, codec: str = "none",
             topic_configs: dict[str, str] | None = None, distinct: int = 1) -> Callable[[Context], dict[str, float]]:
    """1 KB records, keyless, each to a random partition. librdkafka's default for keyless
    records is sticky: a new random partition every sticky.partitioning.linger.ms (10 ms),
    which a fast run of 100 MB at 16 partitions leaves skewed and even empty (measured: end
    offsets 0 to 20,355 where 6,250 is even); 0 turns stickiness off."""
    def run(ctx: Context) -> dict[str, float]:
        topic = ctx.topic(name)
        create_topic(ctx.endpoint.admin, topic, partitions, topic_configs)
        records = ctx.scale.produce_bytes // 1000
        spec = {"role": "produce", "bootstrap": ctx.endpoint.bootstrap, "topic": topic,
                "records": records, "record_bytes": 1000, "distinct": distinct,
                "config": _producer(acks, idempotent, codec) | ctx.endpoint.client}
        with _probe(ctx) as probe:
            result = run_load(spec)
        if result["failed"]:
            raise RuntimeError(f"{result['failed']} of {records} records were not delivered")
        ctx.produced[name] = records
        return _throughput(result, probe)
    return run


def _producer(acks: str, idempotent: bool = False, codec: str = "none") -> dict[str, Any]:
    return {"acks": acks, "enable.idempotence": idempotent, "linger.ms": 5, "batch.size": 1_000_000,
            "compression.type": codec, "sticky.partitioning.linger.ms": 0}


TXN_PERIOD_MS = 100  # produce-1k-txn: a transaction's span of producing before its commit


def transactional(ctx: Context) -> dict[str, float]:
    """1 KB records through a transactional producer (acks=all, idempotent, linger.ms 5,
    batch.size 1 MB as produce-1k-acksall) that commits every TXN_PERIOD_MS: the cost of
    AddPartitionsToTxn, EndTxn and a COMMIT marker per transaction on top of produce. Then,
    unmeasured, the read_committed end offset must reach every record plus one marker per
    transaction, so a broker that acknowledged commits without writing markers fails."""
    name = "produce-1k-txn"
    topic = ctx.topic(name)
    create_topic(ctx.endpoint.bootstrap, topic, 1)
    records = ctx.scale.produce_bytes // 1000
    config = _producer("all", True) | {"transactional.id": f"{topic}-{ctx.endpoint.name}"}
    spec = {"role": "txn-produce", "bootstrap": ctx.endpoint.bootstrap, "topic": topic, "records": records,
            "record_bytes": 1000, "period_ms": TXN_PERIOD_MS, "config": config}
    with _probe(ctx) as probe:
        result = run_load(spec)
    _wait_readable(ctx.endpoint.bootstrap, topic, records + result["transactions"])
    return transaction_metrics(result) | _broker(probe, result["bytes"])


def transaction_metrics(result: dict[str, Any]) -> dict[str, float]:
    """Throughput and commit_transaction latency from a txn-produce load's result."""
    commits = sorted(result["commit_us"])
    return {"MB/s": result["bytes"] / MB / result["seconds"], "records/s": result["records"] / result["seconds"],
            "commit p50 ms": percentile(commits, 50) / 1000, "commit p99 ms": percentile(commits, 99) / 1000}


COMPACTED_SEGMENT_BYTES = 16 << 20
LIVE_SHARE = 10  # one record in ten is a key's latest


def compaction(ctx: Context) -> dict[str, float]:
    """A compaction pass over produce_bytes of 1 KB records with one key per ten records:
    the topic is written with cleanup.policy=delete, then altered to compact (dirty ratio
    0.01, no lag); timed from the alter until the log holds no more than the live tenth, the
    active segment and 2% of its bytes, as DescribeLogDirs reports them (a pass that swaps
    segments one by one is then done). Meanwhile a
    producer writes a tenth as much to another topic; its MB/s is what produce gets while
    the broker compacts. Both brokers look for logs to clean every 15 s."""
    bootstrap = ctx.endpoint.bootstrap
    topic, other = ctx.topic("compaction-1k"), ctx.topic("compaction-1k-beside")
    create_topic(bootstrap, topic, 1, {"segment.bytes": str(COMPACTED_SEGMENT_BYTES)})
    create_topic(bootstrap, other, 1)
    records = ctx.scale.produce_bytes // 1000
    written = run_load({"role": "produce", "bootstrap": bootstrap, "topic": topic, "records": records,
                        "record_bytes": 1000, "keys": records // LIVE_SHARE, "config": _producer("1")})
    if written["failed"]:
        raise RuntimeError(f"{written['failed']} of {records} records were not delivered")
    before = _wait_log_bytes(bootstrap, topic, lambda size: size >= written["bytes"])
    beside = _start_load({"role": "produce", "bootstrap": bootstrap, "topic": other, "records": records // 10,
                          "record_bytes": 1000, "config": _producer("1")})
    with _probe(ctx) as probe:
        start = time.monotonic()
        _compact(bootstrap, topic)
        # done: the live tenth, the active segment (never cleaned) and 2% for batch overheads are left
        left = before // LIVE_SHARE + COMPACTED_SEGMENT_BYTES + before // 50
        after = _wait_log_bytes(bootstrap, topic, lambda size: size <= left)
        seconds = time.monotonic() - start
    out, _ = beside.communicate(timeout=LOAD_TIMEOUT_S)
    produced = _result({"role": "produce"}, out.decode().strip().splitlines()[-1:], beside.returncode)
    return {"compaction s": seconds, "kept %": 100 * after / before,
            "MB/s": produced["bytes"] / MB / produced["seconds"]} | _broker(probe)


def _compact(bootstrap: str, topic: str) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
               for name, value in (("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.01"),
                                   ("min.compaction.lag.ms", "0"))]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=entries)])
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)


def _wait_log_bytes(bootstrap: str, topic: str, done: Callable[[int], bool]) -> int:
    """The partition's size on disk (DescribeLogDirs, through kafka-python: librdkafka has no
    such call) once `done` holds for it; polled, bounded by LOAD_TIMEOUT_S."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    try:
        while True:
            size = sum(p["partition_size"] for broker in admin.describe_log_dirs(topic_partitions=[topic])
                       for log_dir in broker["log_dirs"] for t in log_dir["topics"] if t["name"] == topic
                       for p in t["partitions"])
            if done(size):
                return size
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: log size {size} after {LOAD_TIMEOUT_S:.0f} s")
            time.sleep(0.5)  # polls an observable (the log's size), bounded by the deadline
    finally:
        admin.close()


# librdkafka stops fetching while its queue for the application holds queued.max.messages.kbytes
# (64 MiB) and looks again only fetch.queue.backoff.ms (1,000) later, though the application
# drains that queue in about a tenth of that. A broker fast enough to fill the queue then sits
# idle a second at a time: measured on Martlet reading 1 GB from local disk, six stalls of
# 0.93-0.97 s made it 129-175 MB/s where it serves 540-570 MB/s with 10 ms.
CONSUMER = {"fetch.queue.backoff.ms": 10}


def consume(ctx: Context) -> dict[str, float]:
    """Reads back what produce-acks1 wrote in this round, from the start."""
    source = NEEDS["consume-1k"]
    if source not in ctx.produced:
        raise RuntimeError(f"consume needs {source} to run first in the round")
    _wait_readable(ctx.endpoint.admin, ctx.topic(source), ctx.produced[source])
    spec = {"role": "consume", "bootstrap": ctx.endpoint.bootstrap, "topic": ctx.topic(source),
            "records": ctx.produced[source], "config": CONSUMER | ctx.endpoint.client}
    with _probe(ctx) as probe:
        result = run_load(spec)
    return _throughput(result, probe)


def _wait_readable(bootstrap: str, topic: str, records: int) -> None:
    """Until the topic's high watermarks add up to `records`. An acks=1 producer is done
    before a Martlet on HDFS has persisted its last records, and readers see persisted
    records only; consume measures reading stored data, not waiting for those writes
    (measured: 149-169 MB/s read back at once, 290-400 after the writes ended)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "martlet-bench-watermarks"})
    try:
        partitions = consumer.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics[topic].partitions
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while True:
            readable = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S)[1]
                           for p in partitions)
            if readable >= records:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {readable} of {records} records readable after {ADMIN_TIMEOUT_S:.0f} s")
            time.sleep(0.1)  # polls an observable (the high watermarks), bounded by the deadline
    finally:
        consumer.close()


def small_records(ctx: Context) -> dict[str, float]:
    topic = ctx.topic("produce-100b-linger0")
    create_topic(ctx.endpoint.bootstrap, topic, 1)
    records = ctx.scale.small_records
    spec = {"role": "produce", "bootstrap": ctx.endpoint.bootstrap, "topic": topic,
            "records": records, "record_bytes": 100,
            "config": {"acks": "1", "linger.ms": 0, "compression.type": "none"}}
    with _probe(ctx) as probe:
        result = run_load(spec)
    if result["failed"]:
        raise RuntimeError(f"{result['failed']} of {records} records were not delivered")
    return _throughput(result, probe)


def one_in_flight(ctx: Context) -> dict[str, float]:
    """Synchronous sends (issue 47): one 100-byte record a request, acks=1, the next sent when
    the last was acknowledged. Requests/s (records/s: one each) and acknowledgement latency,
    bound by the round trip through client and broker, not by throughput."""
    topic = ctx.topic("produce-100b-sync")
    create_topic(ctx.endpoint.bootstrap, topic, 1)
    records = ctx.scale.sync_records
    spec = {"role": "sync-produce", "bootstrap": ctx.endpoint.bootstrap, "topic": topic, "records": records,
            "record_bytes": 100, "config": {"acks": "1", "linger.ms": 0, "compression.type": "none"}}
    with _probe(ctx) as probe:
        result = run_load(spec)
    if result["failed"]:
        raise RuntimeError(f"{result['failed']} of {records} records were not delivered")
    samples = sorted(result["acked_us"])
    return {"records/s": records / result["seconds"], "p50 ms": percentile(samples, 50) / 1000,
            "p99 ms": percentile(samples, 99) / 1000} | _broker(probe)


def latency(ctx: Context) -> dict[str, float]:
    """End-to-end latency at a fixed rate: acks=all, linger.ms=0, 1 KB records."""
    topic = ctx.topic("latency-1k")
    create_topic(ctx.endpoint.bootstrap, topic, 1)
    rate, seconds = ctx.scale.latency_rate, ctx.scale.latency_seconds
    base = {"bootstrap": ctx.endpoint.bootstrap, "topic": topic, "record_bytes": 1000}
    consumer = _start_load(base | {"role": "latency-consume", "records": rate * seconds,
                                   "warmup": rate, "config": {"fetch.wait.max.ms": 500}})
    try:
        _wait_ready(consumer)
        with _probe(ctx) as probe:
            sent = run_load(base | {"role": "latency-produce", "rate": rate, "seconds": seconds,
                                    "config": {"acks": "all", "linger.ms": 0}})
            out, _ = consumer.communicate(timeout=LOAD_TIMEOUT_S)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    if sent["failed"]:
        raise RuntimeError(f"{sent['failed']} latency records were not delivered")
    got = _result({"role": "latency-consume"}, out.decode().strip().splitlines()[-1:], consumer.returncode)
    samples = sorted(got["latencies_us"])
    return {"p50 ms": percentile(samples, 50) / 1000, "p99 ms": percentile(samples, 99) / 1000,
            "p99.9 ms": percentile(samples, 99.9) / 1000} | _broker(probe)


def _wait_ready(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], ADMIN_TIMEOUT_S)
    line = proc.stdout.readline() if ready else b""
    if b"ready" not in line:
        raise RuntimeError(f"latency consumer did not start: {line!r}")


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile of sorted samples."""
    if not samples:
        raise RuntimeError("no latency samples")
    rank = max(1, -(-len(samples) * pct // 100))  # ceil
    return samples[int(rank) - 1]


def many_partitions(ctx: Context) -> dict[str, float]:
    """Creates topics x partitions, times Metadata for all topics, reads the broker's RSS,
    then deletes them again so later workloads do not carry them."""
    prefix = ctx.topic("partitions")
    spec = {"role": "partitions", "bootstrap": ctx.endpoint.bootstrap, "prefix": prefix,
            "topics": ctx.scale.partition_topics, "partitions": ctx.scale.partitions_per_topic,
            "rounds": 5}
    try:
        result = run_load(spec)
        metrics = {"create s": result["create_seconds"],
                   "metadata ms": sorted(result["metadata_seconds"])[2] * 1000}
        if ctx.endpoint.pid is not None:
            metrics["RSS MiB"] = rss_bytes(ctx.endpoint.pid) / (1 << 20)
    finally:
        delete_topics(ctx.endpoint.bootstrap, prefix)
    return metrics


def spread_traffic(ctx: Context) -> dict[str, float]:
    """Every partition of a 5,000-partition topic active at once: a 1 KB record every five
    seconds to each (`spread_rate`; acks=all, linger.ms=5) for a minute; acknowledgement
    latency, the broker's CPU and peak RSS. Any refused record fails the workload."""
    topic = ctx.topic("spread")
    partitions = ctx.scale.spread_partitions
    started = time.perf_counter()
    create_topic(ctx.endpoint.bootstrap, topic, partitions, timeout_s=SPREAD_CREATE_TIMEOUT_S)
    created_s = time.perf_counter() - started
    try:
        with _probe(ctx) as probe:
            result = run_load({"role": "spread-produce", "bootstrap": ctx.endpoint.bootstrap, "topic": topic,
                               "partitions": partitions, "rate": round(partitions * ctx.scale.spread_rate),
                               "seconds": ctx.scale.spread_seconds, "record_bytes": 1000,
                               "config": {"acks": "all", "linger.ms": 5}})
    finally:
        delete_topics(ctx.endpoint.bootstrap, topic, timeout_s=SPREAD_CREATE_TIMEOUT_S)
    if result["failed"]:
        raise RuntimeError(f"{result['failed']} of {result['records']} records refused: {result['errors']}")
    samples = sorted(result["acked_us"])
    return {"p50 ms": percentile(samples, 50) / 1000, "p99 ms": percentile(samples, 99) / 1000,
            "records/s": result["records"] / result["seconds"], "create s": created_s} | _broker(probe)


WORKLOADS: dict[str, Callable[[Context], dict[str, float]]] = {
    "produce-1k-acks1": _produce("produce-1k-acks1", "1", False),
    "produce-1k-acksall": _produce("produce-1k-acksall", "all", True),
    "produce-1k-acksall-16p": _produce("produce-1k-acksall-16p", "all", True, partitions=16),
    "produce-1k-txn": transactional,
    "consume-1k": consume,
    "produce-100b-linger0": small_records,
    "produce-100b-sync": one_in_flight,
    "latency-1k": latency,
    "partitions-10k": many_partitions,
    "partitions-5k-traffic": spread_traffic,
    # the producer sends lz4, the topic stores zstd: the broker recompresses every batch (of
    # incompressible records, so the codecs do their full work)
    "produce-1k-recompress": _produce("produce-1k-recompress", "1", False, codec="lz4",
                                      topic_configs={"compression.type": "zstd"}, distinct=4096),
    "compaction-1k": compaction,
}


def warm_up(ctx: Context) -> None:
    """Produce and consume some data unmeasured: the JVM compiles Kafka's hot paths during
    its first gigabyte, and every client connection path gets exercised once."""
    scale = dataclasses.replace(ctx.scale, produce_bytes=ctx.scale.warm_up_bytes)
    warm = Context(ctx.endpoint, scale, 0)
    WORKLOADS["produce-1k-acks1"](warm)
    WORKLOADS["consume-1k"](warm)


LATE = {"partitions-10k", "partitions-5k-traffic"}  # run after every round of the others (see runner.run)
NEEDS = {"consume-1k": "produce-1k-acks1"}  # reads what that one wrote earlier in the same round


def cleanup(ctx: Context) -> None:
    """Drops every topic the bench made."""
    delete_topics(ctx.endpoint.admin, "bench-")
