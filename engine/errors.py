"""Errors the engine raises, in the engine's own vocabulary.

A flat list of plain exception classes. The gateway maps them onto wire error codes in one
place (gateway/mapping.py); nothing here knows about any wire protocol.
"""


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class CorruptBatch(EngineError):
    """Batch bytes (from a caller or from disk) fail a structural or checksum check."""


class OffsetOutOfRange(EngineError):
    """An offset lies outside [start_offset, end_offset] of a log."""


class DuplicateBatch(EngineError):
    """A producer resent a batch already stored; `base_offset` is where the original lives."""

    def __init__(self, base_offset: int) -> None:
        super().__init__(f"duplicate of the batch stored at offset {base_offset}")
        self.base_offset = base_offset


class OutOfOrderSequence(EngineError):
    """A producer's batch does not continue its sequence numbers."""


class StaleProducerEpoch(EngineError):
    """A producer wrote with an epoch older than one already seen for its id."""


class CoordinatorFenced(EngineError):
    """A transaction marker carries a coordinator epoch older than the one of the last marker
    the partition took for its producer (Kafka's TRANSACTION_COORDINATOR_FENCED): a newer
    coordinator, or an admin's abort, ended that producer's transaction here already."""


class TransactionOpen(EngineError):
    """A producer with an open transaction in the partition wrote a batch outside it (one
    without the transactional bit)."""


class DataDirLocked(EngineError):
    """Another process holds the lock on a data directory."""


class InvalidName(EngineError):
    """A topic or owner name the engine does not allow."""


class TopicExists(EngineError):
    """A topic of that name already exists."""


class UnknownTopic(EngineError):
    """No topic of that name (or id)."""


class UnknownPartition(EngineError):
    """The topic has no partition of that index."""


class InvalidPartitionCount(EngineError):
    """A partition count below one, above the slot space, or a decrease."""


class InvalidConfig(EngineError):
    """A configuration name or value the engine does not accept."""


class StaleSession(EngineError):
    """A write named an old topic version V or partition session S. The current (V, S, C)
    come with it so the writer can resend everything above the checkpoint C."""

    def __init__(self, version: int, session: int, checkpoint: int) -> None:
        super().__init__(f"stale writer: the partition is now at version {version}, session {session}, "
                         f"checkpoint {checkpoint}")
        self.version = version
        self.session = session
        self.checkpoint = checkpoint


class OlderSession(EngineError):
    """A reader named a partition session S older than the current one (Kafka's leader epoch,
    KIP-320): the partition moved since it last looked."""


class NewerSession(EngineError):
    """A reader named a partition session S newer than this node's: this node is behind."""


class PartitionClosed(EngineError):
    """The partition was closed (topic deleted, broker stopping) while a caller waited."""


class Fenced(EngineError):
    """Another node took the partition over (it claimed a later session) while this one
    still held it: this node must stop using the partition's files."""


class NotServedHere(EngineError):
    """The partition (or coordinator) lives on another node of the cluster."""
