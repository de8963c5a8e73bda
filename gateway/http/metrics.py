"""GET /metrics: Prometheus text format, from one registry per broker (not the global one).

Nothing is a prometheus_client instrument on the hot path: the dispatcher and the engine keep
plain numbers (stats.py, engine/stats.py, the partitions' byte and record counts), and the
collector below turns them into metric families when /metrics is scraped, on the event loop
where those numbers live. Names and labels are listed in docs/http-api.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kio.schema.errors import ErrorCode
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ...engine.api import LatencyHistogram, TopicPartition, stuck_calls
from ...protocol.apis import ApiKey
from .parser import Request
from .response import Response
from .routes import Router
from .state import HttpState

PARTITION = ["topic", "partition"]


def api_name(api_key: int) -> str:
    """Kafka's name of an API ("Produce", "OffsetForLeaderEpoch")."""
    try:
        return "".join(word.title() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def error_name(code: int) -> str:
    """Kafka's name of an error code, as its Errors enum spells it ("NOT_LEADER_OR_FOLLOWER")."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


class Collector:
    def __init__(self, state: HttpState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield from self._build()
        yield from self._requests()
        yield from self._connections()
        yield from self._topics()
        yield from self._partitions()
        yield from self._memory_and_store()
        yield from self._groups()
        yield from self._udp()

    def _build(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("martlet_build_info", "Martlet's version, the cluster and this node (always 1)",
                                 labels=["version", "cluster_id", "node_id"])
        ctx = self.state.ctx
        info.add_metric([self.state.version, ctx.cluster_id, str(ctx.node_id)], 1)
        yield info

    def _requests(self) -> Iterator[Metric]:
        stats = self.state.requests
        requests = CounterMetricFamily("martlet_kafka_requests", "Kafka requests handled, by API", labels=["api"])
        latency = HistogramMetricFamily("martlet_kafka_request_duration_seconds",
                                        "Time from a decoded request to its answer, by API", labels=["api"])
        for api_key, histogram in sorted(stats.latency.items()):
            name = api_name(api_key)
            requests.add_metric([name], histogram.count)
            latency.add_metric([name], _buckets(histogram), histogram.total_s)
        errors = CounterMetricFamily("martlet_kafka_request_errors",
                                     "Error codes in answers (top-level, topic, partition entries), by API and error",
                                     labels=["api", "error"])
        for (api_key, code), count in sorted(stats.errors.items()):
            errors.add_metric([api_name(api_key), error_name(code)], count)
        yield from (requests, latency, errors)

    def _connections(self) -> Iterator[Metric]:
        open_now = GaugeMetricFamily("martlet_connections", "Open connections, by listener", labels=["listener"])
        accepted = CounterMetricFamily("martlet_connections_accepted", "Connections accepted since start, by listener",
                                       labels=["listener"])
        kafka = self.state.kafka_server
        http_open, http_accepted = self.state.http_connections()
        for listener, now, since in (("kafka", kafka.connection_count, kafka.accepted),
                                     ("http", http_open, http_accepted)):
            open_now.add_metric([listener], now)
            accepted.add_metric([listener], since)
        rejected = CounterMetricFamily("martlet_connections_rejected",
                                       "Kafka connections closed at once: their address had its max.connections.per.ip")
        rejected.add_metric([], kafka.rejected)
        buffers = GaugeMetricFamily("martlet_connection_buffer_bytes",
                                    "Memory Kafka connections hold for data: in (the shared read chunk, frames on their "
                                    "way in and read ahead), out (answers the sockets have not taken yet)",
                                    labels=["direction"])
        held_in, held_out = kafka.buffer_bytes()
        buffers.add_metric(["in"], held_in)
        buffers.add_metric(["out"], held_out)
        yield from (open_now, accepted, rejected, buffers)

    def _topics(self) -> Iterator[Metric]:
        partitions = self.state.ctx.partitions
        for name, counts, what in (("bytes_in", partitions.bytes_in, "Bytes of batches taken in"),
                                   ("bytes_out", partitions.bytes_out, "Bytes of batches handed to readers"),
                                   ("records_in", partitions.records_in, "Records taken in"),
                                   ("records_out", partitions.records_out, "Records handed to readers")):
            family = CounterMetricFamily(f"martlet_topic_{name}", f"{what} since start, by topic", labels=["topic"])
            for topic, total in sorted(_by_topic(counts).items()):
                family.add_metric([topic], total)
            yield family

    def _partitions(self) -> Iterator[Metric]:
        infos = sorted(self.state.ctx.partitions.infos().items())
        families = {
            "high_watermark": "Offset below which consumers read",
            "log_start_offset": "First offset still kept",
            "log_end_offset": "Next offset to assign",
            "checkpoint": "C: every offset below it is persisted",
            "checkpoint_lag_records": "Records taken in, not yet persisted (log end offset - C)",
            "unpersisted_bytes": "Bytes taken in, not yet persisted",
        }
        for name, help_text in families.items():
            family = GaugeMetricFamily(f"martlet_partition_{name}", help_text, labels=PARTITION)
            for tp, info in infos:
                values = {"high_watermark": info.high_watermark, "log_start_offset": info.start_offset,
                          "log_end_offset": info.end_offset, "checkpoint": info.checkpoint,
                          "checkpoint_lag_records": info.end_offset - info.checkpoint,
                          "unpersisted_bytes": info.unpersisted_bytes}
                family.add_metric([tp.topic, str(tp.partition)], values[name])
            yield family

    def _memory_and_store(self) -> Iterator[Metric]:
        used, budget = self.state.memory()
        yield GaugeMetricFamily("martlet_memory_used_bytes", "Memory pool in use: unpersisted and cached data", used)
        yield GaugeMetricFamily("martlet_memory_budget_bytes", "Memory pool budget ([engine] memory_bytes)", budget)
        stats = self.state.store_stats
        latency, failures = stats.snapshot()
        calls = HistogramMetricFamily("martlet_store_call_duration_seconds", "Store calls' latency, by operation",
                                      labels=["operation"])
        for operation, histogram in sorted(latency.items()):
            calls.add_metric([operation], _buckets(histogram), histogram.total_s)
        failed = CounterMetricFamily("martlet_store_call_failures", "Store calls that failed, by operation",
                                     labels=["operation"])
        for operation in sorted(latency):
            failed.add_metric([operation], failures.get(operation, 0))
        yield from (calls, failed)
        stuck = stuck_calls()
        yield GaugeMetricFamily("martlet_store_calls_stuck",
                                "Store calls abandoned past their deadline that have not returned yet", stuck.now)
        yield CounterMetricFamily("martlet_store_calls_abandoned", "Store calls abandoned past their deadline",
                                  stuck.abandoned_total)
        yield GaugeMetricFamily("martlet_store_healthy", "1 unless the latest call of some store operation failed",
                                int(stats.healthy))

    def _groups(self) -> Iterator[Metric]:
        ctx = self.state.ctx
        infos = ctx.partitions.infos()
        lag = GaugeMetricFamily("martlet_group_lag_records",
                                "High watermark - committed offset, by group and partition served here",
                                labels=["group", "topic", "partition"])
        for row in ctx.groups.listing():
            for tp, committed in sorted(ctx.groups.all_committed(row.group_id).items()):
                info = infos.get(tp)
                if info is not None:
                    lag.add_metric([row.group_id, tp.topic, str(tp.partition)],
                                   max(info.high_watermark - committed.offset, 0))
        yield lag

    def _udp(self) -> Iterator[Metric]:
        counters = self.state.udp
        if counters is None:
            return
        yield CounterMetricFamily("martlet_udp_datagrams_received", "UDP datagrams received", counters.received)
        outcomes = CounterMetricFamily("martlet_udp_datagrams", "UDP datagrams by outcome (gateway/udp.py)",
                                       labels=["outcome"])
        for outcome in counters.OUTCOMES:
            outcomes.add_metric([outcome], getattr(counters, outcome))
        yield outcomes
        yield CounterMetricFamily("martlet_udp_records", "Records of accepted UDP datagrams", counters.records)


def _buckets(histogram: LatencyHistogram) -> list[tuple[str, float]]:
    return [("+Inf" if bound == float("inf") else repr(bound), count) for bound, count in histogram.cumulative()]


def _by_topic(counts: Mapping[TopicPartition, int]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for tp, count in list(counts.items()):
        totals[tp.topic] = totals.get(tp.topic, 0) + count
    return totals


def registry_for(state: HttpState) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(state))
    return registry


def add_routes(router: Router, state: HttpState) -> None:
    registry = registry_for(state)

    async def metrics(_request: Request, _args: tuple[str, ...]) -> Response:
        return Response(200, generate_latest(registry), CONTENT_TYPE_LATEST)

    router.add("GET", "/metrics", metrics)
