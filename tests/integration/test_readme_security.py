"""README.md's "Securing Martlet" walkthrough, run as written: its first block makes the
certificates and the config (ports swapped for free ones), the broker starts with that config,
and every line of its second block runs in bash in the same folder, the user's password given
on standard input where the README's reader types it twice."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from martlet.compat.reference.process import free_ports
from tests.fixtures.martlet import MartletProcess

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
COMMAND_TIMEOUT_S = 60.0
PASSWORD = "the password"  # the one the README's properties file names


def _blocks() -> list[str]:
    section = README.read_text().split("## Securing Martlet", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.*?)```", section, re.DOTALL)


def test_the_securing_walkthrough_works_as_written(tmp_path: Path) -> None:
    setup, use = _blocks()[:2]
    secured, local = free_ports(2)
    setup = setup.replace("9093", str(secured)).replace("9092", str(local))
    use = use.replace("9093", str(secured)).replace("9092", str(local))
    env = os.environ | {"MARTLET_BOOTSTRAP": f"127.0.0.1:{local}",
                        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    serve = next(line for line in setup.splitlines() if line.startswith("martlet serve"))
    made = subprocess.run(["bash", "-c", setup.replace(serve, "")], cwd=tmp_path, env=env, capture_output=True,
                          timeout=COMMAND_TIMEOUT_S)
    assert made.returncode == 0, made.stderr.decode(errors="replace")
    assert serve.split() == ["martlet", "serve", "--config", "secure.toml"]
    broker = MartletProcess(tmp_path / "data", ["--config", "secure.toml"], "off", listen=False, cwd=tmp_path)
    broker.start()
    try:
        for line in _commands(use):
            given = f"{PASSWORD}\n".encode() if line.startswith("martlet user create") else None
            if given is not None:
                line = line.split("#")[0].strip() + " --password-stdin"  # the terminal's two prompts
            done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, input=given, capture_output=True,
                                  timeout=COMMAND_TIMEOUT_S)
            assert done.returncode == 0, f"{line!r} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        listed = subprocess.run(["bash", "-c", _commands(use)[-1]], cwd=tmp_path, env=env, capture_output=True,
                                timeout=COMMAND_TIMEOUT_S)
        assert "orders" in listed.stdout.decode()
    finally:
        broker.kill()


def _commands(block: str) -> list[str]:
    """The block's commands, a here-document kept whole with the line that starts it."""
    commands: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if not line.strip():
            continue
        match = re.search(r"<<'(\w+)'", line)
        if match:
            body = [line]
            for more in lines:
                body.append(more)
                if more == match.group(1):
                    break
            commands.append("\n".join(body))
        else:
            commands.append(line)
    return commands
