"""`martlet bench`: see compat/bench/__init__.py and `martlet bench -h`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .cluster import CLUSTER_WORKLOADS, QUICK_CLUSTER, ClusterPlan, ClusterScale, cluster_json, cluster_report, run_cluster
from .runner import Plan, check, errors, kafka_broker, martlet_broker, report, run, to_json
from .secured import SECURED_WORKLOADS, run_secured, secured_json, secured_report
from .workloads import NEEDS, QUICK, WORKLOADS, Endpoint, Scale


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="martlet bench",
        description="Martlet and Apache Kafka side by side under librdkafka load: medians over "
                    "rounds (Martlet, Kafka, Martlet, Kafka ...) and the ratio Martlet / Kafka; with "
                    "--hdfs a Martlet on HDFS runs beside them (martlet-hdfs, martlet, kafka, ...).")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per endpoint (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (100 MB produce, 10 s latency, 1,000 partitions)")
    parser.add_argument("--workloads", default=None, metavar="A,B",
                        help=f"which to run, in order (default: all: {','.join(WORKLOADS)}; with --cluster: "
                             f"{','.join(CLUSTER_WORKLOADS)})")
    parser.add_argument("--produce-mb", type=int, default=None, metavar="MB",
                        help="bytes per 1 KB produce workload, in MB (default 1000; quick 100)")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="measure this endpoint alone instead of starting Martlet and Kafka")
    parser.add_argument("--pid", type=int, default=None,
                        help="with --bootstrap: the broker's process id, for CPU and RSS")
    parser.add_argument("--hdfs", action="store_true",
                        help="also run a Martlet on a reference HDFS started for the run (endpoint martlet-hdfs), "
                             "beside Martlet on local disk and Kafka; --check still compares Martlet on local disk")
    parser.add_argument("--martlet-config", metavar="FILE", help="TOML config for every Martlet started here")
    parser.add_argument("--cluster", action="store_true",
                        help="Martlet clusters on ZooKeeper and HDFS: aggregate produce with 1 and 2 brokers "
                             "beside one Kafka broker, and failover time under kill -9 (see compat/bench/cluster.py)")
    parser.add_argument("--kills", type=int, default=None, metavar="N",
                        help="with --cluster: kill -9s in cluster-failover (default 10; quick 3)")
    parser.add_argument("--spark", action="store_true",
                        help="Spark reads one topic with the stock Kafka source and with format(\"martlet\"), "
                             "same session, same broker: time and CPU (--produce-mb, default 2000; --rounds)")
    parser.add_argument("--udp", action="store_true",
                        help="UDP datagrams a second one sender gets accepted and persisted by a Martlet "
                             "(--datagrams; --rounds)")
    parser.add_argument("--datagrams", type=int, default=None, metavar="N",
                        help="with --udp: datagrams of 100 bytes per round (default 200,000; quick 20,000)")
    parser.add_argument("--native", action="store_true",
                        help="the native SDK's AsyncProducer beside confluent-kafka acks=all on one Martlet: throughput "
                             "(1 KB and 100 B) and acknowledgement latency at 1,000 records/s (--produce-mb; --rounds)")
    parser.add_argument("--secured", action="store_true",
                        help="1 KB produce and consume over SASL_SSL (SCRAM-SHA-512) on Martlet and on Kafka configured "
                             "the same way, beside each one's plaintext listener on the same broker: the ratio "
                             "martlet-sasl-ssl/kafka-sasl-ssl and the cost of SASL_SSL per system (see compat/bench/secured.py)")
    parser.add_argument("--json", metavar="FILE", help="write medians and raw rows here")
    parser.add_argument("--check", metavar="FILE",
                        help="recorded ratios (JSON: \"workload metric\" -> ratio); exit 1 if one "
                             "falls below half of it (above twice, where lower is better)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    known = list(CLUSTER_WORKLOADS if options.cluster else SECURED_WORKLOADS if options.secured else WORKLOADS)
    names = [n for n in (options.workloads or ",".join(known)).split(",") if n]
    unknown = [n for n in names if n not in known]
    refused = _refused(options) or _out_of_order(names)
    if unknown or refused:
        print(f"martlet bench: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(known)}"
              if unknown else f"martlet bench: {refused}", file=sys.stderr)
        return 2
    if options.spark:
        from .spark_read import main as spark_main

        return spark_main(options.produce_mb or 2000, options.rounds, _progress_printer())
    if options.cluster:
        return _main_cluster(options, names)
    if options.native:
        return _main_native(options)
    if options.udp:
        from .udp import main as udp_main

        return udp_main(options.datagrams or (20_000 if options.quick else 200_000), options.rounds, _progress_printer())
    scale = QUICK if options.quick else Scale()
    if options.produce_mb:
        scale = dataclasses.replace(scale, produce_bytes=options.produce_mb * 1_000_000)
    plan = Plan(options.rounds, names, scale, _progress_printer())
    try:
        rows = _run(plan, options)
    finally:
        plan.progress("")
    print(secured_report(rows) if options.secured else report(rows))
    if options.json:
        Path(options.json).write_text(secured_json(rows) if options.secured else to_json(rows))
    if options.check:
        failures = check(rows, json.loads(Path(options.check).read_text()))
        for failure in failures:
            print(f"REGRESSION {failure}")
        return 1 if failures else 0
    return 1 if errors(rows) else 0


def _out_of_order(names: list[str]) -> str | None:
    """Why these workloads cannot run in this order (one reads what another writes), or None."""
    for at, name in enumerate(names):
        source = NEEDS.get(name)
        if source is not None and source not in names[:at]:
            return f"{name} reads back what {source} wrote in the round: list {source} before it in --workloads"
    return None


def _refused(options: argparse.Namespace) -> str | None:
    """Why these options do not go together, or None."""
    if options.rounds < 1:
        return "--rounds must be at least 1"
    if options.kills is not None and (not options.cluster or options.kills < 1):
        return "--kills takes a positive count, with --cluster"
    if options.datagrams is not None and (not options.udp or options.datagrams < 1):
        return "--datagrams takes a positive count, with --udp"
    apart = [flag for flag in ("bootstrap", "check", "hdfs", "martlet_config", "cluster", "udp", "spark", "native")
             if getattr(options, flag)]
    if options.secured and apart:
        return f"--secured starts its own brokers with SASL_SSL listeners; it does not take --{apart[0].replace('_', '-')}"
    elsewhere = [flag for flag in ("bootstrap", "check", "hdfs", "cluster", "udp", "spark") if getattr(options, flag)]
    if options.native and elsewhere:
        return f"--native starts its own broker and reports its own figures; it does not take --{elsewhere[0]}"
    clashing = [flag for flag in ("bootstrap", "check", "hdfs", "martlet_config") if getattr(options, flag)]
    if options.cluster and clashing:
        return f"--cluster starts its own clusters; it does not take --{clashing[0].replace('_', '-')}"
    started_here = [flag for flag in ("hdfs", "martlet_config") if getattr(options, flag)]
    if options.bootstrap and started_here:
        return f"--bootstrap measures a broker started elsewhere; it does not take --{started_here[0].replace('_', '-')}"
    return None


def _main_native(options: argparse.Namespace) -> int:
    from .native import QUICK_NATIVE, NativeScale
    from .native import main as native_main

    scale = QUICK_NATIVE if options.quick else NativeScale()
    if options.produce_mb:
        scale = dataclasses.replace(scale, records_1k=options.produce_mb * 1000)
    return native_main(scale, options.rounds, _progress_printer(), options.json)


def _main_cluster(options: argparse.Namespace, names: list[str]) -> int:
    scale = QUICK_CLUSTER if options.quick else ClusterScale()
    if options.produce_mb:
        scale = dataclasses.replace(scale, produce_bytes=options.produce_mb * 1_000_000,
                                    warm_up_bytes=min(scale.warm_up_bytes, options.produce_mb * 1_000_000))
    if options.kills:
        scale = dataclasses.replace(scale, kills=options.kills)
    plan = ClusterPlan(options.rounds, names, scale, _progress_printer())
    try:
        rows = run_cluster(plan)
    finally:
        plan.progress("")
    print(cluster_report(rows, scale))
    if options.json:
        Path(options.json).write_text(cluster_json(rows, scale))
    for error in errors(rows):
        print(f"ERROR {error}", file=sys.stderr)
    return 1 if errors(rows) else 0


def _run(plan: Plan, options: argparse.Namespace) -> list[dict[str, object]]:
    if options.bootstrap:
        return run(plan, [Endpoint("endpoint", options.bootstrap, options.pid)])
    if options.secured:
        return run_secured(plan)
    config = Path(options.martlet_config).read_text() if options.martlet_config else ""
    with contextlib.ExitStack() as stack:
        endpoints: list[Endpoint] = []
        if options.hdfs:
            from ..reference.hdfs import ReferenceHdfs

            plan.progress("starting HDFS and Martlet on it")
            hdfs = stack.enter_context(ReferenceHdfs())
            endpoint = stack.enter_context(martlet_broker(f"{hdfs.url}/martlet-bench", config, "martlet-hdfs"))
            endpoints.append(dataclasses.replace(endpoint, store_pid=hdfs.pid))
        plan.progress("starting Martlet and Kafka")
        endpoints.append(stack.enter_context(martlet_broker(None, config)))
        endpoints.append(stack.enter_context(kafka_broker()))
        return run(plan, endpoints)


def _progress_printer() -> Callable[[str], None]:
    """One line on stderr, rewritten in place on a terminal; plain lines otherwise."""
    tty = sys.stderr.isatty()

    def show(line: str) -> None:
        if tty:
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        elif line:
            print(line, file=sys.stderr, flush=True)

    return show
