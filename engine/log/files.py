"""Names of the files in a partition directory, and small atomic checkpoint files."""

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
