from hypothesis import given
from hypothesis import strategies as st

from martlet.engine.catalog.ranges import SLOTS, initial_ranges, partition_of_slot, slot_of, split_for


def covers_every_slot_once(ranges):
    ordered = sorted(ranges)
    return ordered[0][0] == 0 and ordered[-1][1] == SLOTS and all(
        a[1] == b[0] for a, b in zip(ordered, ordered[1:])) and all(s < e for s, e in ranges)


@given(st.integers(1, 300), st.integers(0, 300))
def test_growing_keeps_a_partition_of_the_slot_space(start, extra):
    before = initial_ranges(start)
    after = split_for(before, start + extra)
    assert len(after) == start + extra
    assert covers_every_slot_once(after)
    for old, new in zip(before, after):
        assert old[0] == new[0] and new[1] <= old[1]  # existing partitions only shrink from the top


def test_keys_map_stably():
    ranges = initial_ranges(6)
    assert partition_of_slot(ranges, slot_of(b"k")) == partition_of_slot(ranges, slot_of(b"k"))
    assert partition_of_slot(ranges, 0) == 0 and partition_of_slot(ranges, SLOTS - 1) == 5
