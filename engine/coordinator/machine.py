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
from typing import Any, Generic, Protocol, Self, TypeVar

FORMAT_VERSION = 1  # the payload's "v"

# A JSON value as json.loads gives it, and a payload's object: dynamically typed until its
# kind's parse and check have read it (a malformed one is CorruptBatch, records.py).
Json = Any
Body = dict[str, Json]

R = TypeVar("R")  # a machine's records
S = TypeVar("S", bound="State", covariant=True)  # a machine's state


class State(Protocol):
    live_bytes: int

    def apply(self, record: object) -> None: ...  # one of the machine's own kinds (the registry routes it)

    def records(self) -> Iterator[object]: ...

    def copy(self) -> Self: ...


@dataclass(frozen=True, slots=True)
class Kind(Generic[R]):
    name: str  # the payload's "type"
    type: type[R]
    key: Callable[[R], str]  # whose record it is: routes it to a shard
    fields: Callable[[R], Body]  # the payload besides "v" and "type"
    parse: Callable[[Body], R]  # KeyError, TypeError or ValueError if malformed
    check: Callable[[R], None]  # ValueError unless the record keeps the invariants

    def payload(self, record: R) -> bytes:
        """The record as compact UTF-8 JSON (no spaces, non-ASCII kept as is)."""
        self.check(record)
        body = {"v": FORMAT_VERSION, "type": self.name, **self.fields(record)}
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Machine(Generic[S]):
    name: str
    kinds: tuple[Kind[Json], ...]
    empty: Callable[[], S]
