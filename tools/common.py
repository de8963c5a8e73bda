"""What every operator command shares: where the broker is, how answers are printed, and the
exit codes scripts rely on.

Exit codes: 0 done; 1 the broker refused (a Kafka error such as an unknown topic, or nothing to
do); 2 bad usage (argparse's own code); 3 no broker answered within --timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table

OK, REFUSED, USAGE, UNREACHABLE = 0, 1, 2, 3
BOOTSTRAP_ENV, HTTP_ENV = "MARTLET_BOOTSTRAP", "MARTLET_HTTP"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
HTTP_PORT = 9644  # the broker's [http] port when MARTLET_HTTP and --http say nothing


class Failed(Exception):
    """An operation that could not be done: printed as `martlet: <message>`, exit `code`."""

    def __init__(self, message: str, code: int = REFUSED) -> None:
        super().__init__(message)
        self.code = code


def connection_args(parser: argparse.ArgumentParser) -> None:
    """--bootstrap, --http, --timeout and --output, the same on every command."""
    parser.add_argument("--bootstrap", "-b", default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
                        help=f"Kafka bootstrap servers (default: ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--http", default=os.environ.get(HTTP_ENV),
                        help=f"Martlet's HTTP address, for what only Martlet knows (default: ${HTTP_ENV}, "
                             f"else the bootstrap host on port {HTTP_PORT}); other Kafka endpoints go without")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the broker (default 10)")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table", help="table (default) or json")


def kafka_config(args: argparse.Namespace, **extra: object) -> dict[str, object]:
    """librdkafka settings for a command's client; `extra` adds or overrides."""
    return {"bootstrap.servers": args.bootstrap, "client.id": "martlet-cli", "log_level": 3, **extra}


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
    Console().print(table)
