"""Topic names out of a classic consumer's JoinGroup protocol metadata.

Kafka consumers (protocol type "consumer") put a ConsumerProtocolSubscription in each
protocol's metadata. Every version (0-3) begins the same way, big-endian:

    int16 version | int32 topic count | count x (int16 length, UTF-8 topic name) | ...

and the fields after the topics (user data, owned partitions, rack) do not matter here. The
group coordinator keeps the metadata as opaque bytes; the gateway reads the topics when it
needs them (OffsetDelete must refuse topics a member subscribes to).
"""

from __future__ import annotations

import struct

_COUNT = struct.Struct(">i")
_LENGTH = struct.Struct(">h")
TOPICS_AT = 2  # after the int16 version


def subscription_topics(metadata: bytes) -> list[str]:
    """The subscribed topic names; [] for metadata that is not a subscription."""
    try:
        (count,) = _COUNT.unpack_from(metadata, TOPICS_AT)
        pos, names = TOPICS_AT + _COUNT.size, []
        for _ in range(max(count, 0)):
            (size,) = _LENGTH.unpack_from(metadata, pos)
            names.append(metadata[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
        return names
    except (struct.error, UnicodeDecodeError):
        return []
