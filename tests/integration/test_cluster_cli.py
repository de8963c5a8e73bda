"""`martlet cluster up/status/down` as a developer runs them (subprocesses, real ZooKeeper and
HDFS). The admins and brokers are the stand-in of tests/fixtures/fake_martlet.py, through
$MARTLET_CLUSTER_COMMAND: what is tested is the command, its detached processes and its
state file, not the cluster itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from martlet.compat.cluster_cli import process_start_ticks
from martlet.compat.reference.kafka import port_open
from tests.fixtures.martlet import wait_until

pytestmark = pytest.mark.integration

FAKE_MARTLET = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'fixtures' / 'fake_martlet.py'}"
COMMAND_TIMEOUT_S = 240.0
GONE_TIMEOUT_S = 30.0


def cluster(*args: str, command: str = FAKE_MARTLET) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MARTLET_CLUSTER_COMMAND": command}
    return subprocess.run([sys.executable, "-m", "martlet.cli", "cluster", *args], env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)


def state_pids(workdir: Path) -> list[tuple[int, int]]:
    state = json.loads((workdir / "state.json").read_text())
    entries = [state["supervisor"], state["zookeeper"], state["hdfs"], *state["admins"], *state["brokers"]]
    return [(entry["pid"], entry["started"]) for entry in entries]


def all_gone(pids: list[tuple[int, int]]) -> bool:
    return all(process_start_ticks(pid) != started for pid, started in pids)


@pytest.fixture
def workdir(tmp_path: Path):
    """The cluster folder; whatever a test leaves up is brought down."""
    yield tmp_path / "cluster"
    if (tmp_path / "cluster" / "state.json").exists():
        cluster("down", "--dir", str(tmp_path / "cluster"))


def test_up_serves_in_the_background_and_down_stops_everything(workdir: Path) -> None:
    up = cluster("up", "--brokers", "2", "--admins", "1", "--dir", str(workdir))
    assert up.returncode == 0, up.stdout + up.stderr
    bootstrap = up.stdout.splitlines()[1].removeprefix("bootstrap ")
    ports = [int(address.rsplit(":", 1)[1]) for address in bootstrap.split(",")]
    assert len(ports) == 2 and all(port_open("127.0.0.1", port) for port in ports)
    pids = state_pids(workdir)
    assert len(pids) == 6 and not all_gone(pids)

    again = cluster("up", "--dir", str(workdir))
    assert again.returncode == 2 and "already up" in again.stderr
    status = cluster("status", "--dir", str(workdir))
    assert status.returncode == 0 and status.stdout.count(" alive") == 6 and "(answers)" in status.stdout

    down = cluster("down", "--dir", str(workdir))
    assert down.returncode == 0, down.stdout + down.stderr
    assert all_gone(pids)
    assert not (workdir / "state.json").exists() and not (workdir / "data").exists()
    assert sorted(path.name for path in (workdir / "logs").iterdir()) == ["admin-0.log", "broker-0.log", "broker-1.log"]
    assert cluster("status", "--dir", str(workdir)).returncode == 3


def test_a_killed_supervisor_takes_its_processes_along_and_down_still_cleans_up(workdir: Path) -> None:
    up = cluster("up", "--brokers", "1", "--admins", "1", "--dir", str(workdir))
    assert up.returncode == 0, up.stdout + up.stderr
    pids = state_pids(workdir)

    os.kill(pids[0][0], signal.SIGKILL)  # the supervisor
    assert wait_until(lambda: all_gone(pids), GONE_TIMEOUT_S), "a cluster process outlived its supervisor"
    status = cluster("status", "--dir", str(workdir))
    assert status.returncode == 1 and status.stdout.count("DEAD") == 5

    assert cluster("down", "--dir", str(workdir)).returncode == 0
    assert sorted(path.name for path in workdir.iterdir()) == ["logs", "supervisor.log"]


def test_up_without_the_cluster_commands_says_so_and_starts_nothing(workdir: Path) -> None:
    up = cluster("up", "--brokers", "3", "--dir", str(workdir), command=f"{sys.executable} -c 'import sys; sys.exit(2)'")
    assert up.returncode == 2
    assert "cluster commands of issue 11 are missing" in up.stderr and "--brokers 0 --admins 0" in up.stderr
    assert not workdir.exists()
