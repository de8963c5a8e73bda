"""`martlet bench --cluster` (issue 11, point 6): Martlet clusters over HDFS beside one Kafka broker.

One reference ZooKeeper and one reference HDFS serve the whole run; every Martlet cluster is a
fresh `LocalCluster` (one elected admin, N brokers) under its own chroot and store path.

- cluster-produce-1k-acksall: aggregate 1 KB acks=all idempotent produce into an 8-partition
  topic from `producers` load processes side by side (load.py, the settings of
  produce-1k-acksall), against Kafka (one broker, local disk, as the other workloads) and
  Martlet clusters of 1 and 2 brokers. All three stay up for the run; each round runs
  martlet-1, martlet-2, kafka in turn on a fresh topic, settling between turns (runner.settle).
  Aggregate MB/s is every producer's bytes over the span from the first producer's first
  produce call to the last one's final acknowledgement. Reported: medians, the ratio of each
  Martlet size to Kafka, and the scaling of 2 brokers over 1.
- cluster-failover: a 3-broker cluster with default settings and a steady idempotent acks=all
  load (failover.py). Each kill -9 hits the broker leading the most partitions; for every
  partition it led, the time from the kill to the first acknowledged produce (of a record
  produced after the kill) is one sample.
  The broker is restarted and the next kill waits until every partition is acknowledged again.
  At the end every acknowledged record must be read back exactly once, in produce order, or
  the workload fails. Reported: p50 and max over all samples, beside the targets of issue 11
  (3 s, 10 s) and Kafka's broker.session.timeout.ms (9 s), after which KRaft declares a broker
  dead. Kafka is not measured here: a one-broker Kafka has nothing to fail over to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..reference.cluster import LocalCluster
from ..reference.hdfs import ReferenceHdfs
from ..reference.zookeeper import ReferenceZooKeeper
from .failover import SteadyLoad, all_led, check_stored, node_ids, read_all, wait_for
from .probe import cpu_seconds
from .runner import QUIET_CORES, QUIET_WINDOWS, SETTLE_TIMEOUT_S, SETTLE_WINDOW_S, Rows, kafka_broker, medians, to_json
from .workloads import MB, Endpoint, create_topic, delete_topics, run_loads

PRODUCE = "cluster-produce-1k-acksall"
FAILOVER = "cluster-failover"
CLUSTER_WORKLOADS = (PRODUCE, FAILOVER)
PRODUCE_SIZES = (1, 2)  # Martlet brokers per produce cluster
TARGET_P50_S = 3.0  # issue 11, point 6
TARGET_MAX_S = 10.0
KAFKA_SESSION_TIMEOUT_S = 9.0  # broker.session.timeout.ms, Kafka's default
LEADERS_TIMEOUT_S = 60.0
MOVE_TIMEOUT_S = 60.0  # a killed broker's partitions acknowledged again elsewhere
RECORD_BYTES = 1000
PRODUCER_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                   "batch.size": 1_000_000, "compression.type": "none"}


@dataclass(frozen=True, slots=True)
class ClusterScale:
    produce_bytes: int = 1000 * MB  # per endpoint and round, over all producers
    warm_up_bytes: int = 300 * MB  # produced once per endpoint, unmeasured, before round 1
    partitions: int = 8
    producers: int = 2  # load processes side by side
    kills: int = 10
    failover_brokers: int = 3
    failover_rate: int = 1000  # records per second, spread over the partitions


QUICK_CLUSTER = ClusterScale(produce_bytes=100 * MB, warm_up_bytes=50 * MB, kills=3)


@dataclass(slots=True)
class ClusterPlan:
    rounds: int
    workloads: list[str]
    scale: ClusterScale
    progress: Callable[[str], None] = field(default=lambda line: None)


@dataclass(frozen=True, slots=True)
class Target:
    """One system under load: the endpoint clients use and the processes that serve it."""

    endpoint: Endpoint
    pids: tuple[int, ...]


def run_cluster(plan: ClusterPlan) -> Rows:
    rows: Rows = []
    plan.progress("starting ZooKeeper and HDFS")
    with ReferenceZooKeeper() as zookeeper, ReferenceHdfs() as hdfs:
        if PRODUCE in plan.workloads:
            rows += _produce_rounds(plan, zookeeper.address, hdfs.url)
        if FAILOVER in plan.workloads:
            rows.append(_measured(1, f"martlet-{plan.scale.failover_brokers}", FAILOVER,
                                  lambda: _failover(plan, zookeeper.address, hdfs.url)))
    return rows


@contextlib.contextmanager
def martlet_cluster(brokers: int, zookeeper: str, hdfs_url: str, workdir: Path | None = None) -> Iterator[LocalCluster]:
    """A fresh cluster of one admin and `brokers` brokers, killed at the end (its data is
    thrown away, so a graceful hand-over would only cost time). Its logs and data dirs go to
    a temp folder removed at the end, or to `workdir`, which is left in place."""
    cluster = LocalCluster(brokers=brokers, admins=1, zookeeper=zookeeper, hdfs_url=hdfs_url, workdir=workdir).start()
    try:
        yield cluster
    finally:
        _report_ended(cluster)
        cluster.stop(graceful=False)


def _report_ended(cluster: LocalCluster) -> None:
    """Print the log tail of every process that ended on its own (not by the failover's kill
    -9) before the bench stopped it: the logs go away with the cluster's temp folder. A kill
    -9 the bench did not send (the OOM killer, say) is reported too."""
    for process in [*cluster.admins, *cluster.brokers]:
        if process.ended_on_its_own:
            cause = " (SIGKILL, not sent by the bench)" if process.returncode == -signal.SIGKILL else ""
            print(f"{process.name} ended with {process.returncode}{cause} during the bench; its log ends:\n"
                  f"{process.log_tail(60)}", file=sys.stderr)


def _cluster_target(cluster: LocalCluster) -> Target:
    pids = tuple(p.pid for p in [*cluster.admins, *cluster.brokers] if p.pid is not None)
    return Target(Endpoint(f"martlet-{len(cluster.brokers)}", cluster.bootstrap, None), pids)


# ----------------------------------------------------------------------------------------
# aggregate produce


def _produce_rounds(plan: ClusterPlan, zookeeper: str, hdfs_url: str) -> Rows:
    with contextlib.ExitStack() as stack:
        plan.progress("starting Martlet clusters of " + " and ".join(map(str, PRODUCE_SIZES)) + " brokers, and Kafka")
        targets = [_cluster_target(stack.enter_context(martlet_cluster(n, zookeeper, hdfs_url)))
                   for n in PRODUCE_SIZES]
        kafka = stack.enter_context(kafka_broker())
        targets.append(Target(kafka, (kafka.pid,) if kafka.pid is not None else ()))
        return _alternate(plan, targets)


def _alternate(plan: ClusterPlan, targets: list[Target]) -> Rows:
    rows: Rows = []
    for target in targets:
        plan.progress(f"warming up {target.endpoint.name}")
        _produce(target.endpoint, plan.scale, f"bench-{PRODUCE}-warm", plan.scale.warm_up_bytes)
    _settle(targets)
    for round_no in range(1, plan.rounds + 1):
        for target in targets:
            endpoint = target.endpoint
            plan.progress(f"round {round_no}/{plan.rounds}  {endpoint.name:<10} {PRODUCE}")
            measure = functools.partial(_produce_row, endpoint, plan.scale, f"bench-{PRODUCE}-r{round_no}")
            rows.append(_measured(round_no, endpoint.name, PRODUCE, measure))
            plan.progress(f"round {round_no}/{plan.rounds}  {endpoint.name:<10} settling")
            _settle(targets)
    for target in targets:
        try:
            delete_topics(target.endpoint.bootstrap, "bench-")
        except Exception as error:  # clean-up only, the rounds are measured: say so and go on
            print(f"warning: deleting the bench topics on {target.endpoint.name} failed: {error}", file=sys.stderr)
    return rows


def _settle(targets: list[Target]) -> None:
    """runner.settle's rule (write back the page cache; every process idle for QUIET_WINDOWS
    windows in a row, bounded), but all processes are watched in the same windows: one
    cluster is several processes, and taking them one by one would cost seconds each."""
    os.sync()
    pids = [pid for target in targets for pid in target.pids]
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    quiet = 0
    while quiet < QUIET_WINDOWS and time.monotonic() < deadline:
        before = [_cpu_seconds(pid) for pid in pids]
        time.sleep(SETTLE_WINDOW_S)  # measuring a rate over a window, not waiting for an event
        used = [_cpu_seconds(pid) - was for pid, was in zip(pids, before, strict=True)]
        quiet = 0 if max(used, default=0.0) >= QUIET_CORES * SETTLE_WINDOW_S else quiet + 1


def _cpu_seconds(pid: int) -> float:
    """A process that has died is idle (its workload's row reports the failure)."""
    try:
        return cpu_seconds(pid)
    except FileNotFoundError:
        return 0.0


def _produce_row(endpoint: Endpoint, scale: ClusterScale, topic: str) -> dict[str, Any]:
    return {"metrics": _produce(endpoint, scale, topic, scale.produce_bytes)}


def _produce(endpoint: Endpoint, scale: ClusterScale, topic: str, total_bytes: int) -> dict[str, float]:
    create_topic(endpoint.bootstrap, topic, scale.partitions)
    wait_for(lambda: all_led(endpoint.bootstrap, topic), LEADERS_TIMEOUT_S, f"every partition of {topic} led")
    records = max(scale.producers, total_bytes // RECORD_BYTES)
    shares = [records // scale.producers + (i < records % scale.producers) for i in range(scale.producers)]
    results = run_loads([{"role": "produce", "bootstrap": endpoint.bootstrap, "topic": topic, "records": share,
                          "record_bytes": RECORD_BYTES, "config": PRODUCER_CONFIG} for share in shares])
    failed = sum(result["failed"] for result in results)
    if failed:
        raise RuntimeError(f"{failed} of {records} records were not delivered")
    span_s = max(result["ended"] for result in results) - min(result["started"] for result in results)
    sent = sum(result["bytes"] for result in results)
    return {"MB/s": sent / MB / span_s, "records/s": records / span_s}


def _measured(round_no: int, endpoint: str, workload: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One raw row: what `measure` returns ("metrics", and any raw samples beside them); a
    failure is reported in its row and the run goes on (exit 1 at the end)."""
    started = time.monotonic()
    row: dict[str, Any] = {"round": round_no, "endpoint": endpoint, "workload": workload, "metrics": {}}
    try:
        row.update(measure())
    except Exception as error:
        row["error"] = f"{type(error).__name__}: {error}"
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


# ----------------------------------------------------------------------------------------
# failover


def _failover(plan: ClusterPlan, zookeeper: str, hdfs_url: str) -> dict[str, Any]:
    scale = plan.scale
    plan.progress(f"failover: starting a cluster of {scale.failover_brokers} brokers")
    workdir = Path(tempfile.mkdtemp(prefix="martlet-bench-failover-"))
    try:
        return _failover_in(plan, zookeeper, hdfs_url, workdir)
    except Exception as error:
        raise RuntimeError(f"{error} (the cluster's logs are kept in {workdir}/logs)") from error


def _failover_in(plan: ClusterPlan, zookeeper: str, hdfs_url: str, workdir: Path) -> dict[str, Any]:
    scale = plan.scale
    with martlet_cluster(scale.failover_brokers, zookeeper, hdfs_url, workdir) as cluster:
        topic = f"bench-{FAILOVER}-{uuid.uuid4().hex[:8]}"
        create_topic(cluster.bootstrap, topic, scale.partitions)
        wait_for(lambda: all_led(cluster.bootstrap, topic), LEADERS_TIMEOUT_S, "every partition led")
        load = SteadyLoad(cluster.bootstrap, topic, scale.partitions, scale.failover_rate).start()
        per_kill: list[list[float]] = []
        try:
            load.wait_acks_after(load.mark(), list(range(scale.partitions)), LEADERS_TIMEOUT_S)
            for kill in range(scale.kills):
                plan.progress(f"failover: kill {kill + 1}/{scale.kills}")
                per_kill.append(_kill_once(cluster, topic, load))
        finally:
            load.stop()
        plan.progress("failover: reading every record back")
        problems = load.errors[:5] + check_stored(load, read_all(cluster.bootstrap, topic, scale.partitions))
    samples = [sample for kill in per_kill for sample in kill]
    if not samples:
        raise RuntimeError("no kill moved a partition")
    found = {"metrics": {"p50 s": statistics.median(samples), "max s": max(samples),
                        "moved partitions": float(len(samples)), "kills": float(scale.kills),
                        "acknowledged": float(load.acked_count())},
            "failover_s": [round(sample, 3) for sample in samples],
            "failover_s_per_kill": [[round(sample, 3) for sample in kill] for kill in per_kill]}
    if not problems:
        shutil.rmtree(workdir, ignore_errors=True)
        return found
    # The times are still worth reporting; the row's error fails the run.
    return found | {"error": f"FAILOVER LOST OR DUPLICATED ACKNOWLEDGED RECORDS (topic {topic}; the "
                             f"cluster's logs are kept in {workdir}/logs): " + "; ".join(problems)}


def _kill_once(cluster: LocalCluster, topic: str, load: SteadyLoad) -> list[float]:
    """kill -9 the broker leading the most partitions; seconds to each one's next acknowledgement."""
    bootstrap = cluster.bootstrap
    current = wait_for(lambda: all_led(bootstrap, topic), LEADERS_TIMEOUT_S, "every partition led")
    node_by_port = node_ids(bootstrap)
    led = Counter(current.values())
    index = max(range(len(cluster.brokers)), key=lambda i: led[node_by_port.get(_port(cluster, i), -1)])
    victim = node_by_port[_port(cluster, index)]
    moved = [partition for partition, leader in current.items() if leader == victim]
    killed = load.mark()
    cluster.kill(index)
    took = load.wait_acks_after(killed, moved, MOVE_TIMEOUT_S)
    wait_for(lambda: all_led(bootstrap, topic, excluded=victim), LEADERS_TIMEOUT_S, "the partitions to move")
    cluster.start_broker(index)
    back = load.mark()
    port = _port(cluster, index)
    wait_for(lambda: port in node_ids(bootstrap), LEADERS_TIMEOUT_S, f"broker {index} to register again")
    load.wait_acks_after(back, sorted(current), MOVE_TIMEOUT_S)  # every partition served again
    return list(took.values())


def _port(cluster: LocalCluster, index: int) -> int:
    port = cluster.brokers[index].port
    assert port is not None, "a LocalCluster broker keeps its port for life"
    return port


# ----------------------------------------------------------------------------------------
# report


def cluster_report(rows: Rows, scale: ClusterScale) -> str:
    sections = [lines for lines in (_produce_table(rows, scale), _failover_lines(rows, scale)) if lines]
    lines = [line for section in sections for line in [*section, ""]]
    lines += ["raw rows", f"{'round':<6}{'endpoint':<11}{'workload':<28}metrics"]
    for row in rows:
        shown = row.get("error") or ", ".join(f"{k} {v:.2f}" for k, v in row["metrics"].items())
        lines.append(f"{row['round']:<6}{row['endpoint']:<11}{row['workload']:<28}{shown}")
    return "\n".join(lines)


def summary(rows: Rows) -> dict[str, float]:
    """Ratios to Kafka of each Martlet size, and the scaling of 2 brokers over 1 (MB/s medians)."""
    mbps = medians(rows).get((PRODUCE, "MB/s"), {})
    found = {f"{name} / kafka": value / mbps["kafka"] for name, value in mbps.items()
             if name != "kafka" and mbps.get("kafka")}
    if mbps.get("martlet-1") and "martlet-2" in mbps:
        found["martlet-2 / martlet-1"] = mbps["martlet-2"] / mbps["martlet-1"]
    return found


def _produce_table(rows: Rows, scale: ClusterScale) -> list[str]:
    table = medians(rows)
    mbps, rps = table.get((PRODUCE, "MB/s"), {}), table.get((PRODUCE, "records/s"), {})
    if not mbps:
        return []
    done = max((row["round"] for row in rows if row["workload"] == PRODUCE), default=0)
    lines = [f"{PRODUCE}: {scale.partitions} partitions, 1 KB records, acks=all, idempotent, "
             f"{scale.producers} producer processes; medians over {done} round(s)",
             f"{'endpoint':<34}{'MB/s':>10}{'records/s':>12}{'/ kafka':>10}"]
    ratios = summary(rows)
    for name, what in (("kafka", "1 broker, local disk"), ("martlet-1", "1 broker + admin, HDFS"),
                       ("martlet-2", "2 brokers + admin, HDFS")):
        if name in mbps:
            ratio = ratios.get(f"{name} / kafka")
            lines.append(f"{f'{name} ({what})':<34}{mbps[name]:>10.2f}{rps[name]:>12.0f}"
                         + (f"{ratio:>10.2f}" if ratio is not None else ""))
    if "martlet-2 / martlet-1" in ratios:
        lines.append(f"scaling, martlet 2 brokers / 1 broker: {ratios['martlet-2 / martlet-1']:.2f}")
    return lines


def _failover_lines(rows: Rows, scale: ClusterScale) -> list[str]:
    row = next((row for row in rows if row["workload"] == FAILOVER), None)
    if row is None:
        return []
    head = (f"{FAILOVER}: {scale.failover_brokers} brokers + admin on HDFS, default settings, "
            f"{scale.partitions} partitions, {scale.failover_rate} records/s idempotent acks=all, "
            f"{scale.kills} kill -9s")
    metrics = row["metrics"]
    if "error" in row:
        return [head, f"FAILED: {row['error']}", *_failover_times(metrics)]
    verdict = "met" if metrics["p50 s"] <= TARGET_P50_S and metrics["max s"] <= TARGET_MAX_S else "MISSED"
    return [head, *_failover_times(metrics),
            f"targets p50 <= {TARGET_P50_S:.0f} s, max <= {TARGET_MAX_S:.0f} s: {verdict}; Kafka's KRaft "
            f"controller declares a broker dead after broker.session.timeout.ms = {KAFKA_SESSION_TIMEOUT_S:.0f} s",
            f"every one of {metrics['acknowledged']:.0f} acknowledged records read back exactly once, in order"]


def _failover_times(metrics: dict[str, float]) -> list[str]:
    if "p50 s" not in metrics:
        return []
    return [f"kill -9 to first acknowledged produce, over {metrics['moved partitions']:.0f} moved partitions: "
            f"p50 {metrics['p50 s']:.2f} s, max {metrics['max s']:.2f} s"]


def cluster_json(rows: Rows, scale: ClusterScale) -> str:
    data = json.loads(to_json(rows))
    data["ratios"] = summary(rows)
    data["failover_targets_s"] = {"p50": TARGET_P50_S, "max": TARGET_MAX_S,
                                  "kafka broker.session.timeout.ms": KAFKA_SESSION_TIMEOUT_S}
    data["scale"] = dataclasses.asdict(scale)
    return json.dumps(data, indent=2)
