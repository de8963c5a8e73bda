"""tools/common.py: how a command ends when the reader of its output goes away."""

from __future__ import annotations

import subprocess
import sys

RUN_TIMEOUT_S = 30.0

PRINTS_A_LOT = """
import argparse
from martlet.tools.common import run
def main(args):
    for _ in range(10_000):
        print("x" * 100)
    return 0
raise SystemExit(run(main, argparse.Namespace()))
"""


def test_a_reader_that_goes_away_is_a_normal_end() -> None:
    """`martlet topic list | head -1`: exit 0 and nothing on standard error (no BrokenPipeError)."""
    with subprocess.Popen([sys.executable, "-c", PRINTS_A_LOT], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline() == b"x" * 100 + b"\n"
        process.stdout.close()
        stderr = process.stderr.read()
        assert process.wait(RUN_TIMEOUT_S) == 0 and stderr == b""
