"""``martlet cluster ...``: a whole Martlet cluster on this machine, for a developer.

    martlet cluster up --brokers N [--admins K] [--dir DIR]
                        start ZooKeeper, HDFS, K admins and N brokers on 127.0.0.1, in the
                        background; print the bootstrap address once every broker serves
    martlet cluster status [--dir DIR]
                        what is alive (exit 0: all of it; 1: something died; 3: no cluster)
    martlet cluster down [--dir DIR]
                        stop all of it and remove its data (the logs stay)

How it stays up after ``up`` returns: ``up`` starts a supervisor process (``martlet cluster
supervise``, in its own session) that owns a ``LocalCluster`` and waits for SIGTERM. The
cluster's processes die with the supervisor (parent-death signal), so no broker, ZooKeeper or
HDFS outlives it, even after kill -9. ``down`` asks the supervisor to stop everything, then
ends any process of the state file still alive (SIGTERM, bounded wait, SIGKILL).

DIR (default ./martlet-cluster) holds:

    state.json          written by the supervisor once the cluster serves: pids (each with
                        its start time in /proc, so a reused pid is never signalled), ports
                        and addresses; removed by ``down``
    supervisor.log      the supervisor's log
    logs/               one log per admin and broker (kept by ``down``, cleared by ``up``)
    data/               the brokers' data dirs (removed by ``down``)
    martlet-refzk-*/    ZooKeeper's and HDFS's folders (removed when they stop)
    martlet-refhdfs-*/

The admins and brokers run this Python's ``-m martlet.cli``, or the command line in
``$MARTLET_CLUSTER_COMMAND`` (tests put a stand-in there). ``main`` takes the arguments
after ``cluster``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from martlet.compat.reference.cluster import (
    LocalCluster,
    LocalClusterError,
    default_martlet_command,
    missing_cluster_commands,
)
from martlet.compat.reference.hdfs import hdfs_classpath
from martlet.compat.reference.kafka import port_open
from martlet.compat.reference.maven import tail_text, write_atomic
from martlet.compat.reference.zookeeper import four_letter_word, zookeeper_classpath

DEFAULT_DIR = "martlet-cluster"
STATE_NAME = "state.json"
STATE_VERSION = 1
UP_TIMEOUT_S = 300.0  # ZooKeeper ~1 s, HDFS ~15 s, brokers a few s each on a small machine
DOWN_TIMEOUT_S = 120.0  # the supervisor stops brokers, then admins, each bounded by 45 s
POLL_S = 0.1

_detached: list[subprocess.Popen[bytes]] = []  # the supervisor is never waited for: it outlives `up`


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="martlet cluster",
                                     description="A Martlet cluster on this machine: ZooKeeper, HDFS, admins "
                                                 "and brokers on 127.0.0.1.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = commands.add_parser("up", help="start a cluster in the background and print its bootstrap address")
    down = commands.add_parser("down", help="stop the cluster and remove its data (logs stay)")
    status = commands.add_parser("status", help="show what is alive")
    _add_shape(up)
    for command in (up, down, status):
        _add_dir(command)
    up.add_argument("--timeout", type=float, default=UP_TIMEOUT_S, metavar="SECONDS",
                    help=f"give up when not serving by then ({UP_TIMEOUT_S:.0f})")
    down.add_argument("--timeout", type=float, default=DOWN_TIMEOUT_S, metavar="SECONDS",
                      help=f"SIGKILL what has not stopped by then ({DOWN_TIMEOUT_S:.0f})")
    return parser


def _supervise_parser() -> argparse.ArgumentParser:
    """``supervise`` is started by ``up``, not by people: kept out of the help."""
    parser = argparse.ArgumentParser(prog="martlet cluster supervise")
    _add_shape(parser)
    _add_dir(parser)
    return parser


def _add_shape(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=3, metavar="N", help="broker processes (3)")
    parser.add_argument("--admins", type=int, default=1, metavar="K", help="admin processes (1)")


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                        help=f"where state, logs and data live (./{DEFAULT_DIR})")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["supervise"]:
        options = _supervise_parser().parse_args(argv[1:])
        return supervise(Path(options.dir).resolve(), options.brokers, options.admins)
    args = _parser().parse_args(argv)
    workdir = Path(args.dir).resolve()
    if args.command == "up":
        return up(workdir, args.brokers, args.admins, args.timeout)
    if args.command == "down":
        return down(workdir, args.timeout)
    return status(workdir)


# ----------------------------------------------------------------------------------------
# up


def up(workdir: Path, brokers: int, admins: int, timeout_s: float) -> int:
    began = time.monotonic()
    if _supervisor_alive(read_state(workdir)):
        return _fail(f"a cluster is already up in {workdir} (martlet cluster down --dir {workdir})")
    if brokers < 0 or admins < 0:
        return _fail("--brokers and --admins cannot be negative")
    missing = missing_cluster_commands(default_martlet_command()) if brokers or admins else None
    if missing:
        return _fail(f"{missing}; `--brokers 0 --admins 0` starts ZooKeeper and HDFS alone")
    _clear_previous_run(workdir)
    print("fetching the ZooKeeper and Hadoop jars if needed ...", flush=True)
    zookeeper_classpath()
    hdfs_classpath()
    supervisor = _start_supervisor(workdir, brokers, admins)
    state = _wait_state(workdir, supervisor, began + timeout_s)
    if state is None:
        return 1
    _print_up(state, time.monotonic() - began)
    return 0


def _clear_previous_run(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    for name in ("logs", "data"):
        shutil.rmtree(workdir / name, ignore_errors=True)
    for name in (STATE_NAME, "supervisor.log"):
        (workdir / name).unlink(missing_ok=True)


def _start_supervisor(workdir: Path, brokers: int, admins: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "martlet.compat.cluster_cli", "supervise", "--brokers", str(brokers),
               "--admins", str(admins), "--dir", str(workdir)]
    with open(workdir / "supervisor.log", "ab") as log:
        supervisor = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      cwd=workdir, start_new_session=True)
    _detached.append(supervisor)
    return supervisor


def _wait_state(workdir: Path, supervisor: subprocess.Popen[bytes], deadline: float) -> dict[str, Any] | None:
    """The state file once the supervisor wrote it; None (after saying why) if it died or
    ran out of time (then it is stopped, and stops what it started)."""
    while True:
        state = read_state(workdir)
        if state is not None:
            return state
        if supervisor.poll() is not None:
            _fail(f"the cluster did not start (supervisor exit {supervisor.returncode}):\n"
                  f"{_log_tail(workdir / 'supervisor.log')}")
            return None
        if time.monotonic() > deadline:
            supervisor.terminate()
            supervisor.wait(timeout=DOWN_TIMEOUT_S)
            _fail(f"the cluster was not serving in time:\n{_log_tail(workdir / 'supervisor.log')}")
            return None
        try:
            supervisor.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass


def _print_up(state: dict[str, Any], seconds: float) -> None:
    print(f"bootstrap {state['bootstrap'] or '(no brokers)'}")
    print(f"  zookeeper {state['zookeeper']['address']} (cluster under {state['zookeeper_connect']})")
    print(f"  store     {state['store']}")
    print(f"  {len(state['admins'])} admin(s), {len(state['brokers'])} broker(s); logs in {state['dir']}/logs")
    print(f"up in {seconds:.1f}s; stop it with: martlet cluster down --dir {state['dir']}", flush=True)


# ----------------------------------------------------------------------------------------
# the supervisor


def supervise(workdir: Path, brokers: int, admins: int) -> int:
    """Run the cluster until SIGTERM/SIGINT; the state file exists exactly while it serves."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_on_signal)
    cluster = LocalCluster(brokers=brokers, admins=admins, workdir=workdir)
    try:
        cluster.start()
        write_atomic(workdir / STATE_NAME, json.dumps(cluster_state(cluster, workdir), indent=2) + "\n")
        logging.info("cluster up in %.1fs; bootstrap %s", cluster.startup_seconds or 0.0, cluster.bootstrap)
        while True:
            signal.pause()
    except SystemExit:
        return 0
    except LocalClusterError as error:
        logging.error("%s", error)
        return 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # stopping: a second signal must not cut it short
        (workdir / STATE_NAME).unlink(missing_ok=True)
        cluster.stop()


