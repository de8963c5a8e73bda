"""The manual clock that engine tests drive instead of waiting."""

import asyncio

from martlet.engine.clock import ManualClock


def test_timers_fire_in_due_order_each_at_its_due_time():
    clock = ManualClock(1_000)
    fired = []
    clock.call_later(0.5, lambda: fired.append(("b", clock.now_ms())))
    clock.call_later(0.2, lambda: fired.append(("a", clock.now_ms())))
    cancelled = clock.call_later(0.3, lambda: fired.append(("never", clock.now_ms())))
    cancelled.cancel()
    assert clock.pending_ms() == [200, 500]
    clock.advance(199)
    assert fired == []
    clock.advance(400)
    assert fired == [("a", 1_200), ("b", 1_500)] and clock.now_ms() == 1_599
    assert clock.monotonic() == 1.599 and clock.pending_ms() == []


def test_a_timer_armed_by_a_firing_timer_fires_in_the_same_advance_when_due():
    clock = ManualClock()
    fired = []
    clock.call_later(0.1, lambda: clock.call_later(0.1, lambda: fired.append(clock.now_ms())))
    clock.advance(250)
    assert fired == [200]


def test_next_timer_waits_for_a_soon_timer_and_leaves_far_ones():
    async def scenario():
        clock = ManualClock()
        fired = []
        clock.call_later(30, lambda: fired.append("watchdog"))
        asyncio.get_running_loop().call_soon(lambda: clock.call_later(0.05, lambda: fired.append("retry")))
        assert await asyncio.wait_for(clock.next_timer(within_ms=1000), 5) == 50
        assert fired == ["retry"] and clock.pending_ms() == [29_950]

    asyncio.run(scenario())


def test_sleep_moves_the_clock():
    clock = ManualClock()
    clock.sleep(0.5)
    assert clock.now_ms() == 500
