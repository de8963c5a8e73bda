"""What a kind of coordinator state registers with the runtime: its record kinds and how to
make its state empty. The runtime keeps one state per machine in every shard, replays the
shard's records into them, and writes them back out when it compacts the shard's log.

A record kind names one record type: the payload's "type", the Python type, whose it is (the
key that routes it to a shard and orders its pending writes: a group id, a transactional id),
how it is written as JSON fields and read back, and the checks it must pass both ways.

A state is memory only and belongs to the event loop. It must be rebuilt exactly by applying
its records in log order from empty, and `records()` must give records that rebuild it.
`live_bytes` estimates the size of those records (it errs high), which decides when the
shard's log is compacted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, Self

FORMAT_VERSION = 1  # the payload's "v"


class State(Protocol):
    live_bytes: int

    def apply(self, record: Any) -> None: ...

    def records(self) -> Iterator[Any]: ...

    def copy(self) -> Self: ...


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # the payload's "type"
    type: type
    key: Callable[[Any], str]  # whose record it is: routes it to a shard
    fields: Callable[[Any], dict[str, Any]]  # the payload besides "v" and "type"
    parse: Callable[[dict[str, Any]], Any]  # KeyError, TypeError or ValueError if malformed
    check: Callable[[Any], None]  # ValueError unless the record keeps the invariants

    def payload(self, record: Any) -> bytes:
        """The record as compact UTF-8 JSON (no spaces, non-ASCII kept as is)."""
        self.check(record)
        body = {"v": FORMAT_VERSION, "type": self.name, **self.fields(record)}
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    kinds: tuple[Kind, ...]
    empty: Callable[[], State]
