"""The user store: each user's SCRAM credentials, kept as Kafka kept them in ZooKeeper
(/config/users/<name>: "SCRAM-SHA-256" -> "salt=...,stored_key=...,server_key=...,iterations=...").

They live with the dynamic configs (`Topics.dynamic`, scope "users/<name>"), so they are as
durable and as shared as those: in the catalog in the store, changed under the cluster's
topic lock, and every node re-reads them when told of a change (within a second). No
password is ever kept: a credential holds a salt and two keys derived from the salted
password (protocol/scram.py). SASL/PLAIN checks its password against the same credentials.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from ..engine.api import Dynamic, TopicsFace
from ..protocol.scram import HASHES, SCRAM_SHA_256, SCRAM_SHA_512, Credential

logger = logging.getLogger(__name__)

SCOPE = "users/"
MECHANISM_IDS = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}  # Kafka's ScramMechanism ids on the wire
IDS = {name: key for key, name in MECHANISM_IDS.items()}
Lookup = Callable[[str, str], Credential | None]  # (user, mechanism) -> the stored credential
# A password of a user without a credential is checked against this, so that the answer takes
# as long for a user that does not exist as for a wrong password (4096 rounds: Kafka's minimum).
_NOBODY = Credential.of_password(SCRAM_SHA_512, "", 4096, b"\0" * 32)


def names(dynamic: Dynamic) -> list[str]:
    """Every user with a credential, sorted."""
    return sorted(scope[len(SCOPE):] for scope, values in dynamic.items() if scope.startswith(SCOPE) and values)


def credentials(dynamic: Dynamic, user: str) -> dict[str, Credential]:
    """The user's credentials by mechanism (none: no such user)."""
    found = {}
    for mechanism, text in dynamic.get(SCOPE + user, {}).items():
        if mechanism not in HASHES:
            continue
        try:
            found[mechanism] = Credential.parse(mechanism, text)
        except ValueError:
            logger.warning("the stored %s credential of user %s is damaged: ignored", mechanism, user)
    return found


def credential(dynamic: Dynamic, user: str, mechanism: str) -> Credential | None:
    return credentials(dynamic, user).get(mechanism)


def lookup_in(topics: TopicsFace) -> Lookup:
    """The stored credentials as they stand at each call (SASL's and the HTTP port's logins)."""
    return lambda user, mechanism: credential(topics.dynamic, user, mechanism)


async def password_matches(lookup: Lookup, user: str, password: str) -> bool:
    """Whether `password` is the user's, checked against its SCRAM-SHA-512 (else SCRAM-SHA-256)
    credential off the event loop (PBKDF2's rounds): SASL/PLAIN's and the HTTP port's check."""
    stored = lookup(user, SCRAM_SHA_512) or lookup(user, SCRAM_SHA_256)
    matched = await asyncio.to_thread((stored or _NOBODY).matches, password)
    return stored is not None and matched


async def change(topics: TopicsFace, user: str, changes: Mapping[str, Credential | None]) -> None:
    """Set (a credential) or delete (None) the user's credentials of these mechanisms."""
    values = dict(topics.dynamic.get(SCOPE + user, {}))
    for mechanism, given in changes.items():
        if given is None:
            values.pop(mechanism, None)
        else:
            values[mechanism] = str(given)
    await topics.set_dynamic(SCOPE + user, values)
