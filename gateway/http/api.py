"""The JSON endpoints of /api/v1 (docs/http-api.md is the contract the
CLI and the web console read): status and topics. Each answer is built on the event loop from
the engine's memory; nothing here waits for the store except creating and deleting topics,
which make the engine calls Kafka's CreateTopics and DeleteTopics make (the same checks and
errors: a bad name, count or config is 400, an existing topic 409), bounded by DDL_TIMEOUT_S
(504 after it; the change goes on, as a timed-out Kafka change does), and another broker's
status, which this one fetches from that broker's HTTP port (brokers.py)."""

from __future__ import annotations

import json
import time

from ...engine.api import PartitionInfo, Topic, TopicPartition, errors, stuck_calls
from ..broker_dynamic import layers
from ..changes import DDL_TIMEOUT_S, TIMED_OUT, within
from ..internal_topics import INTERNAL_CONFIGS, change_message, internal_topic_id
from ..topic_configs import described, kafka_overrides, to_overrides
from .brokers import peer_status
from .parser import Request
from .response import HttpError, Json, Response, json_response
from .routes import Router
from .state import HttpState

TOPIC_PATH = r"/api/v1/topics/([^/]+)"
BROKER_STATUS_PATH = r"/api/v1/brokers/(\d{1,9})/status"  # another broker's status, fetched by this one (brokers.py)


def add_routes(router: Router, state: HttpState) -> None:
    async def status(_request: Request, _args: tuple[str, ...]) -> Response:
        return json_response(status_doc(state))

    async def topics(_request: Request, _args: tuple[str, ...]) -> Response:
        return json_response({"topics": topic_rows(state)})

    async def topic(_request: Request, args: tuple[str, ...]) -> Response:
        return json_response(topic_doc(state, args[0]))

    async def create(request: Request, _args: tuple[str, ...]) -> Response:
        name = await create_topic(state, json_body(request))
        return json_response(topic_doc(state, name), 201)

    async def delete(_request: Request, args: tuple[str, ...]) -> Response:
        await delete_topic(state, args[0])
        return json_response({"deleted": args[0]})

    async def broker_status(_request: Request, args: tuple[str, ...]) -> Response:
        node_id = int(args[0])
        return json_response(status_doc(state) if node_id == state.ctx.node_id else await peer_status(state, node_id))

    router.add("GET", "/api/v1/status", status)
    router.add("GET", BROKER_STATUS_PATH, broker_status)
    router.add("GET", "/api/v1/topics", topics)
    router.add("POST", "/api/v1/topics", create)
    router.add("GET", TOPIC_PATH, topic)
    router.add("DELETE", TOPIC_PATH, delete)


def json_body(request: Request) -> dict[str, object]:
    """The request's body as a JSON object; HttpError 400 for anything else."""
    try:
        doc: object = json.loads(request.body)
    except (UnicodeDecodeError, ValueError):
        raise HttpError(400, "the body is not JSON") from None
    if not isinstance(doc, dict):
        raise HttpError(400, "the body is not a JSON object")
    return doc


# -- status

def status_doc(state: HttpState) -> Json:
    ctx = state.ctx
    infos = ctx.partitions.infos()
    used, budget = state.memory()
    return {
        "version": state.version, "cluster_id": ctx.cluster_id, "node_id": ctx.node_id, "kafka": state.kafka,
        "brokers": broker_rows(state), "topics": sum(1 for _ in ctx.topics),
        "partitions": sum(topic.partition_count for topic in ctx.topics),
        "groups": len(ctx.groups.listing()), "connections": state.kafka_server.connection_count,
        "uptime_s": round(time.monotonic() - state.started_s, 3),
        "memory": {"used_bytes": used, "budget_bytes": budget},
        "store": {"kind": state.store_kind, "location": ctx.log_dir,
                  "healthy": state.store_stats.healthy,
                  "last_error": state.store_stats.last_error, "stuck_calls": stuck_calls().now,
                  "unpersisted_bytes": sum(info.unpersisted_bytes for info in infos.values())},
        "udp": None if state.udp is None else state.udp.as_json(),
    }


def broker_rows(state: HttpState) -> list[Json]:
    ctx = state.ctx
    led: dict[int, int] = {}
    for topic in ctx.topics:
        for index in range(topic.partition_count):
            leader = ctx.cluster.leader_of(topic.name, index)
            if leader is not None:
                led[leader.node_id] = led.get(leader.node_id, 0) + 1
    return [{"node_id": node.node_id, "host": node.host, "port": node.port,
             "http": node.http or (state.http if node.node_id == ctx.node_id else None), "partitions": led.get(node.node_id, 0)}
            for node in sorted(ctx.cluster.alive(), key=lambda node: node.node_id)]


# -- topics

