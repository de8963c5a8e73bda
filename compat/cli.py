"""``martlet compat ...``: the compatibility suite, the reference Apache Kafka and its CLI tools.

    martlet compat --bootstrap HOST:PORT [--reference HOST:PORT] [--clients A,B]
                   [--scenarios A,B] [--json FILE] [--expect-findings] [--jobs N]
                   [--security-config FILE] [--reference-security-config FILE]
                                               run the scenarios (compat/scenarios/) through
                                               each client; `martlet compat run ...` is the same;
                                               the FILE (Kafka client properties: SASL, TLS)
                                               goes to every client of that endpoint
    martlet compat reference-kafka            start one broker, print `bootstrap HOST:PORT`,
                                               serve until SIGINT/SIGTERM, then stop it
    martlet compat kafka-tool NAME ARGS...    run a Kafka CLI tool (topics, console-producer,
                                               console-consumer, ...) against any broker

``main`` takes the arguments after ``compat`` (a leading ``compat`` is tolerated).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from martlet.compat.reference.kafka import (
    KAFKA_TOOLS,
    ReferenceKafka,
    ReferenceKafkaError,
    ReferenceToolTimeout,
    run_tool,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="martlet compat",
        description="The compatibility suite (martlet compat --bootstrap HOST:PORT ...), the reference "
                    "Apache Kafka and its CLI tools."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ref = commands.add_parser("reference-kafka", help="run a real single-node Kafka (KRaft)")
    ref.add_argument("--startup-timeout", type=float, default=120.0, metavar="SECONDS")
    ref.add_argument("--heap", default="512m", help="broker max heap (default 512m)")

    tool = commands.add_parser(
        "kafka-tool", help="run a Kafka CLI tool by name",
        description="Known tools: " + ", ".join(sorted(KAFKA_TOOLS)),
    )  # fmt: skip
    tool.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                      help="kill the tool after this long (default: no limit)")
    tool.add_argument("name", help="tool name, e.g. topics or kafka-topics.sh")
    tool.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the tool")

    suite = commands.add_parser("run", help="the compatibility suite (also: martlet compat --bootstrap ...)")
    suite.add_argument("--bootstrap", metavar="HOST:PORT", help="the cluster under test (required)")
    suite.add_argument("--reference", metavar="HOST:PORT",
                       help="also run against this cluster and report every difference in observations")
    suite.add_argument("--clients", default=None, metavar="A,B",
                       help="clients to drive (default: java,confluent,kafka-python,aiokafka)")
    suite.add_argument("--scenarios", default=None, metavar="A,B", help="scenarios to run (default: all)")
    suite.add_argument("--json", default=None, metavar="FILE", help="write the full report here")
    suite.add_argument("--expect-findings", action="store_true",
                       help="failures listed in compat/FINDINGS.md are known; exit 0 only if every failure "
                            "is listed and every listed entry still fails")
    suite.add_argument("--findings", default=None, metavar="FILE", help="findings file (default compat/FINDINGS.md)")
    suite.add_argument("--jobs", type=int, default=None, help="lanes run at once (default: all)")
    suite.add_argument("--list", action="store_true", help="list the scenarios and exit")
    suite.add_argument("--security-config", default=None, metavar="FILE",
                       help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
                            "ssl.truststore.location, ...) that every client applies to --bootstrap")
    suite.add_argument("--reference-security-config", default=None, metavar="FILE",
                       help="the same for --reference (default: the --security-config file; "
                            f"{NO_SECURITY}: a plaintext reference)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["compat"]:
        args = args[1:]
    if args[:1] and args[0].startswith("--") and args[0] not in ("--help",):
        args = ["run", *args]
    options = _parser().parse_args(args)
    if options.command == "run":
        return _run_suite(options)
    try:
        if options.command == "reference-kafka":
            return _reference_kafka(options.startup_timeout, options.heap)
        return _kafka_tool(options.name, options.args, options.timeout)
    except ReferenceKafkaError as exc:
        print(f"martlet compat: {exc}", file=sys.stderr)
        return 1


def _run_suite(options: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    from . import report, runner
    from .clients.security import LoginRefused

    for noisy in ("kafka", "aiokafka"):  # retries and metadata waits the scenarios provoke on purpose
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    from .scenarios import SCENARIOS

    if options.list:
        print("\n".join(f"{name:<32} {(fn.__doc__ or '').strip().splitlines()[0] if fn.__doc__ else ''}"
                        for name, fn in SCENARIOS.items()))
        return 0
    if not options.bootstrap:
        print("martlet compat: --bootstrap HOST:PORT is required", file=sys.stderr)
        return 2
    clients = options.clients.split(",") if options.clients else runner.default_clients()
    scenarios = options.scenarios.split(",") if options.scenarios else None
    findings = None
    if options.expect_findings:
        findings = report.load_findings(Path(options.findings) if options.findings else report.FINDINGS_PATH)
    security, reference_security = _security_configs(options)
    try:
        result = runner.run(options.bootstrap, clients, scenarios, options.reference, findings, options.jobs,
                            progress=lambda line: print(line, file=sys.stderr, flush=True), security=security,
                            reference_security=reference_security)
    except ValueError as exc:
        print(f"martlet compat: {exc}", file=sys.stderr)
        return 2
    except LoginRefused as exc:
        print(f"martlet compat: {exc}", file=sys.stderr)
        return 1
    if options.json:
        meta = runner.meta(result, options.bootstrap, options.reference, options.expect_findings, security,
                           reference_security)
        Path(options.json).write_text(report.to_json(result.cells, meta))
    print(report.table(result.cells, result.scenarios, result.clients))
    print()
    for problem in result.findings_problems:
        print(f"findings: {problem}")
    print(f"{report.details(result.cells)}; {result.seconds:.0f}s")
    print(report.summary(result.cells))
    return 1 if report.unexpected(result.cells) or result.findings_problems else 0


NO_SECURITY = "none"  # --reference-security-config none: the reference takes no security config


def _security_configs(options: argparse.Namespace) -> tuple[str | None, str | None]:
    """The security config files of the endpoint under test and of the reference."""
    reference = options.reference_security_config
    if reference is None:
        reference = options.security_config
    return options.security_config, None if reference == NO_SECURITY else reference


def _reference_kafka(startup_timeout: float, heap: str) -> int:
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    kafka = ReferenceKafka(startup_timeout_s=startup_timeout, heap=heap)
    try:
        kafka.start()
        print(f"bootstrap {kafka.bootstrap}", flush=True)
        print(f"broker log: {kafka.log_path} (pid {kafka.pid})", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            if not kafka.alive:
                print(
                    f"martlet compat: reference Kafka exited with {kafka.returncode}:\n"
                    f"{kafka.log_tail()}",
                    file=sys.stderr,
                )
                return 1
        return 0
    finally:
        kafka.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _kafka_tool(name: str, args: list[str], timeout: float | None) -> int:
    if args[:1] == ["--"]:
        args = args[1:]
    try:
        return run_tool(name, args, timeout, capture=False).returncode
    except ReferenceToolTimeout:
        print(f"martlet compat: kafka tool {name!r} killed after {timeout}s", file=sys.stderr)
        return 124
    except KeyboardInterrupt:  # the tool shares our process group and got SIGINT too
        return 130


if __name__ == "__main__":
    sys.exit(main())
