"""Session history of a physical partition.

Every load of a partition starts a new session S (Swift's partition session; the Kafka
gateway shows it as the leader epoch, which clients require to never go down). The history
records at which offset each session began, so a reader can ask where the data written in
an older session ends (Kafka's OffsetForLeaderEpoch, KIP-101/KIP-320).

File `sessions` in the partition's directory: one line per session, "<session> <start
offset>", ascending in both. Data dirs written before the name was settled call it `epochs`:
it is read when `sessions` is missing, and removed once `sessions` is written.

Claims fence a last owner that does not know it lost the partition (a node frozen past its
cluster session). A node taking a partition over first creates the empty file
`claim.<S>` for the session S it is about to start, and only then recovers the last owner's
files (HDFS lease recovery). A node that finds a claim above its own session has been taken
over: it must not open, repair or close the partition's files again (on HDFS opening them
would take the leases back from the new owner, and repairing would cut what it wrote).
"""

from __future__ import annotations

import bisect

from ..store.atomic import read_whole, write_atomically
from ..store.base import Store

UNDEFINED = -1
FILE = "sessions"
LEGACY_FILE = "epochs"
CLAIM_PREFIX = "claim."


def claim(store: Store, directory: str, session: int) -> None:
    """Mark the partition as taken over by `session`, before touching the last owner's
    files; older claims are removed (a claim that exists already was made by an open of
    the same session that failed)."""
    store.create_exclusive(f"{directory}/{CLAIM_PREFIX}{session}")
    for older in _claims(store, directory):
        if older < session:
            store.delete(f"{directory}/{CLAIM_PREFIX}{older}")


def claimed_after(store: Store, directory: str, session: int) -> bool:
    """True if a node claimed the partition for a session after `session`."""
    return any(claimed > session for claimed in _claims(store, directory))


def _claims(store: Store, directory: str) -> list[int]:
    return [int(name[len(CLAIM_PREFIX):]) for name in store.list(directory)
            if name.startswith(CLAIM_PREFIX) and name[len(CLAIM_PREFIX):].isdigit()]


class SessionHistory:
    def __init__(self, entries: list[tuple[int, int]]) -> None:
        self.entries = entries

    @classmethod
    def load(cls, store: Store, directory: str) -> SessionHistory:
        for name in (FILE, LEGACY_FILE):
            if store.exists(f"{directory}/{name}"):
                lines = read_whole(store, f"{directory}/{name}").decode().split("\n")
                return cls([(int(a), int(b)) for a, b in (line.split() for line in lines if line.strip())])
        return cls([])

    def save(self, store: Store, directory: str) -> None:
        write_atomically(store, f"{directory}/{FILE}", "".join(f"{s} {o}\n" for s, o in self.entries).encode())
        store.delete(f"{directory}/{LEGACY_FILE}")

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED

    def begin(self, start_offset: int) -> int:
        """Start the next session at `start_offset`; return its number."""
        session = self.latest + 1
        if self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()  # the previous session wrote nothing: no need to remember it
        self.entries.append((session, start_offset))
        return session

    def end_offset_for(self, session: int, log_end_offset: int) -> tuple[int, int]:
        """(session, end offset) of the newest session <= `session`, as Kafka answers it."""
        if session == UNDEFINED or not self.entries:
            return UNDEFINED, UNDEFINED
        if session == self.latest:
            return session, log_end_offset
        sessions = [e for e, _ in self.entries]
        higher = bisect.bisect_right(sessions, session)
        if higher == len(sessions):
            return UNDEFINED, UNDEFINED
        floor = sessions[higher - 1] if higher > 0 else session
        return floor, self.entries[higher][1]
