"""README.md's quickstart, run as written: each line of its shell block in bash, in order, with
the installed `martlet` command, against a fresh broker (MARTLET_BOOTSTRAP and MARTLET_HTTP
stand for the defaults the reader's `make run` broker has)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.martlet import MartletProcess

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
COMMAND_TIMEOUT_S = 60.0


def quickstart_lines() -> list[str]:
    section = README.read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "README.md's Quickstart has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_every_quickstart_line_works_and_the_records_come_back(
        martlet_process: Callable[..., MartletProcess]) -> None:
    broker = martlet_process()
    env = os.environ | {"MARTLET_BOOTSTRAP": broker.bootstrap, "MARTLET_HTTP": broker.http,
                        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = {}
    for line in quickstart_lines():
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, timeout=COMMAND_TIMEOUT_S)
        assert done.returncode == 0, f"{line!r} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        outputs[line.split("#")[0].strip()] = done.stdout.decode()
    consumed = next(out for line, out in outputs.items() if line.startswith("martlet consume"))
    assert sorted(consumed.split()) == sorted(["1", "2", "3", "4", "5", "hello"])
    group = subprocess.run(["martlet", "group", "describe", "readers", "--output", "json"], env=env,
                           capture_output=True, timeout=COMMAND_TIMEOUT_S, check=True)
    assert "readers" in json.dumps(json.loads(group.stdout))

