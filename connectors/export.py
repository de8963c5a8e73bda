"""`martlet export TOPIC --to DIR|hdfs://...`: a topic's committed records to Parquet,
incrementally.

Files are laid out by partition and hour (of the record's timestamp, UTC), one file per
partition, hour and run:

    <to>/<topic>/partition=<p>/hour=<YYYY-MM-DD-HH>/part-<first offset>-<last offset>.parquet

so Spark, pyarrow.dataset and Hive-style readers see `partition` and `hour` as columns.
`<to>/<topic>/_export.json` remembers, per partition, the next offset to export and the
topic's resource name (a topic deleted and created again under its name is another topic:
the export refuses to mix them). Each file is written whole under a temporary name and
renamed into place; the state moves after the files of a run are in place. A run that dies
between the two leaves files past the remembered offset, which the next run deletes before
it writes: a record is never exported twice, and never skipped.

On HDFS a broker's unfinished block shows only once it is finished: when the segment rolls,
or the partition's writer closes (idle for hdfs_writer_idle_ms, or the broker stops). An
export of a live topic there stops where the store stops, says so, and the next run goes on.

Keys and values stay bytes, or are decoded (`--keys`/`--values utf8|json`): UTF-8 text, or
JSON parsed into Arrow types (pyarrow infers them per file). A record that does not decode
stops the export with its partition and offset; what was written of that partition's run is
deleted by the next run, as above.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import sys
from collections import defaultdict
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..engine.api import Store, Topic, errors, stored_topic
from .arrow import SCHEMA, Committed, Span, arrow_batches, open_store, span_end

STATE_FILE = "_export.json"
FILE_ROWS = 500_000  # rows gathered before they are written (memory holds about this many)
FORMATS = ("bytes", "utf8", "json")


class ExportError(Exception):
    """Why an export stopped, in words for its user."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        source = open_store(args.store)
        target = open_target(args.to)
        exported = export(source, args.topic, target, keys=args.keys, values=args.values,
                          progress=not args.quiet and sys.stderr.isatty())
    except (ExportError, errors.EngineError, OSError, ValueError) as error:
        print(f"martlet export: {error}", file=sys.stderr)
        return 1
    total = sum(exported.values())
    print(f"exported {total} records of {args.topic} "
          f"({', '.join(f'partition {p}: {n}' for p, n in sorted(exported.items()))}) to {args.to}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="martlet export",
                                     description="Write a topic's committed records to Parquet, by partition and "
                                                 "hour, going on from where the last export of it stopped.")
    parser.add_argument("topic")
    parser.add_argument("--to", required=True, metavar="DIR|hdfs://HOST:PORT/PATH", help="where the files go")
    parser.add_argument("--store", default="martlet-data", metavar="DIR|hdfs://HOST:PORT/PATH",
                        help="where the broker keeps its data: its --data-dir, or its --store (default: martlet-data)")
    parser.add_argument("--format", default="parquet", choices=["parquet"], help="file format (parquet)")
    parser.add_argument("--keys", default="bytes", choices=FORMATS, help="keys as bytes, UTF-8 text or JSON")
    parser.add_argument("--values", default="bytes", choices=FORMATS, help="values as bytes, UTF-8 text or JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def open_target(url: str) -> Store:
    """Where exported files go: `hdfs://host:port/path` or a folder."""
    return open_store(url, read_only=False)


def export(source: Store, name: str, target: Store, keys: str = "bytes", values: str = "bytes",
           progress: bool = False) -> dict[int, int]:
    """Export what is new of topic `name` from `source` into `target`; returns the records
    written per partition."""
    topic = stored_topic(source, name)
    state = _load_state(target, topic)
    written: dict[int, int] = {}
    short: dict[int, tuple[int, int]] = {}  # partitions the store did not show to their end yet
    spans = {}
    for partition in range(topic.partition_count):
        start, stable = span_end(source, topic, partition)
        spans[partition] = Span(partition, max(state.get(partition, 0), start), stable)
    with _Bar(progress, sum(max(0, (s.end or 0) - s.start) for s in spans.values())) as bar:
        for partition, span in spans.items():
            _drop_leftovers(target, topic.name, partition, state.get(partition, 0))
            read = Committed(source, topic, span)
            written[partition] = _export_partition(read, target, keys, values, bar)
            state[partition] = read.reached
            _save_state(target, topic, state)
            if read.reached < read.stable:
                short[partition] = (read.reached, read.stable)
    for partition, (reached, stable) in sorted(short.items()):
        print(f"martlet export: partition {partition} stopped at offset {reached} of {stable}: the store shows "
              f"no more yet (on HDFS, a segment's unfinished block shows once its broker finishes or rolls it); "
              f"the next export goes on from there", file=sys.stderr)
    return written


def _export_partition(read: Committed, target: Store, keys: str, values: str, bar: _Bar) -> int:
    topic, span = read.topic, read.span
    if span.end is None or span.start >= span.end:
        return 0
    by_hour: dict[str, list[pa.RecordBatch]] = defaultdict(list)
    done, count, gathered = span.start, 0, 0
    for batch in arrow_batches(read):
        batch = _decoded(batch, keys, values, span.partition)
        hours = pc.strftime(batch.column("timestamp"), format="%Y-%m-%d-%H")
        for hour in pc.unique(hours).to_pylist():
            by_hour[hour].append(batch.filter(pc.equal(hours, hour)))
        gathered += batch.num_rows
        if gathered >= FILE_ROWS:
            count += _write_hours(target, topic.name, span.partition, by_hour)
            gathered = 0
        last = batch.column("offset")[-1].as_py()
        bar.advance(last + 1 - done)
        done = last + 1
    bar.advance(span.end - done)
    return count + _write_hours(target, topic.name, span.partition, by_hour)


def _write_hours(target: Store, topic: str, partition: int, by_hour: dict[str, list[pa.RecordBatch]]) -> int:
    """Write what was gathered, a file per hour, and forget it; returns the rows written."""
    count = 0
    for hour, batches in sorted(by_hour.items()):
        table = pa.Table.from_batches(batches)
        offsets = table.column("offset")
        first, last = pc.min(offsets).as_py(), pc.max(offsets).as_py()
        _write_file(target, f"{topic}/partition={partition}/hour={hour}", f"part-{first}-{last}.parquet", table)
        count += table.num_rows
    by_hour.clear()
    return count


def _decoded(batch: pa.RecordBatch, keys: str, values: str, partition: int) -> pa.RecordBatch:
    columns = {name: batch.column(name) for name in batch.schema.names}
    for name, how in (("key", keys), ("value", values)):
        if how != "bytes":
            columns[name] = _decode(columns[name], how, batch.column("offset"), partition, name)
    return pa.RecordBatch.from_pydict(columns)


def _decode(column: pa.Array, how: str, offsets: pa.Array, partition: int, name: str) -> pa.Array:
    raw = column.to_pylist()
    decoded: list[object] = []
    for item, offset in zip(raw, offsets.to_pylist(), strict=True):
        if item is None:
            decoded.append(None)
            continue
        try:
            text = item.decode("utf-8")
            decoded.append(json.loads(text) if how == "json" else text)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ExportError(f"the {name} at partition {partition} offset {offset} is not {how}: {error}") from None
    return pa.array(decoded, pa.string()) if how == "utf8" else pa.array(decoded)


def _write_file(target: Store, directory: str, name: str, table: pa.Table) -> None:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    target.mkdir(directory)
    temporary, final = f"{directory}/.{name}.tmp", f"{directory}/{name}"
    file = target.open_append(temporary)
    try:
        file.write(buffer.getvalue())
        file.sync()
    finally:
        file.close()
    target.rename(temporary, final)


def _drop_leftovers(target: Store, topic: str, partition: int, exported_to: int) -> None:
    """Files a run wrote but never recorded (it died first): they start at or past the offset
    the state says comes next."""
    base = f"{topic}/partition={partition}"
    for hour in target.list(base):
        for name in target.list(f"{base}/{hour}"):
            if name.startswith(".") or (name.startswith("part-") and int(name.split("-")[1]) >= exported_to):
                target.delete(f"{base}/{hour}/{name}")


def _load_state(target: Store, topic: Topic) -> dict[int, int]:
    path = f"{topic.name}/{STATE_FILE}"
    if not target.exists(path):
        return {}
    doc = json.loads(target.read(path, 0, target.size(path)))
    if doc["resource"] != str(topic.resource):
        raise ExportError(f"{topic.name} was deleted and created again since the last export "
                          f"({doc['resource']} then, {topic.resource} now): export the new one elsewhere")
    return {int(p): int(offset) for p, offset in doc["next"].items()}


def _save_state(target: Store, topic: Topic, state: dict[int, int]) -> None:
    doc = {"resource": str(topic.resource), "next": {str(p): offset for p, offset in sorted(state.items())},
           "saved": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    target.mkdir(topic.name)
    path, temporary = f"{topic.name}/{STATE_FILE}", f"{topic.name}/.{STATE_FILE}.tmp"
    file = target.open_append(temporary)
    try:
        file.write(json.dumps(doc, indent=1).encode())
        file.sync()
    finally:
        file.close()
    target.rename(temporary, path)


class _Bar:
    """A progress bar over offsets, or nothing."""

    def __init__(self, shown: bool, total: int) -> None:
        self._progress = Progress(TextColumn("exporting"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn(), transient=True) if shown else None
        self._task = self._progress.add_task("export", total=total) if self._progress else None

    def __enter__(self) -> _Bar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, count: int) -> None:
        if self._progress is not None and self._task is not None and count > 0:
            self._progress.advance(self._task, count)


__all__ = ["SCHEMA", "export", "main"]
