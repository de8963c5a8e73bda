"""Ending the JVM services started for tests (reference Kafka, reference HDFS).

Each service runs in its own session (start_new_session), so its pid is its process group
and a signal reaches every process it started.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path

_log = logging.getLogger(__name__)
KILL_WAIT_S = 30


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def end_process(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGCONT (it may be paused), SIGTERM its process group, wait, SIGKILL if needed."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGCONT, signal.SIGTERM):
        signal_group(proc, sig)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _log.warning("pid %d ignored SIGTERM; killing it", proc.pid)
        signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=KILL_WAIT_S)


def terminate(proc: subprocess.Popen[bytes], workdir: Path | None, timeout_s: float) -> None:
    """End the process, then remove its working folder."""
    try:
        end_process(proc, timeout_s)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


class PortTaken(Exception):
    """A service lost a race for the port picked for it; the caller retries on new ports."""
