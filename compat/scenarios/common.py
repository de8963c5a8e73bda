"""What every scenario shares: the endpoint context, expectations, record sets, and
bounded polling of group members.

A scenario is `fn(driver, ctx) -> observations`: it talks to the endpoint only through the
driver, raises AssertionError (through `expect`) when an expectation fails, and returns a
JSON-able dict of what it observed. Keys starting with "_" hold volatile values (ids,
broker-chosen timestamps, raw version tables): they are reported but never compared
between endpoints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..clients.base import Driver, Record

NONE = "NONE"
GROUP_POLL_S = 0.3  # one member's poll in a round; rounds repeat until a deadline


@dataclass
class Context:
    """One scenario run on one endpoint through one client. `prefix` is unique per run,
    endpoint and client, so names never collide and scenarios can run side by side."""

    bootstrap: str
    prefix: str
    scenario: str = ""
    topics: list[str] = field(default_factory=list)

    def name(self, what: str) -> str:
        return f"{self.prefix}-{self.scenario}-{what}".replace("_", "-")

    def topic(self, driver: Driver, what: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """Create a topic for the scenario (deleted when it ends); creating must succeed."""
        topic = self.name(what)
        error = driver.create_topic(topic, partitions, configs or {})
        expect(error == NONE, f"create topic {what} ({partitions} partitions, {configs or {}}): {error}")
        self.topics.append(topic)
        return topic


def expect(condition: bool, reason: str) -> None:
    if not condition:
        raise AssertionError(reason)


def expect_equal(actual: Any, expected: Any, what: str) -> None:
    expect(actual == expected, f"{what}: got {actual!r}, expected {expected!r}")


def records(count: int, tag: str, *, partition: int | None = 0, base_ts: int | None = None,
            headers: bool = True, value_bytes: int = 0) -> list[Record]:
    """`count` text records with keys, values, headers (some with a repeated name and an
    empty value) and explicit timestamps 10 ms apart when `base_ts` is given."""
    out: list[Record] = []
    for i in range(count):
        value = f"{tag}-value-{i:04d}|" + "x" * (value_bytes or (i * 7) % 50)
        record_headers = [["n", str(i)], ["dup", "a"], ["dup", ""]] if headers and i % 3 == 0 else []
        out.append({"key": f"{tag}-key-{i % 7}", "value": value, "headers": record_headers,
                    "timestamp": None if base_ts is None else base_ts + 10 * i, "partition": partition})
    return out


def essentials(record: Record, with_timestamp: bool = True) -> tuple[Any, ...]:
    """The parts of a record a round trip must keep."""
    headers = tuple(tuple(h) for h in record.get("headers") or [])
    return (record.get("key"), record.get("value"), headers,
            record.get("timestamp") if with_timestamp else None)


def produced_ok(answers: list[dict[str, Any]], what: str) -> list[int]:
    errors = [a["error"] for a in answers if a["error"] != NONE]
    expect(not errors, f"{what}: {len(errors)} of {len(answers)} records failed: {errors[:3]}")
    return [a["offset"] for a in answers]


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_for(check: Callable[[], Any], timeout_s: float, interval_s: float = 0.2) -> Any:
    """Call `check` until it returns something truthy or `timeout_s` passes; returns the
    last answer."""
    deadline = time.monotonic() + timeout_s
    answer = check()
    while not answer and time.monotonic() < deadline:
        time.sleep(interval_s)
        answer = check()
    return answer


@dataclass
class Member:
    handle: str
    assignment: list[list[Any]] = field(default_factory=list)
    revoked: int = 0
    records: list[Record] = field(default_factory=list)

    def partitions(self) -> list[int]:
        return sorted(p for _, p in self.assignment)


def poll_members(driver: Driver, members: list[Member], until: Callable[[], bool], timeout_s: float,
                 what: str) -> None:
    """Poll every member in turn (group rebalances need all of them polling) until `until()`
    holds; fail with `what` and the members' state at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        for member in members:
            answer = driver.member_poll(member.handle, GROUP_POLL_S)
            member.assignment = answer["assignment"]
            member.revoked = answer["revoked"]
            member.records += answer["records"]
        if until():
            return
        if time.monotonic() >= deadline:
            state = {m.handle: {"partitions": m.partitions(), "records": len(m.records), "revoked": m.revoked}
                     for m in members}
            raise AssertionError(f"{what}: not reached within {timeout_s:.0f}s; members: {state}")
