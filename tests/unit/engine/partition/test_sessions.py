from martlet.engine.partition.sessions import UNDEFINED, SessionHistory
from martlet.engine.store.atomic import write_atomically
from martlet.engine.store.memory import MemoryStore


def test_sessions_count_up_and_answer_end_offsets_like_kafka():
    history = SessionHistory([])
    assert history.begin(0) == 0
    assert history.begin(10) == 1
    assert history.begin(25) == 2
    assert history.end_offset_for(2, 40) == (2, 40)
    assert history.end_offset_for(1, 40) == (1, 25)
    assert history.end_offset_for(0, 40) == (0, 10)
    assert history.end_offset_for(7, 40) == (UNDEFINED, UNDEFINED)


def test_a_session_that_wrote_nothing_is_forgotten_but_numbers_keep_rising():
    history = SessionHistory([])
    history.begin(0)
    history.begin(0)
    assert history.entries == [(1, 0)]
    assert history.begin(0) == 2


def test_history_persists():
    store = MemoryStore()
    history = SessionHistory([])
    history.begin(0)
    history.begin(5)
    store.mkdir("p")
    history.save(store, "p")
    assert store.list("p") == ["sessions"]
    assert SessionHistory.load(store, "p").entries == [(0, 0), (1, 5)]


def test_a_data_dir_from_before_the_rename_keeps_its_sessions():
    store = MemoryStore()
    store.mkdir("p")
    write_atomically(store, "p/epochs", b"0 0\n3 7\n")
    history = SessionHistory.load(store, "p")
    assert history.entries == [(0, 0), (3, 7)]
    assert history.begin(9) == 4
    history.save(store, "p")
    assert store.list("p") == ["sessions"]
    assert SessionHistory.load(store, "p").entries == [(0, 0), (3, 7), (4, 9)]
