"""A partition this node does not serve is answered NOT_LEADER_OR_FOLLOWER, as Kafka answers
a broker that is not the partition's leader; those it serves work as usual."""

from __future__ import annotations

import asyncio

from martlet.engine.api import EmbeddedCluster, Engine, EngineSettings, ManualClock, TopicPartition
from martlet.engine.store.memory import MemoryStore
from martlet.gateway.context import Context
from martlet.gateway.dispatch import Dispatcher
from martlet.gateway.protocol.codec import build, request_type
from martlet.gateway.registry import apis
from martlet.gateway.settings import GatewaySettings
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