def _exit_on_signal(sig: int, _frame: object) -> NoReturn:
    logging.info("signal %d: stopping the cluster", sig)
    raise SystemExit(0)


def cluster_state(cluster: LocalCluster, workdir: Path) -> dict[str, Any]:
    """What ``down`` and ``status`` need, for a started cluster."""
    assert cluster.own_zookeeper is not None and cluster.own_hdfs is not None
    return {
        "version": STATE_VERSION,
        "dir": str(workdir),
        "supervisor": _process_entry(os.getpid()),
        "zookeeper": {"address": cluster.own_zookeeper.address, **_process_entry(cluster.own_zookeeper.pid)},
        "hdfs": {"url": cluster.own_hdfs.url, **_process_entry(cluster.own_hdfs.pid)},
        "zookeeper_connect": cluster.zookeeper_connect,
        "store": cluster.store_url,
        "bootstrap": cluster.bootstrap,
        "admins": [{"index": a.index, "log": str(a.log_path), **_process_entry(a.pid)} for a in cluster.admins],
        "brokers": [{"index": b.index, "port": b.port, "http": b.http_port, "log": str(b.log_path), **_process_entry(b.pid)}
                    for b in cluster.brokers],
    }  # fmt: skip


def _process_entry(pid: int | None) -> dict[str, Any]:
    assert pid is not None
    return {"pid": pid, "started": process_start_ticks(pid)}


