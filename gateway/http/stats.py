"""What the Kafka side counts for /metrics, in plain Python: one histogram of handling time per
API (its count is the request count) and error codes per API. The dispatcher adds to these on
every request (a bisect and two additions, about a microsecond); the collector (metrics.py)
reads them at scrape time."""

from __future__ import annotations

from ...engine.api import LatencyHistogram

ERROR_DEPTH_MAX = 4  # answers nest topics > partitions > fields; deeper lists are records


class RequestStats:
    def __init__(self) -> None:
        self.latency: dict[int, LatencyHistogram] = {}  # by api key
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> answers carrying it

    def handled(self, api_key: int, seconds: float, answer: object) -> None:
        histogram = self.latency.get(api_key)
        if histogram is None:
            histogram = self.latency[api_key] = LatencyHistogram()
        histogram.observe(seconds)
        if answer is not None:
            self._count_errors(api_key, answer, 0)

    def _count_errors(self, api_key: int, answer: object, depth: int) -> None:
        """Every non-zero "error_code" in the answer: the top-level one and those of topics,
        partitions, groups (each counts once)."""
        if isinstance(answer, dict):
            code = answer.get("error_code")
            if code:
                key = (api_key, int(code))
                self.errors[key] = self.errors.get(key, 0) + 1
            if depth < ERROR_DEPTH_MAX:
                for value in answer.values():
                    if isinstance(value, list) and value and isinstance(value[0], dict):
                        for item in value:
                            self._count_errors(api_key, item, depth + 1)
