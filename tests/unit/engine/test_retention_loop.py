"""A store error in one round of retention does not end the retention loop."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from martlet.engine.clock import ManualClock
from martlet.engine.service import Engine
from martlet.engine.settings import EngineSettings
from martlet.engine.store.memory import MemoryStore

WAIT_S = 10.0


def test_the_retention_loop_survives_a_failing_round() -> None:
    engine = Engine(MemoryStore(), replace(EngineSettings(), retention_check_ms=1), ManualClock(0))
    engine.open()
    rounds: list[int] = []
    third = asyncio.Event()

    async def flaky_round() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 3:
            third.set()
        if len(rounds) == 1:
            raise OSError("store is down")

    async def scenario() -> None:
        engine.retain = flaky_round  # type: ignore[method-assign]
        engine.start_background()
        await third.wait()  # the loop went on after the first round failed
        await engine.close()

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S))
    assert rounds[:3] == [0, 1, 2]
