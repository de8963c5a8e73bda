"""A child process that spends a known amount of CPU, for the bench's CPU accounting tests."""

from __future__ import annotations

import select
from typing import IO

SPIN_CPU_S = 0.3
WAIT_S = 30.0
# spins until it has used SPIN_CPU_S of CPU, prints "spun", then waits idle (alive) until its
# standard input ends
SPINNER = f"""
import sys, time
while time.process_time() < {SPIN_CPU_S}:
    pass
print("spun", flush=True)
sys.stdin.read()
"""


def wait_spun(stdout: IO[bytes]) -> None:
    """Until the spinner says it has spun (at most WAIT_S)."""
    ready, _, _ = select.select([stdout], [], [], WAIT_S)
    assert ready, f"the spinner did not spin {SPIN_CPU_S} CPU-s within {WAIT_S:.0f} s"
    assert stdout.readline().strip() == b"spun"
