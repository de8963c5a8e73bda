"""The broker's CPU time per small request, in-process (issue 47): `python -m martlet.compat.bench.request_cost`.

A real `Broker` (broker/app.py) on the embedded default (a temporary data directory, the
local store) is started on this process's event loop (uvloop, as `martlet serve`), two
topics of one partition are created, and pre-encoded request frames go straight into
`Dispatcher.handle` in a loop: no sockets, so what is measured is decoding, the handler, the
engine and encoding, not server.py. Kinds, each the request a librdkafka client sends:

- produce: Produce v9, acks=1, one batch of 10 keyless records of 100 B (uncompressed), to
  the first topic;
- fetch: Fetch v12 as a caught-up consumer sends it (read_committed, librdkafka's default;
  max_wait 500 ms, min_bytes 1) from the second topic, which holds one such batch, at its
  offset: the answer holds those 10 records and comes at once;
- fetch-uncommitted: the same, read_uncommitted (the Java consumer's default);
- metadata: Metadata v12 for the first topic.

Each kind is warmed up; then the kinds take turns, a block of `requests` requests each per
repeat, so that a stretch when the machine runs slow lands on all of them alike. A figure is
the process CPU time of a block (every thread: the persister's and the readers' work counts)
over its requests: the median over the repeats, and the best. Between requests the loop runs
once (`asyncio.sleep(0)`), so that work a request leaves to the loop is done and counted, as
it would be between two requests from a socket; that loop turn is measured on its own
("harness") and taken off every figure. CPU time, not wall time, so another process busy on
the machine does not count; but on a virtual machine the same work can take 1.5-2x the CPU
time for seconds at a time (a shared core), so beside every repeat a fixed piece of
pure-Python work is timed too ("reference"): a median far above its best says the run
was slowed, and then the best figures are the ones to compare.

`--idle-us N` blocks the loop's thread N µs after every request (the harness's block too), as
a broker waits in epoll for the next request of a client with one request in flight: each
request then runs cold (caches, branch predictors), which is what such a client costs. On a
2-core VM at 200 µs: Produce 97 µs against 42 hot, Metadata 39 against 16 (issue 47).

The versions are ones every Martlet since 6b2b952 (December 1) serves, and the script leans
only on what has existed since then (`Broker`, `Server.dispatcher`, `Dispatcher.handle`,
`codec.build`, `codec.request_type`, kio), with a small copy where a newer helper
(`codec.encode_request`, `records.build`) is missing, so it can be copied out and run
against an older tree when bisecting (PYTHONPATH naming a directory whose `martlet` is
that tree).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from kio.serial import entity_reader, entity_writer

import martlet.gateway
from martlet.broker.app import Broker
from martlet.broker.config import ServeConfig
from martlet.protocol.codec import Peer, build, request_type, response_type

PRODUCE, FETCH, METADATA, CREATE_TOPICS = 0, 1, 3, 19
PRODUCE_VERSION, FETCH_VERSION, METADATA_VERSION, CREATE_TOPICS_VERSION = 9, 12, 12, 5
KINDS = ("produce", "fetch", "fetch-uncommitted", "metadata")
TOPIC = "request-cost"  # produced to and described
READ_TOPIC = "request-cost-read"  # holds the one batch fetched
RECORDS_PER_BATCH = 10
RECORD_BYTES = 100
CLIENT_ID = "request-cost"
CLIENT = Peer("/127.0.0.1")
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
FETCH_MAX_WAIT_MS = 500  # librdkafka's fetch.wait.max.ms
VISIBLE_S = 10.0  # the longest the produced batches may take to become readable
HARNESS = "harness"  # the loop turn between requests, measured with a handler that does nothing
REFERENCE_STEPS = 10_000
REQUESTS = 500
REPEATS = 20
WARMUP = 500
GUARD_MARGIN = 0.25  # --check fails above the recorded figure by more than this
Handle = Callable[[bytes | bytearray], Awaitable[Any]]


@dataclasses.dataclass
class Figure:
    """One kind's cost in CPU µs per request, the harness's loop turn taken off."""

    cpu_us: float  # process CPU (all threads): the median over the repeats
    best_us: float  # process CPU: the lowest repeat (the machine at its fastest)
    loop_thread_us: float  # the event loop's thread only: the median over the repeats
    samples_us: list[float]  # process CPU of each repeat


@dataclasses.dataclass
class Measured:
    figures: dict[str, Figure]
    harness_us: float  # the loop turn taken off every figure (median)
    reference_us: float  # CPU µs of _reference(REFERENCE_STEPS): median over the repeats
    reference_best_us: float  # and the lowest; a median well above it says the machine ran slow
    reference_samples_us: list[float]  # of each repeat, taken right after its requests


# -- frames


def _encode_request(body: Any, correlation_id: int) -> bytes:
    """A request frame without its size prefix (what Dispatcher.handle takes)."""
    try:
        from martlet.protocol.codec import encode_request
    except ImportError:  # before 2592001 (December 2) the codec wrote no requests
        return kio_request(body, correlation_id)
    return encode_request(body, correlation_id, CLIENT_ID)[4:]


def kio_request(body: Any, correlation_id: int) -> bytes:
    """What codec.encode_request writes, without the size prefix (for trees older than it)."""
    cls: Any = type(body)
    header_cls = cls.__header_schema__
    header = header_cls(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                        correlation_id=correlation_id, client_id=CLIENT_ID)
    out = io.BytesIO()
    entity_writer(header_cls)(out, header)
    entity_writer(cls)(out, body)
    return out.getvalue()


def decode_answer(buffers: Sequence[Any], api_key: int, version: int) -> Any:
    """The kio response entity of an answer as Dispatcher.handle returns it (size-prefixed buffers)."""
    frame = b"".join(buffers)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4, "answer frame size"
    cls: Any = response_type(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(frame, 4)  # a kio reader returns (value, bytes read)
    body, _ = entity_reader(cls)(frame, 4 + used)
    return body


def record_batch(count: int = RECORDS_PER_BATCH, value_bytes: int = RECORD_BYTES) -> bytes:
    """A magic v2 batch of `count` keyless records of `value_bytes` each, as a producer sends it."""
    return batch_of([os.urandom(value_bytes) for _ in range(count)], int(time.time() * 1000))


def batch_of(values: Sequence[bytes], timestamp_ms: int) -> bytes:
    gateway = os.path.dirname(os.path.dirname(os.path.abspath(martlet.gateway.__file__)))
    if not os.path.isdir(os.path.join(gateway, "records")):  # before records/ (December 1); not another tree's
        return hand_built_batch(values, timestamp_ms)
    from martlet.records.build import NewRecord, build_batch

    return bytes(build_batch([NewRecord(None, value, timestamp_ms) for value in values]))


def hand_built_batch(values: Sequence[bytes], timestamp_ms: int) -> bytes:
    """The batch records/build.py makes of keyless `values` (for trees older than it)."""
    import crc32c

    def varint(value: int) -> bytes:
        zigzag, out = (value << 1) ^ (value >> 63), bytearray()
        while zigzag >= 0x80:
            out.append(zigzag & 0x7F | 0x80)
            zigzag >>= 7
        out.append(zigzag)
        return bytes(out)

    records = b""
    for delta, value in enumerate(values):
        fields = b"\0" + varint(0) + varint(delta) + varint(-1) + varint(len(value)) + value + varint(0)
        records += varint(len(fields)) + fields
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, timestamp_ms, timestamp_ms, -1, -1, -1,
                            len(values)) + records
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc32c.crc32c(after_crc)) + after_crc


def produce_frame(topic: str, batch: bytes, acks: int = 1) -> bytes:
    body = build(request_type(PRODUCE, PRODUCE_VERSION), {
        "transactional_id": None, "acks": acks, "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return _encode_request(body, 1)


def fetch_frame(topic: str, offset: int, isolation_level: int) -> bytes:
    body = build(request_type(FETCH, FETCH_VERSION), {
        "cluster_id": None, "replica_id": -1, "max_wait": FETCH_MAX_WAIT_MS, "min_bytes": 1,
        "max_bytes": 52_428_800, "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1_048_576}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return _encode_request(body, 2)


def metadata_frame(topic: str) -> bytes:
    body = build(request_type(METADATA, METADATA_VERSION), {
        "topics": [{"name": topic}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    return _encode_request(body, 3)


def create_topic_frame(topic: str) -> bytes:
    body = build(request_type(CREATE_TOPICS, CREATE_TOPICS_VERSION), {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout": 30_000, "validate_only": False})
    return _encode_request(body, 4)


# -- the broker


@contextlib.asynccontextmanager
async def running_broker(data_dir: str) -> AsyncIterator[Broker]:
    """A broker on `data_dir` with Kafka on an ephemeral loopback port and no HTTP port."""
    config = ServeConfig(data_dir=data_dir)
    config = dataclasses.replace(config, gateway=dataclasses.replace(config.gateway, listen_host="127.0.0.1",
                                                                     listen_port=0))
    if any(f.name == "http_listen" for f in dataclasses.fields(config)):
        config = dataclasses.replace(config, http_listen="")
    broker = Broker(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def _handler(broker: Broker) -> Handle:
    assert broker.server is not None
    dispatcher = broker.server.dispatcher

    def handle(frame: bytes | bytearray) -> Awaitable[Any]:
        return dispatcher.handle(frame, CLIENT)

    return handle


async def _nothing(frame: bytes | bytearray) -> None:
    return None


def _reference(steps: int) -> None:
    """A fixed piece of pure-Python work: its CPU time shows how fast the machine ran meanwhile."""
    table: dict[int, str] = {}
    for step in range(steps):
        table[step % 100] = str(step)


async def _time(handle: Handle, frame: bytearray, requests: int, idle_s: float = 0.0) -> tuple[float, float]:
    """(process CPU s, loop thread CPU s) of `requests` requests, one loop turn after each,
    and with `idle_s` the loop's thread blocked that long after each too (see --idle-us)."""
    sleep = asyncio.sleep
    cpu, thread = time.process_time(), time.thread_time()
    for _ in range(requests):
        await handle(frame)
        await sleep(0)
        if idle_s:
            time.sleep(idle_s)  # blocks the thread, as the loop waits for a client's next request
    return time.process_time() - cpu, time.thread_time() - thread