# ----------------------------------------------------------------------------------------
# down and status


def down(workdir: Path, timeout_s: float) -> int:
    state = read_state(workdir)
    if state is None:
        print(f"no cluster in {workdir}")
        return 0
    deadline = time.monotonic() + timeout_s
    supervisor = state["supervisor"]
    if _alive(supervisor):
        os.kill(supervisor["pid"], signal.SIGTERM)  # it stops the others in order
        _wait_gone([supervisor], deadline)
    left = [entry for _role, entry in _processes(state) if _alive(entry)]
    for entry in left:
        _signal_group(entry, signal.SIGCONT)
        _signal_group(entry, signal.SIGTERM)
    _wait_gone(left, deadline)
    for entry in left:
        if _alive(entry):
            _signal_group(entry, signal.SIGKILL)
    _wait_gone(left, time.monotonic() + 10.0)
    _remove_run(workdir)
    killed = sum(1 for entry in left if _alive(entry))
    print(f"cluster in {workdir} stopped" + (f"; {killed} process(es) would not die" if killed else ""))
    return 1 if killed else 0


def _remove_run(workdir: Path) -> None:
    (workdir / STATE_NAME).unlink(missing_ok=True)
    shutil.rmtree(workdir / "data", ignore_errors=True)
    for folder in [*workdir.glob("martlet-refzk-*"), *workdir.glob("martlet-refhdfs-*")]:
        shutil.rmtree(folder, ignore_errors=True)  # left behind only if the supervisor was killed


def status(workdir: Path) -> int:
    state = read_state(workdir)
    if state is None:
        print(f"no cluster in {workdir}")
        return 3
    print(f"bootstrap {state['bootstrap']}")
    dead = 0
    for role, entry in [("supervisor", state["supervisor"]), *_processes(state)]:
        alive = _alive(entry)
        dead += not alive
        print(f"  {role:<10} pid {entry['pid']:<8} {_detail(role, entry, alive):<32} {'alive' if alive else 'DEAD'}")
    return 1 if dead else 0


def _detail(role: str, entry: dict[str, Any], alive: bool) -> str:
    if role == "zookeeper":
        answer = four_letter_word(entry["address"], "ruok", timeout_s=1.0) if alive else None
        return f"{entry['address']} ({'answers' if answer == 'imok' else 'silent'})"
    if role == "hdfs":
        return entry["url"]
    if role.startswith("broker"):
        serving = alive and port_open("127.0.0.1", entry["port"], timeout=1.0)
        http = f", console http://127.0.0.1:{entry['http']}/" if entry.get("http") else ""
        return f"127.0.0.1:{entry['port']} ({'open' if serving else 'closed'}){http}"
    return ""


def _processes(state: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every process of the cluster but the supervisor: brokers first, services last."""
    for broker in state["brokers"]:
        yield f"broker-{broker['index']}", broker
    for admin in state["admins"]:
        yield f"admin-{admin['index']}", admin
    yield "zookeeper", state["zookeeper"]
    yield "hdfs", state["hdfs"]


# ----------------------------------------------------------------------------------------
# state file and processes


def read_state(workdir: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads((workdir / STATE_NAME).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return state if state.get("version") == STATE_VERSION else None


def process_start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or None if no
    such process: with the pid it names one process for good, as pids are reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
    return int(fields[19]) if fields[0] != "Z" else None  # a zombie has ended


def _alive(entry: dict[str, Any]) -> bool:
    return entry.get("started") is not None and process_start_ticks(entry["pid"]) == entry["started"]


def _supervisor_alive(state: dict[str, Any] | None) -> bool:
    return state is not None and _alive(state["supervisor"])


def _signal_group(entry: dict[str, Any], sig: int) -> None:
    """Each cluster process leads its own process group (started in a new session)."""
    try:
        os.killpg(entry["pid"], sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(entries: list[dict[str, Any]], deadline: float) -> None:
    """Poll until none of ``entries`` is alive or ``deadline`` passes (they are not our
    children, so there is nothing to wait on)."""
    while any(_alive(entry) for entry in entries) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _log_tail(path: Path) -> str:
    return tail_text(path.read_bytes()[-64 * 1024 :], 30) if path.is_file() else "(no log)"


def _fail(message: str) -> int:
    print(f"martlet cluster: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
