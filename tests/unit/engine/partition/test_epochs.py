from martlet.engine.partition.epochs import UNDEFINED, EpochHistory
from martlet.engine.store.memory import MemoryStore


def test_sessions_count_up_and_answer_end_offsets_like_kafka():
    history = EpochHistory([])
    assert history.begin(0) == 0
    assert history.begin(10) == 1
    assert history.begin(25) == 2
    assert history.end_offset_for(2, 40) == (2, 40)
    assert history.end_offset_for(1, 40) == (1, 25)
    assert history.end_offset_for(0, 40) == (0, 10)
    assert history.end_offset_for(7, 40) == (UNDEFINED, UNDEFINED)


def test_a_session_that_wrote_nothing_is_forgotten_but_numbers_keep_rising():
    history = EpochHistory([])
    history.begin(0)
    history.begin(0)
    assert history.entries == [(1, 0)]
    assert history.begin(0) == 2


def test_history_persists():
    store = MemoryStore()
    history = EpochHistory([])
    history.begin(0)
    history.begin(5)
    history.save(store, "epochs")
    assert EpochHistory.load(store, "epochs").entries == [(0, 0), (1, 5)]