def topic_rows(state: HttpState) -> list[Json]:
    ctx = state.ctx
    infos = ctx.partitions.infos()
    rows: list[Json] = []
    for topic in sorted(ctx.topics, key=lambda topic: topic.name):
        found = [infos.get(TopicPartition(topic.name, index)) for index in range(topic.partition_count)]
        records = sum(info.high_watermark - info.start_offset for info in found if info is not None)
        rows.append({"name": topic.name, "resource_name": str(topic.resource), "partitions": topic.partition_count,
                     "internal": False, "records": records})
    shards = ctx.groups.shard_count
    rows += [{"name": name, "resource_name": name, "partitions": shards, "internal": True, "records": 0}
             for name in sorted(INTERNAL_CONFIGS)]
    return rows


def topic_doc(state: HttpState, name: str) -> Json:
    ctx = state.ctx
    if name in INTERNAL_CONFIGS:
        return _internal_doc(state, name)
    topic = ctx.topics.find(name)
    if topic is None:
        raise HttpError(404, f"no topic named {name!r}")
    every = described(kafka_overrides(topic), ctx.topics.static_defaults, None, layers(ctx.topics.dynamic, ctx.node_id))
    configs = {entry.config.name: entry.value for entry in every}
    return {"name": topic.name, "resource_name": str(topic.resource), "topic_id": str(topic.resource.uid),
            "version": topic.version, "internal": False, "configs": configs,
            "partitions": partition_rows(state, topic)}


def partition_rows(state: HttpState, topic: Topic) -> list[Json]:
    ctx = state.ctx
    infos = ctx.partitions.infos()
    rows = []
    for index, (start, end) in enumerate(topic.ranges):  # slots [start, end): shown inclusive
        info = infos.get(TopicPartition(topic.name, index))
        leader = ctx.cluster.leader_of(topic.name, index)
        row: Json = {"partition": index, "slots": [start, end - 1], "leader": -1 if leader is None else leader.node_id,
                     "session": ctx.cluster.leader_epoch_of(topic.name, index)}
        rows.append(row | _offsets(info))
    return rows


# -- creating and deleting

async def create_topic(state: HttpState, doc: dict[str, object]) -> str:
    """Create the topic {"name", "partitions", "configs"} names; its name."""
    ctx = state.ctx
    name, count, configs = doc.get("name"), doc.get("partitions", ctx.settings.default_partitions), doc.get("configs", {})
    if not isinstance(name, str) or not name:
        raise HttpError(400, '"name" must be a topic name')
    if not isinstance(count, int) or isinstance(count, bool):
        raise HttpError(400, '"partitions" must be an integer')
    if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
        raise HttpError(400, '"configs" must map config names to strings')
    if name in INTERNAL_CONFIGS:
        raise HttpError(409, f"topic {name!r} already exists")
    try:
        await within(ctx.topics.create(name, count, to_overrides(configs)), DDL_TIMEOUT_S)
    except errors.TopicExists as error:
        raise HttpError(409, str(error)) from None
    except errors.EngineError as error:
        raise HttpError(400, str(error)) from None
    except TimeoutError:
        raise HttpError(504, TIMED_OUT) from None
    return name


async def delete_topic(state: HttpState, name: str) -> None:
    if name in INTERNAL_CONFIGS:
        raise HttpError(400, change_message(name))
    try:
        await within(state.ctx.topics.delete(name), DDL_TIMEOUT_S)
    except errors.UnknownTopic as error:
        raise HttpError(404, str(error)) from None
    except errors.EngineError as error:
        raise HttpError(400, str(error)) from None
    except TimeoutError:
        raise HttpError(504, TIMED_OUT) from None


def _offsets(info: PartitionInfo | None) -> Json:
    """A partition's offsets when this node serves it; in a cluster, another node's are null."""
    if info is None:
        return {"served": False, "log_start_offset": None, "high_watermark": None, "checkpoint": None,
                "unpersisted_bytes": None}
    return {"served": True, "session": info.session, "log_start_offset": info.start_offset,
            "high_watermark": info.high_watermark, "checkpoint": info.checkpoint, "end_offset": info.end_offset,
            "unpersisted_bytes": info.unpersisted_bytes}


def _internal_doc(state: HttpState, name: str) -> Json:
    """Martlet's coordinator shards as Kafka shows them (gateway/internal_topics.py): their
    records are Martlet's, so no offsets; each shard's leader is the node coordinating it."""
    ctx = state.ctx
    partitions: list[Json] = []
    for shard in range(ctx.groups.shard_count):
        owner = ctx.cluster.shard_owner(shard)
        partitions.append({"partition": shard, "slots": None, "leader": -1 if owner is None else owner.node_id,
                           "session": 0, "served": False, "log_start_offset": None, "high_watermark": None,
                           "checkpoint": None, "unpersisted_bytes": None})
    return {"name": name, "resource_name": name, "topic_id": str(internal_topic_id(ctx, name)), "version": 0,
            "internal": True, "configs": dict(INTERNAL_CONFIGS[name]), "partitions": partitions}
