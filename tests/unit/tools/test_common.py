"""tools/common.py: how a command ends when the reader of its output goes away; points in time
as milliseconds or ISO 8601."""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys

import pytest

from martlet.tools.common import timestamp_ms

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


@pytest.mark.parametrize(("text", "ms"), [
    ("1700000000000", 1_700_000_000_000),
    ("0", 0),
    ("2023-11-14T22:13:20Z", 1_700_000_000_000),
    ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
    ("2023-11-14 22:13:20.250+00:00", 1_700_000_000_250),
    ("2023-11-14T22:13:20.250Z", 1_700_000_000_250),
])
def test_a_time_is_milliseconds_or_iso_8601(text: str, ms: int) -> None:
    assert timestamp_ms(text) == ms


def test_a_time_without_a_zone_is_local_time() -> None:
    assert timestamp_ms("2023-11-14T22:13:20") == int(datetime.datetime(2023, 11, 14, 22, 13, 20).timestamp() * 1000)


@pytest.mark.parametrize("text", ["yesterday", "2023-13-01", "12:00", ""])
def test_other_times_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        timestamp_ms(text)
