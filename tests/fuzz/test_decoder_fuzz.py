"""Garbage, truncated and bit-flipped frames through framing, decoding and the handlers.

Every frame must end in a response, no response (acks=0), or a ProtocolError that closes
the connection; anything else is a Martlet bug. 100,000+ frames run in CI.
"""

from __future__ import annotations

import asyncio
import random

from kio.index import load_request_schema

from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore
from martlet.gateway.context import Context
from martlet.gateway.dispatch import Dispatcher
from martlet.gateway.registry import apis
from martlet.gateway.settings import GatewaySettings
from martlet.protocol.codec import ProtocolError, build
from martlet.protocol.framing import FrameError, FrameReader, frame
from tests.support.codec import encode_request

FRAMES = 100_000

SEEDS = [
    (3, 12, {"topics": [{"name": "fuzz"}], "allow_auto_topic_creation": False}),
    (18, 3, {"client_software_name": "f", "client_software_version": "1"}),
    (19, 7, {"topics": [{"name": "fuzz", "num_partitions": 2, "replication_factor": 1,
                         "configs": [{"name": "retention.ms", "value": "1000"}]}], "timeout": 1000}),
    (2, 7, {"replica_id": -1, "topics": [{"name": "fuzz", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
    (1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1000, "topics": [
        {"topic": "fuzz", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}]}]}),
    (32, 4, {"resources": [{"resource_type": 2, "resource_name": "fuzz"}]}),
    (23, 4, {"replica_id": -1, "topics": [{"topic": "fuzz", "partitions": [{"partition": 0, "leader_epoch": 0}]}]}),
]


def seed_frames() -> list[bytes]:
    return [encode_request(key, version, build(load_request_schema(key, version), body))
            for key, version, body in SEEDS]


def mutate(rng: random.Random, data: bytes) -> bytes:
    choice = rng.randrange(4)
    if choice == 0:
        return data[: rng.randrange(len(data) + 1)]
    if choice == 1:
        flipped = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return bytes(flipped)
    if choice == 2:
        return data[:4] + rng.randbytes(rng.randrange(64))
    return rng.randbytes(rng.randrange(2, 128))


async def run(count: int) -> dict[str, int]:
    engine = Engine(MemoryStore(), EngineSettings(topic_partitions_max=16))
    engine.open()
    dispatcher = Dispatcher(Context.of(engine, GatewaySettings(fetch_wait_ms_max=0), "fuzz", apis()), apis())
    rng = random.Random(20261129)
    seeds = seed_frames()
    outcomes = {"answered": 0, "silent": 0, "closed": 0}
    for _ in range(count):
        decoder = FrameReader(1 << 20)
        try:
            for whole in decoder.feed(frame(mutate(rng, rng.choice(seeds)))):
                answer = await dispatcher.handle(whole)
                outcomes["answered" if answer is not None else "silent"] += 1
        except (FrameError, ProtocolError):
            outcomes["closed"] += 1
    await engine.close()
    return outcomes


def test_no_frame_crashes_the_decoder_or_a_handler():
    outcomes = asyncio.run(run(FRAMES))
    assert sum(outcomes.values()) >= FRAMES * 0.99  # a truncated size prefix yields no frame at all
    assert outcomes["answered"] > 1000 and outcomes["closed"] > 1000
