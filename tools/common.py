"""What every operator command shares: where the broker is, how answers are printed, and the
exit codes scripts rely on.

Exit codes: 0 done; 1 the broker refused (a Kafka error such as an unknown topic, a login or a
TLS handshake it refused, or nothing to do); 2 bad usage (argparse's own code, or a
--command-config file that cannot be used); 3 no broker answered within --timeout; 130 stopped
by Ctrl-C. Every command's -h ends with them (exit_codes).

How a command logs in (SASL, TLS) comes from --command-config, a Kafka client properties file
(tools/client_config.py translates it into librdkafka's settings).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, NoReturn, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from . import client_config

OK, REFUSED, USAGE, UNREACHABLE = 0, 1, 2, 3
BOOTSTRAP_ENV, HTTP_ENV = "MARTLET_BOOTSTRAP", "MARTLET_HTTP"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
HTTP_PORT = 9644  # the broker's [http] port when MARTLET_HTTP and --http say nothing
PIPED_WIDTH = 1000  # columns of a table printed to a pipe or file
HELP_WIDTH = 90  # columns of the exit codes paragraph of -h


class Failed(Exception):
    """An operation that could not be done: printed as `martlet: <message>`, exit `code`."""

    def __init__(self, message: str, code: int = REFUSED) -> None:
        super().__init__(message)
        self.code = code


def exit_codes(refused: str = "the broker refused", unreachable: str = "") -> str:
    """The last paragraph of a command's -h: its exit codes, with what 1 (and 3) mean for it;
    wrapped here, as the commands with examples keep their text as written."""
    text = (f"exit codes: 0 done; 1 {refused}; 2 bad usage; 3 no broker answered within --timeout{unreachable}; "
            f"130 stopped by Ctrl-C")
    return textwrap.fill(text, HELP_WIDTH)


def connection_args(parser: argparse.ArgumentParser) -> None:
    """--bootstrap, --http, --timeout and --output, the same on every command."""
    parser.add_argument("--bootstrap", "-b", default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
                        help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--http", default=os.environ.get(HTTP_ENV),
                        help=f"Martlet's HTTP address, for what only Martlet knows (default: ${HTTP_ENV}, "
                             f"else the bootstrap host on port {HTTP_PORT}); other Kafka endpoints go without")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the broker (default 10)")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table", help="table (default) or json")
    parser.add_argument("--command-config", metavar="FILE", default=os.environ.get(client_config.COMMAND_CONFIG_ENV),
                        help="Kafka client properties for SASL and TLS (security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.location, ...), as kafka-topics.sh --command-config "
                             f"reads them (default: ${client_config.COMMAND_CONFIG_ENV}, else none: plaintext)")


def timestamp_ms(text: str) -> int:
    """argparse's type= of a point in time: milliseconds since the epoch (kcat's and Kafka's
    ListOffsets' unit), or an ISO 8601 date and time ("2026-12-04T10:00", "2026-12-04 10:00:00Z",
    "2026-12-04T10:00+01:00"; without a zone this machine's local time, as kafka-consumer-groups.sh
    --to-datetime reads it)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds since the epoch or an ISO 8601 time such as "
                                         f"2026-12-04T10:00:00, got {text!r}") from None
    return round(moment.timestamp() * 1000)  # a naive datetime's timestamp() is local time


def kafka_config(args: argparse.Namespace, **extra: object) -> dict[str, object]:
    """librdkafka settings for a command's client: those of --command-config, and an error_cb
    that notes a refused login (Refusals); `extra` adds or overrides."""
    return {"bootstrap.servers": args.bootstrap, "client.id": "martlet-cli", "log_level": 3,
            **security_settings(args), "error_cb": refusals(args).note, **extra}


