"""What the Kafka side counts for /metrics, in plain Python: one histogram of handling time per
API (its count is the request count) and error codes per API. The dispatcher adds to these on
every request (a bisect and two additions, about a microsecond); the collector (metrics.py)
reads them at scrape time."""

from __future__ import annotations

import dataclasses
import typing

from ...engine.api import LatencyHistogram
from ...protocol.codec import response_type

ERROR_DEPTH_MAX = 4  # answers nest topics > partitions > fields; deeper lists are records

# Where an answer of one API version holds error codes: whether its own fields have an
# "error_code", and each field that is an array of entities, with the same for them.
Plan = tuple[bool, tuple[tuple[str, "Plan"], ...]]


class RequestStats:
    def __init__(self) -> None:
        self.latency: dict[int, LatencyHistogram] = {}  # by api key
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> answers carrying it
        self._plans: dict[tuple[int, int], Plan] = {}  # by (api key, version)

    def handled(self, api_key: int, version: int, seconds: float, answer: object) -> None:
        histogram = self.latency.get(api_key)
        if histogram is None:
            histogram = self.latency[api_key] = LatencyHistogram()
        histogram.observe(seconds)
        if isinstance(answer, dict):
            plan = self._plans.get((api_key, version))
            if plan is None:
                plan = self._plans[(api_key, version)] = _plan(response_type(api_key, version), 0)
            self._count_errors(api_key, answer, plan)

    def _count_errors(self, api_key: int, answer: dict[str, object], plan: Plan) -> None:
        """Every non-zero "error_code" in the answer where the API's response schema has one:
        the top-level one and those of topics, partitions, groups (each counts once). Only
        those fields are read (walking every value cost a fetch 1.5 us)."""
        has_error_code, arrays = plan
        if has_error_code:
            code = answer.get("error_code")
            if code:
                key = (api_key, int(code))  # type: ignore[call-overload]
                self.errors[key] = self.errors.get(key, 0) + 1
        for name, inner in arrays:
            items = answer.get(name)
            if isinstance(items, list):
                for item in items:
                    if isinstance(item, dict):
                        self._count_errors(api_key, item, inner)


def _plan(entity: type, depth: int) -> Plan:
    fields = dataclasses.fields(entity)
    arrays = []
    if depth < ERROR_DEPTH_MAX:
        for field in fields:
            inner = typing.get_args(field.type)
            if typing.get_origin(field.type) is tuple and inner and dataclasses.is_dataclass(inner[0]):
                arrays.append((field.name, _plan(typing.cast(type, inner[0]), depth + 1)))
    return any(field.name == "error_code" for field in fields), tuple(arrays)
