"""Session history of a physical partition.

Every load of a partition starts a new session S (Swift's partition session; the Kafka
gateway shows it as the leader epoch, which clients require to never go down). The history
records at which offset each session began, so a reader can ask where the data written in
an older session ends (Kafka's OffsetForLeaderEpoch, KIP-101/KIP-320).

File `sessions` in the partition's directory: one line per session, "<session> <start
offset>", ascending in both. Data dirs written before the name was settled call it `epochs`:
it is read when `sessions` is missing, and removed once `sessions` is written.
"""

from __future__ import annotations

import bisect

from ..store.atomic import read_whole, write_atomically
from ..store.base import Store

UNDEFINED = -1
FILE = "sessions"
LEGACY_FILE = "epochs"


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