async def _produced_offset(handle: Handle, frame: bytes) -> int:
    """Produce once, check the answer, and return the batch's base offset."""
    answer = decode_answer(await handle(frame), PRODUCE, PRODUCE_VERSION)
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code == 0, f"produce answered {partition.error_code!r}"
    return int(partition.base_offset)


async def _wait_readable(handle: Handle, frame: bytes) -> None:
    """Until the fetch in `frame` answers records (the batch is below the high watermark)."""
    deadline = time.monotonic() + VISIBLE_S
    while True:
        answer = decode_answer(await handle(frame), FETCH, FETCH_VERSION)
        partition = answer.responses[0].partitions[0]
        assert partition.error_code == 0, f"fetch answered {partition.error_code!r}"
        if partition.records:
            return
        assert time.monotonic() < deadline, f"the produced batch is not readable after {VISIBLE_S} s"
        await asyncio.sleep(0.01)


async def _check_metadata(handle: Handle, frame: bytes) -> None:
    answer = decode_answer(await handle(frame), METADATA, METADATA_VERSION)
    assert answer.topics[0].error_code == 0 and len(answer.topics[0].partitions) == 1, f"metadata answered {answer}"


async def _create_topic(handle: Handle, name: str) -> None:
    created = decode_answer(await handle(create_topic_frame(name)), CREATE_TOPICS, CREATE_TOPICS_VERSION)
    assert created.topics[0].error_code == 0, f"create topic answered {created.topics[0]}"


