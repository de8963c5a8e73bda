"""Property test: whatever reads come (in order or not, runs read ahead or not yet, blocks
dropped by the pool, the file growing or truncated), the block cache returns exactly what
the store holds."""

from hypothesis import given, settings
from hypothesis import strategies as st

from martlet.engine.store import MemoryStore
from martlet.engine.store.cache import CachedStore
from tests.support.stores import Deferred

BLOCK = 64


steps = st.lists(st.one_of(
    st.tuples(st.just("read"), st.integers(0, 4000), st.integers(1, 900)),
    st.tuples(st.just("run"), st.integers(0, 5), st.just(0)),
    st.tuples(st.just("drop"), st.integers(1, 20), st.just(0)),
    st.tuples(st.just("grow"), st.integers(1, 500), st.just(0)),
    st.tuples(st.just("truncate"), st.integers(0, 3000), st.just(0)),
), max_size=60)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 3000), steps=steps, ahead_bytes_max=st.sampled_from([BLOCK * 28, 1 << 20]))
def test_the_cache_reads_what_the_store_holds(size: int, steps: list[tuple[str, int, int]], ahead_bytes_max: int) -> None:
    store = MemoryStore()
    file = store.open_append("f.log")
    file.write(bytes(i % 251 for i in range(size)))
    background = Deferred()
    cache = CachedStore(store, block_bytes=BLOCK, read_ahead=background, ahead_bytes_max=ahead_bytes_max)
    for action, a, b in steps:
        if action == "read":
            assert cache.read("f.log", a, b) == store.read("f.log", a, b)
        elif action == "run":
            for _ in range(min(a, len(background.calls))):
                background.calls.pop(0)()
        elif action == "drop":
            for _ in range(a):
                cache.drop_oldest()
        elif action == "grow":
            file.write(bytes((size + i) % 7 for i in range(a)))
        else:
            cache.truncate("f.log", min(a, store.size("f.log")))
            file = store.open_append("f.log")
    for call in background.calls:  # runs still queued: stale or not, they leave the count sane
        call()
    while cache.drop_oldest():
        pass
    assert cache.bytes_held == 0
