"""Topic names and resource names.

A topic's resource name is `owner#name#uuid` (as in Talos): the uuid is new every time a
topic is created, so a deleted and re-created topic is a different resource. Names use
the characters [A-Za-z0-9._-], at most 249 of them, and are neither "." nor "..", so every
name is also a safe file name and never contains the `#` separator. The uuid comes from an
injected `new_uuid` (uuid4 unless a test passes its own).

RESERVED holds the names of Kafka's internal topics, whose data Martlet keeps in stores of
its own (committed offsets in the group shards, later transaction state): no topic is ever
created under them, so the gateway can show them as Kafka does (gateway/internal_topics.py).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidName
from ..ids import RandomIds

NAME_CHARS_MAX = 249
_LEGAL = re.compile(r"[A-Za-z0-9._-]+")
RESERVED = frozenset({"__consumer_offsets", "__transaction_state"})


def check_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise InvalidName(f"topic name {name!r} is not allowed")
    if len(name) > NAME_CHARS_MAX:
        raise InvalidName(f"topic name is {len(name)} characters long; the limit is {NAME_CHARS_MAX}")
    if not _LEGAL.fullmatch(name):
        raise InvalidName(f"topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'")


def check_owner(owner: str) -> None:
    if not owner or not _LEGAL.fullmatch(owner):
        raise InvalidName(f"owner {owner!r} may only contain ASCII letters, digits, '.', '_' and '-'")


@dataclass(frozen=True, slots=True)
class ResourceName:
    owner: str
    name: str
    uid: uuid.UUID

    @classmethod
    def new(cls, owner: str, name: str, new_uuid: Callable[[], uuid.UUID] | None = None) -> ResourceName:
        check_owner(owner)
        check_name(name)
        return cls(owner, name, (new_uuid or RandomIds().uuid)())

    @classmethod
    def parse(cls, text: str) -> ResourceName:
        parts = text.split("#")
        if len(parts) != 3:
            raise InvalidName(f"resource name {text!r} is not owner#name#uuid")
        check_owner(parts[0])
        check_name(parts[1])
        return cls(parts[0], parts[1], uuid.UUID(parts[2]))

    def __str__(self) -> str:
        return f"{self.owner}#{self.name}#{self.uid}"