async def _frames(handle: Handle, kinds: Sequence[str]) -> dict[str, bytes]:
    """The frame of each kind, with the topics they need made and the batch to fetch readable."""
    await _create_topic(handle, TOPIC)
    await _create_topic(handle, READ_TOPIC)
    offset = await _produced_offset(handle, produce_frame(READ_TOPIC, record_batch()))
    frames = {"produce": produce_frame(TOPIC, record_batch()),
              "fetch": fetch_frame(READ_TOPIC, offset, READ_COMMITTED),
              "fetch-uncommitted": fetch_frame(READ_TOPIC, offset, READ_UNCOMMITTED),
              "metadata": metadata_frame(TOPIC)}
    await _wait_readable(handle, frames["fetch"])
    await _check_metadata(handle, frames["metadata"])
    return {kind: frames[kind] for kind in kinds}


async def measure(kinds: Sequence[str] = KINDS, requests: int = REQUESTS, repeats: int = REPEATS,
                  warmup: int = WARMUP, idle_s: float = 0.0) -> Measured:
    """Every kind's figures. The kinds take turns, one block of `requests` each per repeat,
    so that a minute when the machine runs slow lands on all of them alike."""
    unknown = set(kinds) - set(KINDS)
    assert not unknown, f"unknown kinds {sorted(unknown)}"
    samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in (*kinds, HARNESS)}
    reference: list[float] = []
    with tempfile.TemporaryDirectory(prefix="request-cost-") as temporary:
        async with running_broker(os.path.join(temporary, "data")) as broker:
            handle = _handler(broker)
            blocks: dict[str, tuple[Handle, bytearray]] = {
                kind: (handle, bytearray(frame)) for kind, frame in (await _frames(handle, kinds)).items()}
            blocks[HARNESS] = (_nothing, bytearray())  # the server hands the dispatcher a bytearray
            for block_handle, frame in blocks.values():
                await _time(block_handle, frame, warmup)
            for _ in range(repeats):
                for kind, (block_handle, frame) in blocks.items():
                    cpu_s, thread_s = await _time(block_handle, frame, requests, idle_s)
                    samples[kind].append((cpu_s / requests * 1e6, thread_s / requests * 1e6))
                started = time.process_time()
                _reference(REFERENCE_STEPS)
                reference.append((time.process_time() - started) * 1e6)
    return _figures(samples, reference)


