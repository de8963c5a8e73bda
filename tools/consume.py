"""`martlet consume TOPIC`: a topic's records on standard output, kcat-like.

    martlet consume T                                  # every record there is now, then stop
    martlet consume T --from-beginning --count 100 --group G
    martlet consume T --from-end --follow --format '%p:%o %k=%s\\n'

Where it starts: --from-beginning, --offset N (N < 0: N records before the end), --from-timestamp
TIME (the first record at or after it; milliseconds or ISO 8601) or --from-end. Without --group, the partitions (all, or
--partition ...) are assigned directly, from the beginning unless told otherwise, and nothing
is committed. With --group, the command subscribes as a member of that group: it goes on from
the group's committed offsets (where there are none, from the beginning with --from-beginning,
else from the end, as Kafka's auto.offset.reset); --offset, --from-timestamp or --from-end move
every partition it is given; it commits the offsets of what it printed (not with --no-commit),
also when stopped by Ctrl-C. --group with --partition assigns those partitions and commits as
the group.

When it stops: after --count records; without --count and --follow, once every partition has
reached the high watermark it had when assigned (what was there when the command started, as
kcat -e); with --follow, never (Ctrl-C); with --timeout-idle S, also after S seconds without a
record. Formats (--format raw, json or a format string) are in tools/formats.py; --output json
without --format is --format json. A summary line goes to standard error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import OFFSET_STORED, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage

from .common import (
    UNREACHABLE,
    USAGE,
    Failed,
    ProgressBar,
    connection_args,
    exit_codes,
    fail,
    kafka_config,
    kafka_failed,
    run,
    timestamp_ms,
    topic_partitions,
)
from .formats import FormatError, Headers, Message, Render, renderer, unescape

POLL_S = 0.2  # the longest a consume call waits: Ctrl-C and --timeout-idle are seen this soon
BATCH_MAX = 500  # records taken from librdkafka at a time
JOIN_ALLOWANCE_S = 20.0  # a member waits --timeout and this long for its first assignment (rebalance delays)
COMMIT_EVERY_S = 5.0  # a group commits what it printed this often, and when it stops
GROUPLESS_ID = "martlet-consume"  # librdkafka wants a group.id even to assign partitions, which joins no group
STOP_ERRORS = frozenset({"UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                         "UNKNOWN_TOPIC_ID"})


def main(argv: list[str]) -> int:
    return run(consume, _parser().parse_args(argv))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="martlet consume", description=__doc__,
                                     epilog=exit_codes("an unknown topic or partition, a commit refused",
                                                       " (or, with --group, no partition assigned within --timeout + "
                                                       f"{JOIN_ALLOWANCE_S:g} s)"),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="from each partition's first record")
    start.add_argument("--offset", type=int, metavar="N", help="from offset N (N < 0: N records before the end)")
    start.add_argument("--from-timestamp", type=timestamp_ms, metavar="TIME",
                       help="from the first record at or after TIME (epoch ms, or ISO 8601: 2026-12-04T10:00:00Z)")
    start.add_argument("--from-end", action="store_true", help="from the end: only records produced from now on")
    parser.add_argument("--partition", "-p", type=int, action="append", metavar="N", help="only this partition (repeat)")
    parser.add_argument("--count", "-c", type=int, metavar="N", help="stop after N records")
    parser.add_argument("--follow", action="store_true", help="wait for new records at the end instead of stopping")
    parser.add_argument("--group", "-g", metavar="G", help="consume as a member of group G, from its committed offsets")
    parser.add_argument("--commit", action=argparse.BooleanOptionalAction, default=True,
                        help="with --group, commit the offsets of what was printed (default)")
    parser.add_argument("--format", "-F", metavar="FORMAT",
                        help="raw (the value; default), json (one object a line) or a format string: "
                             "%%t %%p %%o %%T %%k %%s %%K %%S %%h, \\n \\t (see tools/formats.py)")
    parser.add_argument("--key", action=argparse.BooleanOptionalAction, default=None,
                        help="print the key (raw: KEY<separator>VALUE; json: the key field, on by default)")
    parser.add_argument("--key-separator", "-K", default="\\t", metavar="SEP", help="between key and value with --key (\\t)")
    parser.add_argument("--timeout-idle", type=float, metavar="S", help="stop after S seconds without a record")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress bar on standard error (default: for a range, when standard error is a "
                             "terminal and standard output is not)")
    connection_args(parser)
    return parser


class Reading:
    """Where the assigned partitions are: the end each must reach (its high watermark when it was
    assigned), which have reached it, and the next offset after what was printed, which a group
    commits."""

    def __init__(self, until_end: bool) -> None:
        self.until_end = until_end
        self.ends: dict[int, int] = {}
        self.done: set[int] = set()
        self.printed: dict[int, int] = {}
        self.assigned = False

    def assign(self, partition: int, start: int | None, end: int) -> None:
        self.assigned = True
        self.ends[partition] = end
        self.done.discard(partition)
        if start is not None and start >= end:
            self.done.add(partition)

    def revoke(self, partition: int) -> None:
        self.ends.pop(partition, None)
        self.done.discard(partition)
        self.printed.pop(partition, None)

    def wants(self, partition: int, offset: int) -> bool:
        """Whether a record is to be printed: until the end, none at or past its partition's end."""
        if self.until_end and offset >= self.ends.get(partition, offset + 1):
            self.done.add(partition)
            return False
        return partition in self.ends

    def mark(self, partition: int, offset: int) -> None:
        self.printed[partition] = offset + 1
        if self.until_end and offset + 1 >= self.ends.get(partition, offset + 2):
            self.done.add(partition)

    def reached_end(self, partition: int) -> None:
        if partition in self.ends:
            self.done.add(partition)

    def finished(self) -> bool:
        return self.until_end and self.assigned and self.done >= self.ends.keys()