def security_settings(args: argparse.Namespace) -> dict[str, str]:
    """librdkafka's settings from the --command-config file ({} without one); a file that cannot
    be used is Failed USAGE, its message naming keys but never a value (no password shown)."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        return client_config.load(path)
    except client_config.ConfigError as error:
        given = "$" + client_config.COMMAND_CONFIG_ENV if path == os.environ.get(client_config.COMMAND_CONFIG_ENV) else ""
        raise Failed(f"--command-config {error}{f' (from {given})' if given else ''}", USAGE) from None


class Refusals:
    """librdkafka's error_cb of a command's clients: keeps the first error saying that a broker
    answered but refused the connection (a SASL login, a TLS handshake). librdkafka only retries
    those until --timeout and then reports a transport failure; list_topics stops at once."""

    KINDS = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL})

    def __init__(self) -> None:
        self.first: KafkaError | None = None

    def note(self, error: KafkaError) -> None:
        if self.first is None and error.code() in self.KINDS:
            self.first = error

    def failed(self, args: argparse.Namespace) -> Failed | None:
        """The refusal as Failed REFUSED (librdkafka's "sasl_ssl://host:port/id: " prefix cut), or None."""
        if self.first is None:
            return None
        text = re.sub(r"^\S+://\S+?: ", "", str(self.first.str()))
        what = "login refused" if self.first.code() == KafkaError._AUTHENTICATION else "TLS handshake failed"
        return Failed(f"{what} at {args.bootstrap}: {text} ({self.first.name()})", REFUSED)


def refusals(args: argparse.Namespace) -> Refusals:
    """The Refusals of this command's clients (one per command: kept in its args)."""
    found = getattr(args, "refusals", None)
    if not isinstance(found, Refusals):
        found = args.refusals = Refusals()
    return found


CONNECT_CHECK_S = 0.5  # list_topics waits in slices this long, looking for a refused login between them


def list_topics(client: Any, args: argparse.Namespace, topic: str | None, timeout_s: float) -> Any:
    """`client.list_topics(topic)` (an AdminClient, Producer or Consumer) within `timeout_s`:
    waited for in slices of CONNECT_CHECK_S, between which librdkafka serves its errors (poll), so
    that a refused login or TLS handshake ends it at once as Failed REFUSED. Past `timeout_s`,
    librdkafka's KafkaException."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return client.list_topics(topic, timeout=max(0.01, min(CONNECT_CHECK_S, deadline - time.monotonic())))
        except KafkaException:
            client.poll(0)
            refused = refusals(args).failed(args)
            if refused is not None:
                raise refused from None
            if time.monotonic() >= deadline:
                raise


def subcommand(subs: Any, name: str, func: Any, summary: str, description: str) -> argparse.ArgumentParser:
    """A subcommand (`martlet topic create`) that runs `func(args)`, with the connection options."""
    command: argparse.ArgumentParser = subs.add_parser(name, help=summary, description=description, epilog=exit_codes())
    command.set_defaults(func=func)
    connection_args(command)
    return command


def http_address(args: argparse.Namespace) -> str:
    if args.http:
        return str(args.http)
    first = str(args.bootstrap).split(",")[0]
    host = first.rsplit(":", 1)[0] if ":" in first else first
    return f"{host}:{HTTP_PORT}"


def http_get(args: argparse.Namespace, path: str) -> Any | None:
    """The JSON answer of Martlet's HTTP API at `path`, or None where no Martlet answers (a
    plain Kafka endpoint, or a broker without its HTTP port)."""
    url = f"http://{http_address(args)}{path}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:
            return json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def run(main: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Calls `main`, turning Failed into its message and exit code."""
    try:
        return main(args)
    except Failed as failure:
        print(f"martlet: {failure}", file=sys.stderr)
        return failure.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of standard output went away (| head): a normal end
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not fail again
        return OK


def fail(message: str, code: int = REFUSED) -> NoReturn:
    raise Failed(message, code)


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2, sort_keys=False, default=str))


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    # Piped, a table keeps its rows whole (grep, awk) instead of folding at rich's default 80 columns.
    Console(width=None if sys.stdout.isatty() else PIPED_WIDTH).print(table)


# -- Kafka admin calls (topic, group, status) ---------------------------------------------------

# librdkafka's own codes for "no broker answered": exit UNREACHABLE, not REFUSED.
_UNREACHABLE_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                                KafkaError._RESOLVE})
ADMIN_MARGIN_S = 5.0  # a future is waited for this much past --timeout, which bounds the request itself


def admin_client(args: argparse.Namespace) -> AdminClient:
    """A confluent_kafka AdminClient of --bootstrap, once a broker has answered a Metadata request
    (else Failed with UNREACHABLE). librdkafka's own log lines are off: failures come back as errors."""
    config = cast(dict[str, str | int | float | bool], kafka_config(args, log_level=0))
    client = AdminClient(config)
    metadata(client, args)
    return client


class KafkaFailed(Failed):
    """A Kafka error (its name, such as TOPIC_ALREADY_EXISTS, in `error_name`) as a Failed."""

    def __init__(self, message: str, code: int, error_name: str) -> None:
        super().__init__(message, code)
        self.error_name = error_name


def kafka_failed(error: KafkaError, phrases: dict[str, str], action: str) -> KafkaFailed:
    """A KafkaError as a one-line Failed: the phrase for its name when there is one, else
    "`action`: librdkafka's text", then the error's name in brackets."""
    name = str(error.name())
    text = phrases.get(name) or f"{action}: {error.str()}"
    code = UNREACHABLE if int(error.code()) in _UNREACHABLE_CODES else REFUSED
    return KafkaFailed(f"{text} ({name})", code, name)


def wait_admin(future: Future[Any], args: argparse.Namespace, phrases: dict[str, str], action: str) -> Any:
    """The result of an admin call's future, bounded by --timeout; Kafka errors become Failed."""
    try:
        return future.result(timeout=args.timeout + ADMIN_MARGIN_S)
    except KafkaException as error:
        raise kafka_failed(error.args[0], phrases, action) from None
    except FutureTimeout:
        raise Failed(f"{action}: no answer within {args.timeout:g} s", UNREACHABLE) from None


# Answers that say the group coordinator is moving or loading (a first group on Kafka creates
# __consumer_offsets): the same request is made again, up to --timeout.
RETRIABLE_ERRORS = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"})
ADMIN_RETRY_S = 0.2


