"""OffsetDelete's question, "which topics does the group subscribe to?": classic members'
metadata stays opaque to the engine and is read by the caller's decoder."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from martlet.engine.groups.types import GroupError, JoinRequest
from tests.support.coordinator import close_groups
from tests.support.group_engine import Catalog, G, facade, join


def decoder(seen: list[bytes]) -> Callable[[bytes], list[str]]:
    def decode(metadata: bytes) -> list[str]:
        seen.append(metadata)
        return ["orders", "payments"] if metadata == b"opaque subscription" else []
    return decode


def test_classic_members_metadata_is_decoded_by_the_caller():
    async def scenario():
        groups, seen = facade(), []
        request = JoinRequest(G, "", None, "consumer", (("range", b"opaque subscription"),), 10_000, 10_000, False)
        assert (await groups.join(request)).error is GroupError.NONE
        assert groups.subscribed_topics(G, decoder(seen)) == {"orders", "payments"}
        assert seen == [b"opaque subscription"]
        await close_groups(groups)

    asyncio.run(scenario())


def test_consumer_protocol_groups_need_no_decoding():
    async def scenario():
        groups, catalog, seen = facade(), Catalog(t=1), []
        await groups.consumer_heartbeat(join("a", topics=("t",)), catalog.lookup())
        assert groups.subscribed_topics(G, decoder(seen)) == {"t"}
        assert seen == []
        await close_groups(groups)

    asyncio.run(scenario())
