"""What the native SDK raises: one base class, a Kafka error code where the broker gave one."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class MartletError(Exception):
    """Something the broker refused or the client could not do."""


class Disconnected(MartletError):
    """The connection broke, or none could be made: whether a request in flight was taken is unknown."""


class BrokerError(MartletError):
    """The broker answered with an error code."""

    def __init__(self, code: int, message: str = "") -> None:
        self.code = ErrorCode(code)
        super().__init__(f"{self.code.name.upper()}" + (f": {message}" if message else ""))

    @property
    def retriable(self) -> bool:
        return bool(self.code.retriable)


def check(code: int, message: str | None = "") -> None:
    """Raise BrokerError unless `code` is NONE."""
    if code:
        raise BrokerError(code, message or "")