def call_admin(call: Callable[[], Future[Any]], args: argparse.Namespace, phrases: dict[str, str], action: str) -> Any:
    """wait_admin(call()), calling again while the answer is one of RETRIABLE_ERRORS, up to --timeout."""
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            return wait_admin(call(), args, phrases, action)
        except KafkaFailed as failure:
            if failure.error_name not in RETRIABLE_ERRORS or time.monotonic() >= deadline:
                raise
        time.sleep(ADMIN_RETRY_S)


def human_bytes(count: int | None) -> str:
    if count is None:
        return ""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"  # not reached


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def martlet_http(args: argparse.Namespace, expected_cluster: str | None) -> dict[str, Any] | None:
    """Martlet's /api/v1/status when the HTTP API at http_address(args) belongs to the cluster of
    `expected_cluster` (the Kafka side's DescribeCluster id), else None. The default address (port 9644
    of the bootstrap host) may well be another broker's: its answers are not shown as this one's."""
    status = http_get(args, "/api/v1/status")
    if not isinstance(status, dict):
        return None
    if expected_cluster is not None and status.get("cluster_id") != expected_cluster:
        if args.http:
            print(f"martlet: the HTTP API at {http_address(args)} is of cluster {status.get('cluster_id')}, not "
                  f"{expected_cluster}: showing only what Kafka tells", file=sys.stderr)
        return None
    return status


def metadata(client: AdminClient, args: argparse.Namespace, topic: str | None = None) -> Any:
    """A Metadata answer (ClusterMetadata) of every topic or of `topic`; no answer is Failed UNREACHABLE."""
    try:
        return list_topics(client, args, topic, args.timeout)
    except KafkaException as error:
        raise kafka_failed(error.args[0], {}, f"no broker answered at {args.bootstrap}") from None


def cluster_id(client: AdminClient, args: argparse.Namespace) -> str | None:
    answer = wait_admin(client.describe_cluster(request_timeout=args.timeout), args, {}, "cannot describe the cluster")
    return None if answer.cluster_id is None else str(answer.cluster_id)


# -- produce and consume: a topic's partitions, progress bars --------------------------------

METADATA_RETRY_S = 0.2  # between Metadata requests while a new topic has no leader yet


def topic_partitions(client: Any, topic: str, args: argparse.Namespace) -> list[int]:
    """The partitions of `topic`, asked of --bootstrap by a confluent_kafka Producer or Consumer
    (`client`): Failed REFUSED for a topic the broker does not know, UNREACHABLE when no broker
    answers within --timeout. A topic without a leader yet (just created) is asked again."""
    import time

    deadline = time.monotonic() + args.timeout
    while True:
        try:
            answer = list_topics(client, args, topic, max(0.1, deadline - time.monotonic()))
        except KafkaException as unanswered:
            error = unanswered.args[0]
            fail(f"no broker answered at {args.bootstrap} within {args.timeout:g} s: {error.str()} ({error.name()})",
                 UNREACHABLE)
        found = answer.topics.get(topic)
        error = found.error if found is not None else None
        if found is not None and error is None:
            return sorted(found.partitions)
        if error is not None and error.name() == "UNKNOWN_TOPIC_OR_PART":
            fail(f"unknown topic {topic!r}, create it with: martlet topic create {topic} (UNKNOWN_TOPIC_OR_PART)")
        if time.monotonic() >= deadline:
            fail(f"topic {topic!r}: {error.str()} ({error.name()})" if error else f"topic {topic!r}: no metadata",
                 UNREACHABLE)
        time.sleep(METADATA_RETRY_S)


class ProgressBar:
    """A rich progress bar on standard error when `shown` (else nothing), of bytes or records
    against `total` (None: a count without an end). Advances are pushed every 0.1 s, so a
    caller may advance once per record."""

    PUSH_S = 0.1

    def __init__(self, shown: bool, description: str, total: int | None, unit: str = "records") -> None:
        from rich import progress as rp

        columns: list[str | rp.ProgressColumn] = [rp.TextColumn(description), rp.BarColumn()]
        if unit == "bytes":
            columns += [rp.DownloadColumn(), rp.TransferSpeedColumn()]
        elif total is not None:
            columns.append(rp.MofNCompleteColumn())
        else:
            columns.append(rp.TextColumn("{task.completed:.0f} records"))
        columns.append(rp.TimeRemainingColumn())
        self._progress = rp.Progress(*columns, console=Console(stderr=True), redirect_stdout=False,
                                     redirect_stderr=False) if shown else None
        self._task = self._progress.add_task(description, total=total) if self._progress else None
        self._pending, self._pushed = 0, 0.0

    def __enter__(self) -> ProgressBar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._progress is not None:
            self._push()
            self._progress.stop()

    def advance(self, amount: int) -> None:
        if self._progress is None:
            return
        import time

        self._pending += amount
        now = time.monotonic()
        if now - self._pushed >= self.PUSH_S:
            self._pushed = now
            self._push()

    def _push(self) -> None:
        if self._progress is not None and self._task is not None and self._pending:
            self._progress.advance(self._task, self._pending)
            self._pending = 0

