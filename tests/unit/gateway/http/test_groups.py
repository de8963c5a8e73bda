"""A classic consumer's ConsumerProtocolAssignment bytes, read back as (topic, partition) pairs."""

import struct

from martlet.gateway.http.groups import assignment_partitions


def _assignment(topics: dict[str, list[int]], version: int = 1) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for name, partitions in topics.items():
        encoded = name.encode()
        out += struct.pack(">h", len(encoded)) + encoded + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)  # user data: null


def test_topics_and_partitions() -> None:
    data = _assignment({"a": [0, 2], "bé": [1]})
    assert assignment_partitions(data) == [("a", 0), ("a", 2), ("bé", 1)]


def test_bytes_that_are_not_an_assignment() -> None:
    assert assignment_partitions(b"") == []
    assert assignment_partitions(_assignment({"a": [0, 2]})[:-7]) == []
    assert assignment_partitions(struct.pack(">hi", 0, 0)) == []