class Session:
    """One consume: the consumer, what it has read and printed, and what its group committed."""

    def __init__(self, consumer: Consumer, args: argparse.Namespace, render: Render) -> None:
        self.consumer, self.args, self.render = consumer, args, render
        self.reading = Reading(until_end=args.count is None and not args.follow)
        self.count = 0
        self.committed: dict[int, int] = {}
        self.last_commit = time.monotonic()
        self.warned: set[str] = set()
        self.out = sys.stdout.buffer

    # -- where to start --

    def starts(self, partitions: list[int]) -> dict[int, tuple[int | None, int]]:
        """Each partition's (start, end): the start option's offset, else the beginning for a plain
        assignment and None (the group's committed offset) in a group; and the high watermark now."""
        marks = {p: self._watermarks(p) for p in partitions}
        by_time = self._offsets_for_time(partitions) if self.args.from_timestamp is not None else {}
        plain = self.args.group is None
        return {p: (_start(self.args, low, high, by_time.get(p), low if plain else None), high)
                for p, (low, high) in marks.items()}

    def _watermarks(self, partition: int) -> tuple[int, int]:
        try:
            low, high = self.consumer.get_watermark_offsets(TopicPartition(self.args.topic, partition),
                                                            timeout=self.args.timeout)
        except KafkaException as error:
            raise kafka_failed(error.args[0], {}, f"cannot read the offsets of partition {partition}") from None
        return int(low), int(high)

    def _offsets_for_time(self, partitions: list[int]) -> dict[int, int]:
        wanted = [TopicPartition(self.args.topic, p, self.args.from_timestamp) for p in partitions]
        try:
            found = self.consumer.offsets_for_times(wanted, timeout=self.args.timeout)
        except KafkaException as error:
            raise kafka_failed(error.args[0], {}, "cannot look up offsets by timestamp") from None
        return {tp.partition: tp.offset for tp in found}

    def assign(self, partitions: list[int]) -> int | None:
        """Assigns `partitions` at their starts; returns how many records lie between the starts
        and the ends (None when a start is the group's committed offset)."""
        starts = self.starts(partitions)
        for partition, (start, end) in starts.items():
            self.reading.assign(partition, start, end)
        self.consumer.assign([TopicPartition(self.args.topic, p, OFFSET_STORED if start is None else start)
                              for p, (start, _end) in starts.items()])
        if any(start is None for start, _end in starts.values()):
            return None
        return sum(max(0, end - (start or 0)) for start, end in starts.values())

    # -- a group's rebalances --

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        starts = self.starts([tp.partition for tp in partitions])
        for tp in partitions:
            start, end = starts[tp.partition]
            if start is not None:
                tp.offset = start
            self.reading.assign(tp.partition, start, end)
        consumer.assign(partitions)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.commit([tp.partition for tp in partitions])
        for tp in partitions:
            self.reading.revoke(tp.partition)

    # -- reading and printing --

    def finished(self) -> bool:
        return (self.args.count is not None and self.count >= self.args.count) or self.reading.finished()

    def loop(self, bar: ProgressBar) -> None:
        idle_since = join_by = time.monotonic()
        join_by += self.args.timeout + JOIN_ALLOWANCE_S
        while not self.finished():
            if not self.reading.assigned and time.monotonic() > join_by:
                fail(f"group {self.args.group!r}: no partitions assigned within {self.args.timeout + JOIN_ALLOWANCE_S:g} s",
                     UNREACHABLE)
            wanted = BATCH_MAX if self.args.count is None else min(BATCH_MAX, self.args.count - self.count)
            printed = self.print_batch(self.consumer.consume(wanted, POLL_S))
            now = time.monotonic()
            if printed:
                idle_since = now
                bar.advance(printed)
            elif self.args.timeout_idle is not None and now - idle_since >= self.args.timeout_idle:
                return
            if now - self.last_commit >= COMMIT_EVERY_S:
                self.commit()

    def print_batch(self, batch: Iterable[KafkaMessage]) -> int:
        lines, marks = [], []
        for record in batch:
            if record.error() is not None:
                self._event(record)
                continue
            partition, offset = int(record.partition() or 0), int(record.offset() or 0)
            if not self.reading.wants(partition, offset):
                continue
            lines.append(self.render(_message(record)))
            marks.append((partition, offset))
            if self.args.count is not None and self.count + len(lines) >= self.args.count:
                break
        with _uninterrupted():  # what is printed is counted and marked for the commit, Ctrl-C or not
            if lines:
                self.out.write(b"".join(lines))
                self.out.flush()
            for partition, offset in marks:
                self.reading.mark(partition, offset)
            self.count += len(lines)
        return len(lines)

    def _event(self, record: KafkaMessage) -> None:
        error = record.error()
        assert error is not None
        if error.code() == KafkaError._PARTITION_EOF:
            self.reading.reached_end(int(record.partition() or 0))
        elif error.fatal() or error.name() in STOP_ERRORS:
            fail(f"topic {self.args.topic!r}: {error.str()} ({error.name()})")
        elif error.str() not in self.warned:
            self.warned.add(error.str())
            print(f"martlet: warning: {error.str()}", file=sys.stderr)

    # -- committing --

    def commit(self, partitions: Iterable[int] | None = None) -> None:
        """Commits the offsets after what was printed (all, or of `partitions`) when in a group."""
        self.last_commit = time.monotonic()
        if self.args.group is None or not self.args.commit:
            return
        chosen = self.reading.printed.keys() if partitions is None else set(partitions) & self.reading.printed.keys()
        offsets = [TopicPartition(self.args.topic, p, self.reading.printed[p]) for p in sorted(chosen)
                   if self.committed.get(p) != self.reading.printed[p]]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            raise kafka_failed(error.args[0], {}, f"group {self.args.group!r}: cannot commit") from None
        self.committed.update((tp.partition, tp.offset) for tp in offsets)


