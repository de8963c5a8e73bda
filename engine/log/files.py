"""Names of the files in a partition directory, and small atomic checkpoint files.

`checkpoint` is the broker's published C for readers in other processes (reader.py): one
line "<C> <LSO>\n" in decimal, replaced atomically (write temp, rename), so a reader sees
the old line or the new one. LSO (last stable offset) equals C until transactions exist.
A missing file means nothing is published yet: C = 0.
"""

from ..store import Store, join
from ..store.atomic import read_whole, write_atomically

OFFSET_DIGITS = 20
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
PRODUCERS_SUFFIX = ".producers"
TMP_SUFFIX = ".tmp"  # what store.atomic.write_atomically writes first
START_OFFSET_FILE = "start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
CHECKPOINT_FILE = "checkpoint"
CHECKPOINT_BYTES_MAX = 64  # two i64 in decimal, a space and a newline fit with room to spare


def offset_file(directory: str, offset: int, suffix: str) -> str:
    """e.g. offset_file("t-0", 42, ".log") == "t-0/00000000000000000042.log"."""
    return join(directory, f"{offset:0{OFFSET_DIGITS}d}{suffix}")


def offsets_with_suffix(store: Store, directory: str, suffix: str) -> list[int]:
    """Sorted offsets of the files named <20 digits><suffix> in `directory`."""
    names = (name[: -len(suffix)] for name in store.list(directory) if name.endswith(suffix))
    return sorted(int(stem) for stem in names if len(stem) == OFFSET_DIGITS and stem.isdigit())


def write_start_offset(store: Store, directory: str, offset: int) -> None:
    write_atomically(store, join(directory, START_OFFSET_FILE), b"%d\n" % offset)


def read_start_offset(store: Store, directory: str) -> int:
    """The checkpointed log start offset, 0 if none or unreadable (segments bound it anyway)."""
    path = join(directory, START_OFFSET_FILE)
    if not store.exists(path):
        return 0
    text = read_whole(store, path).strip()
    return int(text) if text.isdigit() else 0


def write_published(store: Store, directory: str, checkpoint: int, last_stable: int) -> None:
    assert 0 <= last_stable <= checkpoint, f"LSO {last_stable} must lie in [0, C={checkpoint}]"
    write_atomically(store, join(directory, CHECKPOINT_FILE), b"%d %d\n" % (checkpoint, last_stable))


def read_published(store: Store, directory: str) -> tuple[int, int] | None:
    """(C, LSO) as last published, None if nothing is. One read call (not size, then read),
    so a file replaced meanwhile is still read whole; ValueError if the line is not valid."""
    try:
        data = store.read(join(directory, CHECKPOINT_FILE), 0, CHECKPOINT_BYTES_MAX)
    except FileNotFoundError:
        return None
    fields = data.split(b" ")
    if not data.endswith(b"\n") or len(fields) != 2 or not all(f.strip().isdigit() for f in fields):
        raise ValueError(f"{directory}/{CHECKPOINT_FILE} holds {data[:CHECKPOINT_BYTES_MAX]!r}, not '<C> <LSO>'")
    checkpoint, last_stable = int(fields[0]), int(fields[1])
    if last_stable > checkpoint:
        raise ValueError(f"{directory}/{CHECKPOINT_FILE}: LSO {last_stable} above C {checkpoint}")
    return checkpoint, last_stable
