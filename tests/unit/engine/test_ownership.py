"""The ownership loop (engine/ownership.py): drops before it loads, what it publishes lets
the admin hand a unit on only once it is released, and a partition it opens is expected
(its produce requests wait) from before it is published until the load ends."""

import asyncio

from martlet.engine.ownership import Ownership
from martlet.engine.types import TopicPartition
from martlet.engine.zookeeper.layout import Assignment


class FakeTopics:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.release = asyncio.Event()
        self.failing: set[TopicPartition] = set()
        self.expected: set[TopicPartition] = set()

    def expect(self, tp: TopicPartition) -> None:
        self.events.append(f"expect {tp.topic}/{tp.partition}")
        self.expected.add(tp)

    def stop_expecting(self, tp: TopicPartition) -> None:
        self.expected.discard(tp)

    async def load(self, tp: TopicPartition) -> bool:
        if tp in self.failing:
            raise OSError("the store is down")
        self.events.append(f"load {tp.topic}/{tp.partition}")
        return True

    async def unload(self, tp: TopicPartition, drain_s: float) -> bool:
        self.events.append(f"unload {tp.topic}/{tp.partition}")
        await self.release.wait()
        self.events.append(f"released {tp.topic}/{tp.partition}")
        return True


class FakeCoordinator:
    def __init__(self) -> None:
        self.loaded: set[int] = set()

    async def load(self, number: int) -> None:
        self.loaded.add(number)

    async def drop(self, number: int) -> None:
        self.loaded.discard(number)


async def settle(ownership: Ownership, published: list, count: int) -> None:
    for _ in range(200):
        if len(published) >= count:
            return
        await asyncio.sleep(0.01)  # lets the ownership task run; bounded


def test_units_move_out_before_others_move_in_and_opening_or_releasing_units_count_as_held() -> None:
    async def run() -> None:
        topics, groups, published = FakeTopics(), FakeCoordinator(), []
        ownership = Ownership(topics, lambda: groups, lambda *state: published.append(state), retry_s=0.05)  # type: ignore[arg-type]
        ownership.follow(Assignment(1, frozenset({"t/0", "@offsets/3"})))
        await settle(ownership, published, 3)
        assert published[-1] == (frozenset({"t/0", "@offsets/3"}), frozenset(), frozenset(), 1)
        assert groups.loaded == {3}

        ownership.follow(Assignment(2, frozenset({"t/1"})))
        await settle(ownership, published, 4)
        serving, opening, releasing, epoch = published[-1]
        assert serving == frozenset() and epoch == 1
        assert opening == {"t/1"} and releasing == {"t/0", "@offsets/3"}  # still releasing t/0
        assert TopicPartition("t", 1) in topics.expected  # before it was published as opening
        assert "load t/1" not in topics.events
        topics.release.set()
        await settle(ownership, published, 6)
        assert published[-1] == (frozenset({"t/1"}), frozenset(), frozenset(), 2)
        assert topics.events.index("released t/0") < topics.events.index("load t/1")
        assert not topics.expected
        await ownership.close()

    asyncio.run(run())


def test_a_unit_that_fails_to_load_is_retried_and_not_held_meanwhile() -> None:
    async def run() -> None:
        topics, groups, published = FakeTopics(), FakeCoordinator(), []
        topics.failing.add(TopicPartition("t", 0))
        ownership = Ownership(topics, lambda: groups, lambda *state: published.append(state), retry_s=0.05)  # type: ignore[arg-type]
        ownership.follow(Assignment(1, frozenset({"t/0"})))
        await settle(ownership, published, 3)
        assert published[-1][0] == frozenset()
        assert not topics.expected  # its produce requests are refused until the retry
        topics.failing.clear()
        for _ in range(200):
            if published[-1][0] == {"t/0"}:
                break
            await asyncio.sleep(0.01)  # the retry comes after retry_s; bounded
        assert published[-1] == (frozenset({"t/0"}), frozenset(), frozenset(), 1)
        await ownership.close()

    asyncio.run(run())
