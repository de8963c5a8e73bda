"""An in-memory broker for handler tests: Engine on MemoryStore, the real Dispatcher, no sockets.

`call` encodes a request with kio, runs it through `Dispatcher.handle` (decode, handler,
`build_response`, encode) and decodes the answer with kio, so every test also checks that
the handler's mapping fits the version asked for. Each call ends once everything produced is
persisted, so what a call wrote is visible to the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from martlet.engine.api import Hooks
from martlet.engine.clock import ManualClock
from martlet.engine.cluster import ClusterView
from martlet.engine.ids import CountingIds
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.base import Store
from martlet.engine.store.memory import MemoryStore
from martlet.gateway.broker_dynamic import topic_defaults
from martlet.gateway.context import Context
from martlet.gateway.dispatch import Dispatcher
from martlet.gateway.registry import apis
from martlet.gateway.settings import GatewaySettings
from martlet.protocol.codec import build, request_type
from tests.integration.raw_client import decode_response, encode_request, record_batch

NOW_MS = 1_700_000_000_000
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, ALTER_CONFIGS = 23, 32, 33
CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, API_VERSIONS = 37, 44, 18
CALL_S_MAX = 10.0  # a request still unanswered after this long fails the test instead of hanging it


class Broker:
    def __init__(self, store: Store | None = None, engine_settings: EngineSettings | None = None,
                 cluster: ClusterView | None = None, **settings: Any) -> None:
        engine_settings = engine_settings or EngineSettings(topic_partitions_max=64)
        self.engine = Engine(store or MemoryStore(), engine_settings, ManualClock(NOW_MS), cluster, CountingIds(),
                             Hooks(dynamic_changes=topic_defaults))
        self.loop = asyncio.new_event_loop()
        self.engine.open()
        self.loop.run_until_complete(self._start())
        self.ctx = Context.of(self.engine, GatewaySettings(**settings), "unit-cluster", apis())
        self.dispatcher = Dispatcher(self.ctx, apis())
        self._correlation_id = 0

    async def _start(self) -> None:
        self.engine.pool.bind(asyncio.get_running_loop())

    def close(self) -> None:
        # bounded in real time: the engine's own drain timeout runs on the manual clock
        self.loop.run_until_complete(asyncio.wait_for(self.engine.close(), CALL_S_MAX))
        self.loop.close()

    def request(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        """A kio request entity of (api_key, version), zero-filled where `body` is silent."""
        return build(request_type(api_key, version), body)

    def call(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        """The decoded kio response to the request, or None when the broker sends none."""
        self._correlation_id += 1
        raw = encode_request(self.request(api_key, version, body), self._correlation_id, "unit")
        answer = self.run(raw[4:])
        if answer is None:
            return None
        assert int.from_bytes(answer[:4], "big") == len(answer) - 4
        header, decoded = decode_response(answer[4:], api_key, version)
        assert header.correlation_id == self._correlation_id
        return decoded

    def run(self, frame: bytes) -> bytes | None:
        """Dispatch one request frame (no size prefix); the response frame or None."""
        answer = self.loop.run_until_complete(asyncio.wait_for(self.dispatcher.handle(frame), CALL_S_MAX))
        self.loop.run_until_complete(self.engine.flush())
        return None if answer is None else b"".join(answer)

    # -- shortcuts

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 1,
                 "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        answer = self.call(CREATE_TOPICS, 7, {"topics": [topic], "timeout": 1000})
        assert answer.topics[0].error_code == 0, answer.topics[0]

    def produce(self, topic: str, partition: int, batch: bytes, acks: int = -1, version: int = 9) -> Any:
        body = {"acks": acks, "timeout": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
        return self.call(PRODUCE, version, body)

    def append(self, topic: str, partition: int, values: Sequence[bytes],
               timestamps_ms: Sequence[int] | int = NOW_MS) -> int:
        """Produce one batch; return its base offset."""
        answer = self.produce(topic, partition, record_batch(values, timestamps_ms))
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0, result
        return result.base_offset

    def list_offset(self, topic: str, partition: int, timestamp: int) -> Any:
        body = {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                            "current_leader_epoch": -1}]}]}
        return self.call(LIST_OFFSETS, 7, body).topics[0].partitions[0]

    def topic_names(self) -> set[str]:
        """The topics Metadata lists, less the internal __consumer_offsets."""
        return {t.name for t in self.call(METADATA, 12, {"topics": None}).topics if not t.is_internal}
