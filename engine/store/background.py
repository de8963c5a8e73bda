"""One store call on a daemon thread of its own, for calls that may wait long (an HDFS close
waits about half a second for the NameNode) or forever (a call stuck in an outage): not a
pool's thread, which could be far behind, and a daemon, so a stuck call never keeps the
process from exiting."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future


def in_background(call: Callable[[], None], name: str) -> Future[None]:
    """Start `call`; its result or error is handed to whoever waits on the future."""
    done: Future[None] = Future()

    def run() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits
            done.set_exception(error)
        else:
            done.set_result(None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done
