"""ConsumerProtocolSubscription topics, read by the gateway (the engine keeps the bytes opaque)."""

import struct

from martlet.protocol.subscription import subscription_topics


def subscription(version: int, topics: list[str], tail: bytes = b"") -> bytes:
    names = b"".join(struct.pack(">h", len(t.encode())) + t.encode() for t in topics)
    return struct.pack(">hi", version, len(topics)) + names + tail


def test_topics_of_every_version_ignore_what_follows_them():
    assert subscription_topics(subscription(0, ["a", "bé"])) == ["a", "bé"]
    user_data_and_owned = struct.pack(">i", 2) + b"ud" + struct.pack(">i", 0)
    assert subscription_topics(subscription(3, ["orders"], user_data_and_owned)) == ["orders"]


def test_metadata_that_is_not_a_subscription_names_no_topics():
    assert subscription_topics(b"") == []
    assert subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00\x01a") == []  # 5 topics promised, 1 present
    assert subscription_topics(subscription(0, ["a"])[:7]) == []  # cut inside a name length
    assert subscription_topics(struct.pack(">hih", 0, 1, 2) + b"\xff\xfe") == []  # not UTF-8
