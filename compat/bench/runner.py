"""Rounds, medians and the report of `martlet bench`.

The brokers (Martlet and Kafka; with --hdfs also a Martlet on HDFS) are started once, fresh,
and stay up for the whole run; each round runs every workload against each endpoint in turn
(A, B, A, B ... or A, B, C, A, B, C ...), so a slow minute on the machine lands on all. With
--secured each broker is two endpoints, its plaintext and its SASL_SSL listener.
Topics are new per round and named by endpoint; the 10,000-partition workload runs its rounds
after all the others and deletes its topics at once; the rest are deleted at the end. Between
turns every broker must be idle (settle()).
The report gives each metric's median over the rounds and, for every other endpoint, its
ratio to Kafka ("martlet/kafka", "martlet-hdfs/kafka"; a caller may name other pairs, as
`--secured` does), and the raw per-round rows beneath; `--json` writes all of it. The
regression check (`ratios()`) compares Martlet on local disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..reference.kafka import ReferenceKafka
from .probe import cpu_seconds
from .workloads import LATE, METRICS, WORKLOADS, Context, Endpoint, Scale, cleanup, warm_up

START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 180.0
SETTLE_WINDOW_S = 1.0
QUIET_CORES = 0.05  # a broker using less CPU than this is idle
QUIET_WINDOWS = 2  # ... for this many windows in a row
# Kafka deletes a deleted topic's files file.delete.delay.ms later (60 s by default): work
# that would land in Martlet's turn. The bench has it done at once, so settle() sees it.
KAFKA_OVERRIDES = {"file.delete.delay.ms": 0}
MARTLET_CMD = [sys.executable, "-m", "martlet.cli"]
KAFKA_HEAP = "1g"  # kafka-server-start.sh's default
REFERENCE = "kafka"  # the endpoint every ratio divides by
Rows = list[dict[str, Any]]  # one per (round, endpoint, workload): name, metrics
Pair = tuple[str, str]  # (endpoint, the endpoint its medians are divided by)


@dataclass(slots=True)
class Plan:
    rounds: int
    workloads: list[str]
    scale: Scale
    progress: Callable[[str], None] = field(default=lambda line: None)


@dataclass(frozen=True, slots=True)
class Served:
    """A `martlet serve` started here: its pid, the address its first line names, and with
    several listeners in its config {name: "host:port"} as bound."""

    pid: int
    address: str
    listeners: dict[str, str]


@contextlib.contextmanager
def martlet_broker(store: str | None = None, config: str = "", name: str = "martlet") -> Iterator[Endpoint]:
    """A fresh `martlet serve` on a free loopback port and a temporary data dir (its store
    given by URL, else that dir on local disk)."""
    with martlet_serve(config, name, store) as served:
        yield Endpoint(name, served.address, served.pid)


@contextlib.contextmanager
def martlet_serve(config: str, name: str, store: str | None = None, listeners: int = 0) -> Iterator[Served]:
    """A fresh `martlet serve` in a temporary data dir. With `listeners` 0 it listens on a free
    loopback port; else the config names that many listeners (on port 0) and their bound
    addresses are read from the lines the broker prints after its first."""
    with tempfile.TemporaryDirectory(prefix="martlet-bench-") as folder:
        config_file = Path(folder) / "martlet.toml"
        config_file.write_text(config)
        log = Path(folder) / "martlet.log"
        args = [*MARTLET_CMD, "serve", *([] if listeners else ["--listen", "127.0.0.1:0"]), "--http", "off",
                "--log-format", "json", "--data-dir", f"{folder}/data", "--config", str(config_file),
                *(["--store", store] if store else [])]
        with log.open("wb") as log_file, subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log_file) as proc:
            try:
                assert proc.stdout is not None
                lines = [proc.stdout.readline().decode().strip() for _ in range(1 + listeners)]
                if not lines[0].startswith("martlet listening on "):
                    raise RuntimeError(f"martlet did not start: {lines[0]!r}; its log ends:\n{_tail(log)}")
                yield Served(proc.pid, lines[0].rsplit(" ", 1)[-1], bound_listeners(lines[1:]))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=START_TIMEOUT_S)
                said = logged_trouble(log)
                if said:
                    print(f"martlet bench: {name} logged {said}", file=sys.stderr)


def bound_listeners(lines: Sequence[str]) -> dict[str, str]:
    """{name: "host:port"} from the "martlet listener NAME on HOST:PORT" lines of `martlet serve`."""
    words = [line.split(" ") for line in lines]
    if any(len(w) != 5 or w[:2] != ["martlet", "listener"] for w in words):
        raise RuntimeError(f"martlet did not name its listeners: {list(lines)!r}")
    return {w[2]: w[4] for w in words}


def logged_trouble(log: Path, shown: int = 3) -> str:
    """What a broker's JSON log holds at warning level or above: counts by level and the first
    few distinct messages ("" when nothing), so a run whose broker struggled says so."""
    counts: dict[str, int] = {}
    first: list[str] = []
    for raw in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # not a log line (a native library's own output)
        level = entry.get("level") if isinstance(entry, dict) else None
        if level not in ("warning", "error", "critical"):
            continue
        counts[level] = counts.get(level, 0) + 1
        message = f"{level}: {entry.get('message', '')}"[:300]
        if len(first) < shown and message not in first:
            first.append(message)
    if not counts:
        return ""
    return ", ".join(f"{n} {level} line{'s' * (n != 1)}" for level, n in counts.items()) + "; first:\n  " + "\n  ".join(first)


def _tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def kafka_broker() -> Iterator[Endpoint]:
    with ReferenceKafka(heap=KAFKA_HEAP, config_overrides=KAFKA_OVERRIDES) as kafka:
        assert kafka.pid is not None
        yield Endpoint("kafka", kafka.bootstrap, kafka.pid)


def run(plan: Plan, endpoints: Sequence[Endpoint]) -> Rows:
    """All rounds of the data workloads, then all rounds of the partition workload (whose
    deletion of 10,000 partitions would otherwise run on into the next endpoint's turn).
    Topics are deleted only after the last round."""
    rows: Rows = []
    phases = [[n for n in plan.workloads if n not in LATE], [n for n in plan.workloads if n in LATE]]
    for endpoint in endpoints:
        plan.progress(f"warming up {endpoint.name}")
        warm_up(Context(endpoint, plan.scale, 0))
    settle(endpoints)
    for names in filter(None, phases):
        for round_no in range(1, plan.rounds + 1):
            for endpoint in endpoints:
                ctx = Context(endpoint, plan.scale, round_no)
                for name in names:
                    plan.progress(f"round {round_no}/{plan.rounds}  {endpoint.name:<16} {name}")
                    rows.append(_measure(ctx, name))
                plan.progress(f"round {round_no}/{plan.rounds}  {endpoint.name:<16} settling")
                settle(endpoints)
    for endpoint in endpoints:
        try:
            cleanup(Context(endpoint, plan.scale, 0))
        except Exception as error:  # noqa: BLE001 - the measurements stand; say what was left behind
            print(f"martlet bench: the bench's topics on {endpoint.name} were not all deleted: {error}", file=sys.stderr)
    return rows


def _measure(ctx: Context, name: str) -> dict[str, Any]:
    started = time.monotonic()
    row: dict[str, Any] = {"round": ctx.round, "endpoint": ctx.endpoint.name, "workload": name, "metrics": {}}
    try:
        row["metrics"] = WORKLOADS[name](ctx)
    except Exception as error:  # reported in its row; the other workloads still run
        row["error"] = f"{type(error).__name__}: {error}"
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def settle(endpoints: Sequence[Endpoint]) -> None:
    """Start the next endpoint on a quiet machine: write back the page cache the last one
    dirtied, and wait (bounded) until no broker is busy with leftovers such as deleting
    10,000 partitions, so that work is not billed to the other system."""
    os.sync()
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    for pid in dict.fromkeys(endpoint.pid for endpoint in endpoints):  # two listeners of one broker: one wait
        if pid is None:
            continue
        quiet = 0
        while quiet < QUIET_WINDOWS and time.monotonic() < deadline:
            before = cpu_seconds(pid)
            time.sleep(SETTLE_WINDOW_S)  # measuring a rate over a window, not waiting for an event
            quiet = quiet + 1 if cpu_seconds(pid) - before < QUIET_CORES * SETTLE_WINDOW_S else 0


def medians(rows: Rows) -> dict[tuple[str, str], dict[str, float]]:
    """(workload, metric) -> endpoint -> median over the rounds."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in rows:
        for metric, value in row["metrics"].items():
            values.setdefault((row["workload"], metric), {}).setdefault(row["endpoint"], []).append(value)
    return {key: {ep: statistics.median(vs) for ep, vs in by_ep.items()} for key, by_ep in values.items()}


def ratios(rows: Rows, endpoint: str = "martlet", reference: str = REFERENCE) -> dict[tuple[str, str], float]:
    """(workload, metric) -> the endpoint's median / the reference's median (Martlet on local
    disk over Kafka unless named otherwise)."""
    return {key: m[endpoint] / m[reference] for key, m in medians(rows).items()
            if endpoint in m and m.get(reference)}


def compared(rows: Rows) -> list[Pair]:
    """(endpoint, Kafka) for every other endpoint, in run order; none without Kafka."""
    endpoints = list(dict.fromkeys(row["endpoint"] for row in rows))
    return [(ep, REFERENCE) for ep in endpoints if ep != REFERENCE] if REFERENCE in endpoints else []


def report(rows: Rows, pairs: Sequence[Pair] | None = None) -> str:
    """Medians per endpoint, a ratio column per pair (every endpoint over Kafka unless given),
    then the raw rows."""
    return "\n".join([*median_table(rows, compared(rows) if pairs is None else pairs), "", *raw_rows(rows)])


def median_table(rows: Rows, pairs: Sequence[Pair]) -> list[str]:
    endpoints = list(dict.fromkeys(row["endpoint"] for row in rows))
    by_pair = {pair: ratios(rows, *pair) for pair in pairs}
    wide = [max(14, len(ep) + 2) for ep in endpoints]
    heads = [f"{ep}/{reference}" for ep, reference in pairs]
    high = [max(20, len(h) + 2) for h in heads]
    head = f"{'workload':<24}{'metric':<14}" + "".join(f"{ep:>{w}}" for ep, w in zip(endpoints, wide, strict=True))
    lines = [f"medians over {max((row['round'] for row in rows), default=0)} round(s)",
             head + "".join(f"{h:>{w}}" for h, w in zip(heads, high, strict=True)) + ("  better" if pairs else "")]
    for (workload, metric), by_ep in medians(rows).items():
        line = f"{workload:<24}{metric:<14}" + "".join(
            f"{by_ep.get(ep, float('nan')):>{w}.2f}" for ep, w in zip(endpoints, wide, strict=True))
        if pairs and any(by_ep.get(reference) for _, reference in pairs):
            line += "".join(f"{by_pair[pair].get((workload, metric), float('nan')):>{w}.2f}"
                            for pair, w in zip(pairs, high, strict=True))
            line += f"  {'higher' if METRICS[metric].higher_is_better else 'lower'}"
        lines.append(line)
    return lines


def raw_rows(rows: Rows) -> list[str]:
    named = max([14, *(len(row["endpoint"]) + 2 for row in rows)])
    lines = ["raw rows", f"{'round':<6}{'endpoint':<{named}}{'workload':<24}metrics"]
    for row in rows:
        shown = row.get("error") or ", ".join(f"{k} {v:.2f}" for k, v in row["metrics"].items())
        lines.append(f"{row['round']:<6}{row['endpoint']:<{named}}{row['workload']:<24}{shown}")
    return lines


def errors(rows: Rows) -> list[str]:
    return [f"round {r['round']} {r['endpoint']} {r['workload']}: {r['error']}" for r in rows if "error" in r]


def check(rows: Rows, baseline: dict[str, float]) -> list[str]:
    """Regression guard: every recorded ratio ("workload metric" -> ratio) must hold at least
    half its value (for lower-is-better metrics: at most twice). Returns what failed."""
    got = ratios(rows)
    failures = errors(rows)
    for key, recorded in baseline.items():
        workload, metric = key.split(" ", 1)
        ratio = got.get((workload, metric))
        if ratio is None:
            failures.append(f"{key}: not measured")
        elif METRICS[metric].higher_is_better and ratio < recorded / 2:
            failures.append(f"{key}: ratio {ratio:.2f} is below half the recorded {recorded:.2f}")
        elif not METRICS[metric].higher_is_better and ratio > recorded * 2:
            failures.append(f"{key}: ratio {ratio:.2f} is above twice the recorded {recorded:.2f}")
    return failures


def to_json(rows: Rows, pairs: Sequence[Pair] | None = None) -> str:
    """Medians with a ratio per pair (every endpoint over Kafka unless given), and the raw rows."""
    by_pair = {pair: ratios(rows, *pair) for pair in (compared(rows) if pairs is None else pairs)}
    table = [{"workload": w, "metric": m, "medians": by_ep,
              "ratios": {f"{ep}/{reference}": got[(w, m)] for (ep, reference), got in by_pair.items() if (w, m) in got}}
             for (w, m), by_ep in medians(rows).items()]
    return json.dumps({"medians": table, "rows": rows}, indent=2)
