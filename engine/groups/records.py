"""Group membership as a coordinator machine (engine/coordinator): the last membership record
of every group in a shard, and the record kinds that carry them (their payloads are in
membership.py, inside the coordinator's {"v":1,"type":T,"group":G, ...} object).

A group's record is independent of its offsets (engine/offsets): deleting a group's offsets
does not touch its record, nor does a `group_gone` record touch its offsets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..coordinator.checks import is_text, require
from ..coordinator.machine import Body, Kind, Machine
from .membership import ClassicGroupRecord, ConsumerGroupRecord, GroupGone, GroupRecord, MembershipChange, fields_of
from .membership import parse as parse_fields

NAME = "membership"
RECORD_OVERHEAD_BYTES = 128  # batch header and framing, beyond the payload


class MembershipState:
    def __init__(self) -> None:
        self.by_group: dict[str, tuple[GroupRecord, int]] = {}  # group -> (record, its encoded size)
        self.live_bytes = 0

    def copy(self) -> MembershipState:
        twin = MembershipState()
        twin.by_group = dict(self.by_group)
        twin.live_bytes = self.live_bytes
        return twin

    def apply(self, record: object) -> None:
        if not isinstance(record, (ClassicGroupRecord, ConsumerGroupRecord, GroupGone)):
            raise TypeError(f"not a membership record: {record!r}")
        old = self.by_group.pop(record.group_id, None)
        if old is not None:
            self.live_bytes -= old[1]
        if not isinstance(record, GroupGone):
            size = len(_KIND_OF[type(record)].payload(record)) + RECORD_OVERHEAD_BYTES
            self.by_group[record.group_id] = (record, size)
            self.live_bytes += size

    def records(self) -> Iterator[GroupRecord]:
        """Every group's record, by group id."""
        for group_id in sorted(self.by_group):
            yield self.by_group[group_id][0]

    def get(self, group_id: str) -> GroupRecord | None:
        entry = self.by_group.get(group_id)
        return None if entry is None else entry[0]

    def change(self, change: MembershipChange, pending: Sequence[object] = ()) -> MembershipChange | None:
        """The record to write, or None when the log already ends with it for this group (the
        last pending record, else the applied one); a group never recorded needs no GroupGone."""
        queued = [record for record in pending if isinstance(record, (ClassicGroupRecord, ConsumerGroupRecord, GroupGone))]
        latest: MembershipChange | None = queued[-1] if queued else self.get(change.group_id)
        if isinstance(change, GroupGone):
            return None if latest is None or isinstance(latest, GroupGone) else change
        return None if change == latest else change


def _kind(name: str, record_type: type[MembershipChange]) -> Kind[MembershipChange]:
    def parse(body: Body) -> MembershipChange:
        change = parse_fields(name, body["group"], body)
        assert change is not None
        return change

    def check(record: MembershipChange) -> None:
        require(isinstance(record, record_type), f"not a {name} record: {record!r}")
        require(is_text(record.group_id), "group id must be a str")

    return Kind(name, record_type, lambda r: r.group_id, lambda r: {"group": r.group_id, **fields_of(r)[1]},
                parse, check)


KINDS = (_kind("classic_group", ClassicGroupRecord), _kind("consumer_group", ConsumerGroupRecord),
         _kind("group_gone", GroupGone))
_KIND_OF = {kind.type: kind for kind in KINDS}
MACHINE = Machine(NAME, KINDS, MembershipState)
