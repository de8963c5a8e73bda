"""Letting a connection take its next request before this one is answered.

A connection handles its requests one at a time, as Kafka does, which keeps everything a
client sends in order. A produce request with acks=all spends most of its time waiting for
the checkpoint C (an hsync on HDFS), after everything that must happen in request order (its
appends) is done. While it waits, its connection may go on to the next request: the producer's
pipelined requests then join the same group commit instead of one commit each, and answers
still leave in request order (gateway/server.py). A handler says when it has reached that
point with `next_request_may_start()`; outside a connection (tests call handlers directly)
the call does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token

_release: ContextVar[Callable[[], None] | None] = ContextVar("martlet_release", default=None)


def next_request_may_start() -> None:
    release = _release.get()
    if release is not None:
        release()


def handled_with(release: Callable[[], None] | None) -> Token[Callable[[], None] | None]:
    """Called by the connection around the start of one request (`reset` it after)."""
    return _release.set(release)


def reset(token: Token[Callable[[], None] | None]) -> None:
    _release.reset(token)
