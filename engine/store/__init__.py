"""Storage backends: the Store interface plus local-disk and in-memory implementations."""

from .base import AppendFile, Store, join
from .local import LocalStore
from .memory import MemoryStore

__all__ = ["AppendFile", "LocalStore", "MemoryStore", "Store", "join"]
