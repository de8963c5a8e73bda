"""`martlet produce TOPIC`: one record per line of standard input (or --file), kcat-like.

    seq 100 | martlet produce T                      # 100 records, "1" .. "100", no key
    martlet produce T --key-separator : < pairs.txt  # "k:v" lines: key k, value v
    martlet produce T --format json < records.jsonl  # {"key", "value", "headers", "partition"} lines

The line formats are in tools/formats.py. Every record is handed to librdkafka, which batches
them; the command ends with a flush and then prints one summary line on standard error
("produced 100 records to T"), or with --output json a JSON summary on standard output. A
record the broker refused, or that was not acknowledged within the producer's delivery timeout,
counts as failed: the command then says how many and why and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from .common import (
    OK,
    REFUSED,
    USAGE,
    Failed,
    ProgressBar,
    connection_args,
    exit_codes,
    fail,
    kafka_config,
    print_json,
    run,
    topic_partitions,
)
from .formats import FormatError, Headers, Record, json_record, parse_header, raw_record, unescape

DELIVERY_TIMEOUT_MIN_S = 30.0  # a record not acknowledged after max(this, --timeout) seconds has failed
FULL_QUEUE_POLL_S = 0.1  # librdkafka's queue is full: serve delivery reports this long, then try again
FLUSH_MARGIN_S = 5.0  # the final flush waits this much past the delivery timeout, which bounds it


def main(argv: list[str]) -> int:
    return run(produce, _parser().parse_args(argv))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="martlet produce", description=__doc__,
                                     epilog=exit_codes("a record failed (refused, or not acknowledged in time), an "
                                                       "unknown topic or partition, a bad line"),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic")
    parser.add_argument("--file", "-f", type=Path, help="read the lines from this file (default: standard input)")
    parser.add_argument("--key-separator", "-K", metavar="SEP",
                        help="raw lines are KEY SEP VALUE (split at the first SEP; \\t and \\n are understood)")
    parser.add_argument("--header", "-H", action="append", default=[], metavar="NAME=VALUE",
                        help="a header on every record (repeat for more)")
    parser.add_argument("--partition", "-p", type=int, help="every record to this partition (default: by key)")
    parser.add_argument("--format", choices=("raw", "json"), default="raw",
                        help="raw lines (default) or JSON lines {key, value, headers, partition}")
    parser.add_argument("--acks", choices=("0", "1", "all"), default="all", help="acknowledgements to wait for (all)")
    parser.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress bar on standard error (default: with --file, or for piped lines when "
                             "standard error is a terminal)")
    connection_args(parser)
    return parser


class Deliveries:
    """librdkafka's delivery reports, counted: what was acknowledged and why the rest failed."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failures: Counter[str] = Counter()

    def report(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failures[str(error.str())] += 1

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    def why(self) -> str:
        return "; ".join(f"{reason} ({count})" for reason, count in self.failures.most_common())


class Sender:
    """Hands records to a Producer, waiting for room when its queue is full."""

    def __init__(self, producer: Producer, topic: str, deliveries: Deliveries) -> None:
        self.producer, self.topic, self.deliveries = producer, topic, deliveries

    def send(self, record: Record) -> None:
        extra: dict[str, Any] = {} if record.partition is None else {"partition": record.partition}
        if record.headers:
            extra["headers"] = list(record.headers)
        while True:
            try:
                self.producer.produce(self.topic, value=record.value, key=record.key, **extra)
                break
            except BufferError:
                self.producer.poll(FULL_QUEUE_POLL_S)
            except KafkaException as error:  # refused before sending: no such partition, too large
                self.deliveries.failures[str(error.args[0].str())] += 1
                break
        self.producer.poll(0)


def produce(args: argparse.Namespace) -> int:
    parse = _line_parser(args)
    deliveries = Deliveries()
    producer = Producer(kafka_config(args, **_producer_settings(args), on_delivery=deliveries.report))
    partitions = topic_partitions(producer, args.topic, args)
    if args.partition is not None and args.partition not in partitions:
        fail(f"topic {args.topic!r} has no partition {args.partition} (it has {len(partitions)})")
    sender = Sender(producer, args.topic, deliveries)
    interrupted = False
    try:
        _send_lines(args, parse, sender)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        unacknowledged = producer.flush(max(DELIVERY_TIMEOUT_MIN_S, args.timeout) + FLUSH_MARGIN_S)
        if unacknowledged:
            deliveries.failures["no delivery report in time"] += unacknowledged
    _summary(args, deliveries)
    return 130 if interrupted else OK


def _producer_settings(args: argparse.Namespace) -> dict[str, object]:
    return {"acks": args.acks, "compression.type": args.compression, "linger.ms": 5,
            "allow.auto.create.topics": False, "log_level": 0,
            "message.timeout.ms": int(max(DELIVERY_TIMEOUT_MIN_S, args.timeout) * 1000)}


LineParser = Callable[[bytes], Record | None]


def _line_parser(args: argparse.Namespace) -> LineParser:
    """The function from one line (bytes, no newline) to its Record, or None for a line to skip."""
    try:
        headers: Headers = tuple(parse_header(text) for text in args.header)
    except FormatError as error:
        raise Failed(str(error), USAGE) from None
    separator = unescape(args.key_separator).encode() if args.key_separator else None
    if args.format == "raw":
        return lambda line: raw_record(line, separator, headers, args.partition)

    def from_json(line: bytes) -> Record | None:
        if not line.strip():
            return None
        record = json_record(line)
        partition = record.partition if args.partition is None else args.partition
        return Record(record.value, record.key, record.headers + headers, partition)
    return from_json


def _send_lines(args: argparse.Namespace, parse: LineParser, sender: Sender) -> None:
    source: IO[bytes] = open(args.file, "rb") if args.file else sys.stdin.buffer
    try:
        size = args.file.stat().st_size if args.file else None
        shown = args.progress if args.progress is not None else _bar_by_default(args)
        with ProgressBar(shown, f"producing to {args.topic}", size, "bytes" if size is not None else "records") as bar:
            for number, line in enumerate(source, 1):
                try:
                    record = parse(line.rstrip(b"\n"))
                except FormatError as error:
                    raise Failed(f"line {number}: {error} (the lines before it were produced)", REFUSED) from None
                if record is not None:
                    sender.send(record)
                bar.advance(len(line) if size is not None else 1)
    except OSError as error:
        fail(f"cannot read {args.file}: {error.strerror}")
    finally:
        if args.file:
            source.close()


def _bar_by_default(args: argparse.Namespace) -> bool:
    """With --file; or for piped lines when standard error is a terminal (not while a user types them)."""
    return bool(args.file) or (sys.stderr.isatty() and not sys.stdin.isatty())


def _summary(args: argparse.Namespace, deliveries: Deliveries) -> None:
    total = deliveries.delivered + deliveries.failed
    if args.output == "json":
        print_json({"topic": args.topic, "produced": deliveries.delivered, "failed": deliveries.failed,
                    "errors": dict(deliveries.failures)})
    else:
        print(f"produced {deliveries.delivered} record{'' if deliveries.delivered == 1 else 's'} to {args.topic}",
              file=sys.stderr)
    if deliveries.failed:
        fail(f"{deliveries.failed} of {total} records failed: {deliveries.why()}")
