"""A partition this node does not serve is answered NOT_LEADER_OR_FOLLOWER, as Kafka answers
a broker that is not the partition's leader; those it serves work as usual."""

from __future__ import annotations

import asyncio

from martlet.engine.api import EmbeddedCluster, Engine, EngineSettings, ManualClock, TopicPartition
from martlet.engine.store.memory import MemoryStore
from martlet.gateway.context import Context
from martlet.gateway.dispatch import Dispatcher
from martlet.gateway.registry import apis
from martlet.gateway.settings import GatewaySettings
from martlet.protocol.codec import build, request_type
from tests.integration.raw_client import decode_response, encode_request, record_batch
from tests.unit.gateway.handlers.harness import NOW_MS, PRODUCE

NOT_LEADER_OR_FOLLOWER = 6


class EvenPartitionsOnly(EmbeddedCluster):
    """A cluster view in which this node serves the even partitions; another node the rest."""

    def owns(self, topic: str, partition: int) -> bool:
        return partition % 2 == 0


def test_a_partition_served_elsewhere_is_not_leader_or_follower() -> None:
    engine = Engine(MemoryStore(), EngineSettings(), ManualClock(NOW_MS), cluster=EvenPartitionsOnly())
    engine.open()
    dispatcher = Dispatcher(Context.of(engine, GatewaySettings(), "unit", apis()), apis())

    async def scenario() -> list[int]:
        engine.pool.bind(asyncio.get_running_loop())
        await engine.topics.create("t", 2, {})
        assert engine.partitions.get_open(TopicPartition("t", 1)) is None  # never opened here
        body = {"acks": 1, "timeout": 1000, "transactional_id": None, "topic_data": [
            {"name": "t", "partition_data": [{"index": i, "records": record_batch([b"x"])} for i in (0, 1)]}]}
        frame = encode_request(build(request_type(PRODUCE, 9), body), 1, "unit")[4:]
        answer = await asyncio.wait_for(dispatcher.handle(frame), 10)
        assert answer is not None
        _, decoded = decode_response(b"".join(answer)[4:], PRODUCE, 9)
        await asyncio.wait_for(engine.close(), 10)
        return [p.error_code for p in decoded.responses[0].partition_responses]

    assert asyncio.run(scenario()) == [0, NOT_LEADER_OR_FOLLOWER]


def test_a_partition_being_opened_here_holds_its_produce_requests_until_it_is_open() -> None:
    """A cluster moving partition 1 here: its produce request waits for the open (a refusal
    followed by an acceptance on one connection would read as a sequence gap), and is
    answered NOT_LEADER_OR_FOLLOWER only if the open is given up."""
    engine = Engine(MemoryStore(), EngineSettings(), ManualClock(NOW_MS), cluster=EvenPartitionsOnly())
    engine.open()
    dispatcher = Dispatcher(Context.of(engine, GatewaySettings(), "unit", apis()), apis())
    moving = TopicPartition("t", 1)

    async def produce_to_1() -> int:
        body = {"acks": 1, "timeout": 5000, "transactional_id": None, "topic_data": [
            {"name": "t", "partition_data": [{"index": 1, "records": record_batch([b"x"])}]}]}
        answer = await dispatcher.handle(encode_request(build(request_type(PRODUCE, 9), body), 1, "unit")[4:])
        assert answer is not None
        _, decoded = decode_response(b"".join(answer)[4:], PRODUCE, 9)
        return int(decoded.responses[0].partition_responses[0].error_code)

    async def scenario() -> tuple[int, int]:
        engine.pool.bind(asyncio.get_running_loop())
        await engine.topics.create("t", 2, {})
        engine.topics.expect(moving)
        held = asyncio.ensure_future(produce_to_1())
        for _ in range(20):
            await asyncio.sleep(0)  # let the request run as far as it can
        assert not held.done()
        assert await engine.topics.load(moving)  # opened: the request goes on
        opened = await asyncio.wait_for(held, 10)

        engine.partitions.remove(moving).close()
        engine.topics.expect(moving)
        refused = asyncio.ensure_future(produce_to_1())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not refused.done()
        engine.topics.stop_expecting(moving)  # the open failed
        given_up = await asyncio.wait_for(refused, 10)
        await asyncio.wait_for(engine.close(), 10)
        return opened, given_up

    assert asyncio.run(scenario()) == (0, NOT_LEADER_OR_FOLLOWER)