def _figures(samples: dict[str, list[tuple[float, float]]], reference: list[float]) -> Measured:
    harness = samples.pop(HARNESS)
    harness_cpu = statistics.median(cpu for cpu, _ in harness)
    harness_thread = statistics.median(thread for _, thread in harness)
    figures = {}
    for kind, pairs in samples.items():
        cpu = [value - harness_cpu for value, _ in pairs]
        figures[kind] = Figure(statistics.median(cpu), min(cpu),
                               statistics.median(thread for _, thread in pairs) - harness_thread, cpu)
    return Measured(figures, harness_cpu, statistics.median(reference), min(reference), reference)


def _revision() -> str | None:
    """The commit of the tree the broker was imported from, when it is a git work tree."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(martlet.gateway.__file__)))
    try:
        done = subprocess.run(["git", "-C", folder, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=False)
    except OSError:
        return None
    return done.stdout.strip() or None


def to_json(measured: Measured, requests: int, repeats: int) -> dict[str, Any]:
    return {"revision": _revision(), "source": os.path.dirname(os.path.abspath(martlet.gateway.__file__)),
            "python": sys.version.split()[0], "requests": requests, "repeats": repeats,
            "harness_us": round(measured.harness_us, 2), "reference_us": round(measured.reference_us, 1),
            "reference_best_us": round(measured.reference_best_us, 1),
            "reference_samples_us": [round(s, 1) for s in measured.reference_samples_us],
            "per_reference": {kind: round(value, 5) for kind, value in per_reference(measured).items()},
            "kinds": {kind: {"cpu_us": round(f.cpu_us, 2), "best_us": round(f.best_us, 2),
                             "loop_thread_us": round(f.loop_thread_us, 2),
                             "samples_us": [round(s, 2) for s in f.samples_us]}
                      for kind, f in measured.figures.items()}}


def report(measured: Measured) -> str:
    lines = [f"{'request':<18} {'CPU µs':>7} {'best':>7} {'loop thread':>12} {'repeats':>16}"]
    for kind, figure in measured.figures.items():
        spread = f"{min(figure.samples_us):.1f}..{max(figure.samples_us):.1f}"
        lines.append(f"{kind:<18} {figure.cpu_us:>7.1f} {figure.best_us:>7.1f} {figure.loop_thread_us:>12.1f} {spread:>16}")
    lines.append(f"CPU µs: process CPU per request, median of the repeats (best: the lowest), the harness's "
                 f"loop turn ({measured.harness_us:.2f} µs) taken off")
    lines.append(f"reference work: {measured.reference_us:.0f} µs median, {measured.reference_best_us:.0f} µs best "
                 f"(a median far above the best: the machine ran slow for part of the run)")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m martlet.compat.bench.request_cost",
                                     description="The broker's CPU µs per small Produce, Fetch and Metadata request, "
                                                 "in-process through Dispatcher.handle (issue 47).")
    parser.add_argument("--requests", type=int, default=REQUESTS, help=f"requests per repeat (default {REQUESTS})")
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"repeats per kind (default {REPEATS})")
    parser.add_argument("--warmup", type=int, default=WARMUP, help=f"requests before timing (default {WARMUP})")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"which to measure (default {','.join(KINDS)})")
    parser.add_argument("--idle-us", type=float, default=0.0,
                        help="block the loop's thread this long after each request (the harness too, so it "
                             "is taken off): a request then runs cold, as one from a client with one request in "
                             "flight does; the guard measures hot (default 0)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures there as JSON")
    parser.add_argument("--check", metavar="BASELINE",
                        help="exit 1 if a kind's CPU per request, in units of the reference work, is more than "
                             f"{GUARD_MARGIN * 100:.0f}%% above the one recorded there (the CI guard)")
    return parser


def per_reference(measured: Measured) -> dict[str, float]:
    """Each kind's CPU per request in units of the reference work: the median over the repeats
    of (the kind's figure / the reference timed right after it). A machine that runs slow, or
    a slower machine, slows both, so CI machines can be held to one recorded figure."""
    reference = measured.reference_samples_us
    return {kind: statistics.median(sample / ref for sample, ref in zip(figure.samples_us, reference, strict=True))
            for kind, figure in measured.figures.items()}


def check(measured: Measured, baseline: dict[str, Any]) -> list[str]:
    """What is more than GUARD_MARGIN above the baseline's figures (empty: all within)."""
    found = per_reference(measured)
    failures = []
    for kind, recorded in baseline["per_reference"].items():
        if kind in found and found[kind] > recorded * (1 + GUARD_MARGIN):
            failures.append(f"{kind}: {found[kind]:.5f} reference units per request, {found[kind] / recorded:.2f}x the "
                            f"recorded {recorded:.5f} (a margin of {GUARD_MARGIN:.0%} is allowed)")
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    kinds = [kind for kind in args.kinds.split(",") if kind]
    with contextlib.suppress(ImportError):  # as `martlet serve`
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    measured = asyncio.run(measure(kinds, args.requests, args.repeats, args.warmup, args.idle_us / 1e6))
    print(report(measured))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(to_json(measured, args.requests, args.repeats), out, indent=2)
            out.write("\n")
    if args.check:
        with open(args.check) as recorded:
            failures = check(measured, json.load(recorded))
        found = per_reference(measured)
        print("per reference work: " + ", ".join(f"{kind} {value:.5f}" for kind, value in found.items()))
        for failure in failures:
            print(f"more CPU per request than recorded: {failure}")
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