def _start(args: argparse.Namespace, low: int, high: int, at_time: int | None, default: int | None) -> int | None:
    """The offset a start option names in a partition of watermarks `low`, `high`; `default` without one.
    In a group, --from-beginning is only where to start without a committed offset (auto.offset.reset)."""
    if args.from_beginning:
        return low if args.group is None else default
    if args.from_end:
        return high
    if args.offset is not None:
        return max(low, high + args.offset) if args.offset < 0 else args.offset
    if args.from_timestamp is not None:
        return high if at_time is None or at_time < 0 else at_time
    return default


def _message(record: KafkaMessage) -> Message:
    kind, timestamp = record.timestamp()
    return Message(topic=str(record.topic()), partition=int(record.partition() or 0), offset=int(record.offset() or 0),
                   timestamp=None if kind == TIMESTAMP_NOT_AVAILABLE else int(timestamp),
                   key=_bytes(record.key()), value=_bytes(record.value()), headers=_headers(record.headers()))


def _bytes(data: Any) -> bytes | None:
    if data is None:
        return None
    return data.encode() if isinstance(data, str) else bytes(data)


def _headers(headers: Any) -> Headers:
    """A consumed record's headers: librdkafka gives a list of (name, bytes or None)."""
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    return tuple((str(name), _bytes(value)) for name, value in pairs)


def _renderer(args: argparse.Namespace) -> Render:
    name = args.format or ("json" if args.output == "json" else "raw")
    try:
        return renderer(name, args.key, unescape(args.key_separator).encode())
    except FormatError as error:
        raise Failed(str(error), USAGE) from None


def _consumer_settings(args: argparse.Namespace) -> dict[str, object]:
    return {"group.id": args.group or GROUPLESS_ID, "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            "allow.auto.create.topics": False, "log_level": 0}


def _check(args: argparse.Namespace, partitions: list[int]) -> list[int]:
    """The partitions to read: all, or those of --partition, which must exist."""
    if args.count is not None and args.count < 1:
        fail("--count must be at least 1", USAGE)
    if not args.partition:
        return partitions
    missing = sorted(set(args.partition) - set(partitions))
    if missing:
        fail(f"topic {args.topic!r} has no partition {', '.join(map(str, missing))} (it has {len(partitions)})")
    return sorted(set(args.partition))


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C (SIGINT) during the block takes effect once it is done: a record printed and
    then interrupted before it was marked would not be committed, and a later member of the
    group would print it again."""
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def _bar_shown(args: argparse.Namespace, total: int | None) -> bool:
    if args.progress is not None:
        return bool(args.progress)
    return total is not None and sys.stderr.isatty() and not sys.stdout.isatty()


def consume(args: argparse.Namespace) -> int:
    render = _renderer(args)
    consumer = Consumer(kafka_config(args, **_consumer_settings(args)))
    session = Session(consumer, args, render)
    code = 0
    try:
        partitions = _check(args, topic_partitions(consumer, args.topic, args))
        if args.group is not None and not args.partition:
            consumer.subscribe([args.topic], on_assign=session.on_assign, on_revoke=session.on_revoke)
            total = None
        else:
            total = session.assign(partitions)
        total = args.count if args.count is not None else (None if args.follow else total)
        with ProgressBar(_bar_shown(args, total), f"consuming {args.topic}", total) as bar:
            session.loop(bar)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # the reader of standard output went away (| head): a normal end
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        _close(session)
    print(f"consumed {session.count} record{'' if session.count == 1 else 's'} from {args.topic}", file=sys.stderr)
    return code


def _close(session: Session) -> None:
    try:
        session.commit()
    finally:
        session.consumer.close()
