"""How a handler declares what it serves: `@handles(ApiKey.X, min, max)` in its own module.

The declaration holds everything the dispatcher needs about one API: the versions served, the
handler, and where the API is read or written by hand instead of through kio, its codec.
`gateway/registry.py` collects the declarations; ApiVersions answers from the same table, so
what Martlet advertises is exactly what it serves. This module imports no handler, so
handlers and the registry form no import circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...protocol.apis import ApiKey
from ...protocol.codec import Peer, RequestHeader
from ...protocol.fetch_wire import Buffers

if TYPE_CHECKING:
    from ..context import Context

# The table holds handlers of every API, each typed with its own request and answer shape.
Handler = Callable[["Context", RequestHeader, Any], Awaitable[Any]]
Decode = Callable[[bytes | bytearray | memoryview, int, Peer], tuple[RequestHeader, Any]]
Encode = Callable[[RequestHeader, Any], bytes | Buffers]


@dataclass(frozen=True, slots=True)
class Codec:
    """A hand-written reader or writer for one API (kio reads and writes what these leave out)."""

    decode: Decode | None = None
    encode: Encode | None = None


@dataclass(frozen=True, slots=True)
class Api:
    key: ApiKey
    min_version: int
    max_version: int
    handler: Handler
    codec: Codec | None = None

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def handles(key: ApiKey, min_version: int, max_version: int,
            codec: Codec | None = None) -> Callable[[Handler], Api]:
    """Declare the decorated coroutine as the handler of `key` for these versions."""
    def declare(handler: Handler) -> Api:
        return Api(key, min_version, max_version, handler, codec)
    return declare
