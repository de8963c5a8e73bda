"""`martlet bench`: see compat/bench/__init__.py and `martlet bench -h`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .runner import Plan, check, errors, kafka_broker, martlet_broker, report, run, to_json
from .workloads import QUICK, WORKLOADS, Endpoint, Scale


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="martlet bench",
        description="Martlet and Apache Kafka side by side under librdkafka load: medians over "
                    "rounds (Martlet, Kafka, Martlet, Kafka ...) and the ratio Martlet / Kafka.")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per endpoint (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (100 MB produce, 10 s latency, 1,000 partitions)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), metavar="A,B",
                        help=f"which to run, in order (default: all: {','.join(WORKLOADS)})")
    parser.add_argument("--produce-mb", type=int, default=None, metavar="MB",
                        help="bytes per 1 KB produce workload, in MB (default 1000; quick 100)")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="measure this endpoint alone instead of starting Martlet and Kafka")
    parser.add_argument("--pid", type=int, default=None,
                        help="with --bootstrap: the broker's process id, for CPU and RSS")
    parser.add_argument("--hdfs", action="store_true", help="run Martlet on a reference HDFS started for the run")
    parser.add_argument("--martlet-config", metavar="FILE", help="TOML config for the Martlet started here")
    parser.add_argument("--json", metavar="FILE", help="write medians and raw rows here")
    parser.add_argument("--check", metavar="FILE",
                        help="recorded ratios (JSON: \"workload metric\" -> ratio); exit 1 if one "
                             "falls below half of it (above twice, where lower is better)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    names = [n for n in options.workloads.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or options.rounds < 1:
        print(f"martlet bench: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}"
              if unknown else "martlet bench: --rounds must be at least 1", file=sys.stderr)
        return 2
    scale = QUICK if options.quick else Scale()
    if options.produce_mb:
        scale = dataclasses.replace(scale, produce_bytes=options.produce_mb * 1_000_000)
    plan = Plan(options.rounds, names, scale, _progress_printer())
    try:
        rows = _run(plan, options)
    finally:
        plan.progress("")
    print(report(rows))
    if options.json:
        Path(options.json).write_text(to_json(rows))
    if options.check:
        failures = check(rows, json.loads(Path(options.check).read_text()))
        for failure in failures:
            print(f"REGRESSION {failure}")
        return 1 if failures else 0
    return 1 if errors(rows) else 0


def _run(plan: Plan, options: argparse.Namespace) -> list[dict[str, object]]:
    if options.bootstrap:
        return run(plan, [Endpoint("endpoint", options.bootstrap, options.pid)])
    config = Path(options.martlet_config).read_text() if options.martlet_config else ""
    with contextlib.ExitStack() as stack:
        store = None
        if options.hdfs:
            from ..reference.hdfs import ReferenceHdfs

            store = f"{stack.enter_context(ReferenceHdfs()).url}/martlet-bench"
        plan.progress("starting Martlet and Kafka")
        martlet = stack.enter_context(martlet_broker(store, config))
        kafka = stack.enter_context(kafka_broker())
        return run(plan, [martlet, kafka])


def _progress_printer() -> Callable[[str], None]:
    """One line on stderr, rewritten in place on a terminal; plain lines otherwise."""
    tty = sys.stderr.isatty()

    def show(line: str) -> None:
        if tty:
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        elif line:
            print(line, file=sys.stderr, flush=True)

    return show
