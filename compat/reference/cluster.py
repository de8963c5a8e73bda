"""A Martlet cluster on loopback, as processes: admins and brokers over ZooKeeper and HDFS.

``LocalCluster`` owns the processes of one cluster (issue 11): ``admins`` processes of
``martlet admin`` (one is elected, the others stand by) and ``brokers`` processes of
``martlet serve --zookeeper ...``. It uses a ZooKeeper and an HDFS it is given, or starts a
``ReferenceZooKeeper`` and a ``ReferenceHdfs`` of its own. Many clusters may share one
ZooKeeper and one HDFS: each works under its own names,

    ZooKeeper chroot   /martlet-<uuid8>                 (passed as HOST:PORT/martlet-<uuid8>)
    store              hdfs://HOST:PORT/martlet-<uuid8>

Its work folder (a temp folder removed by ``stop()``, or one it is given and leaves in place):

    <workdir>/logs/broker-<index>.log    stdout and stderr of one broker, appended over restarts
    <workdir>/logs/admin-<index>.log     the same for an admin
    <workdir>/data/broker-<index>/       the broker's --data-dir (kept over its restarts)
    <workdir>/martlet-refzk-*/ ...       the own ZooKeeper and HDFS, if it started them

Every process runs in its own process group (so a signal reaches everything it started), on
127.0.0.1, and dies with this process when started from the main thread (parent-death
signal). A process is ready when its log shows its ready line: ``martlet listening on
HOST:PORT`` for a broker, ``martlet admin <id> running`` for an admin. Every wait is bounded.
A broker keeps its port and data dir for life, so ``start_broker`` after ``kill`` or
``stop_broker`` brings the same broker back, as a restarted machine would.

The processes run this Python's ``-m martlet.cli``, or the command line in
``$MARTLET_CLUSTER_COMMAND`` (a stand-in in tests, or another tree's martlet).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .hdfs import ReferenceHdfs
from .maven import tail_text
from .process import ProcessHandle, dying_with_parent, end_process, free_ports, signal_group
from .zookeeper import ReferenceZooKeeper

LOOPBACK = "127.0.0.1"
COMMAND_ENV = "MARTLET_CLUSTER_COMMAND"
BROKER_READY = re.compile(r"^martlet listening on (\S+):(\d+)$", re.MULTILINE)
ADMIN_READY = re.compile(r"^martlet admin (\S+) running$", re.MULTILINE)
ADDRESS_IN_USE = "Address already in use"
PORT_ATTEMPTS = 3  # a free port may be taken before the broker binds it: pick another

_log = logging.getLogger(__name__)


class LocalClusterError(RuntimeError):
    """A cluster process did not start, or the cluster was used in a state it is not in."""


def default_martlet_command() -> tuple[str, ...]:
    """The command line before ``admin``/``serve``: ``$MARTLET_CLUSTER_COMMAND`` (split as a
    shell would: tests put a stand-in there, or another tree's martlet), else this Python's
    ``-m martlet.cli``."""
    override = os.environ.get(COMMAND_ENV)
    return tuple(shlex.split(override)) if override else (sys.executable, "-m", "martlet.cli")


# ----------------------------------------------------------------------------------------
# one process


class ClusterProcess(ProcessHandle):
    """One admin or broker: its command line, log and (while it runs) its process."""

    def __init__(self, role: str, index: int, command: list[str], log_path: Path, ready: re.Pattern[str],
                 port: int | None = None) -> None:
        self.role = role
        self.index = index
        self.command = command
        self.log_path = log_path
        self.ready = ready
        self.port = port
        self.http_port: int | None = None  # a broker's HTTP port (metrics, API, console)
        self.ready_match: re.Match[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self.stopped_by_us = False  # the harness sent its current run SIGKILL or a stop

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"

    @property
    def ended_on_its_own(self) -> bool:
        """It ended, and not because the harness killed or stopped it (a crash, the OOM
        killer, a signal from elsewhere)."""
        return self.returncode is not None and not self.stopped_by_us

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"exited {self.returncode}" if self._proc else "not started"
        port = f" port {self.port}" if self.port is not None else ""
        return f"<{self.name}{port} pid {self.pid} {state}>"

    def launch(self) -> None:
        """Start the process (it must not be running); ``wait_ready`` waits for it."""
        if self.alive:
            raise LocalClusterError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            self._proc = subprocess.Popen(
                dying_with_parent(self.command), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        self.ready_match = None
        self.stopped_by_us = False

    def wait_ready(self, deadline: float) -> re.Match[str]:
        """Poll this run's part of the log for the ready line, until ``deadline`` (monotonic)."""
        assert self._proc is not None, "launch() first"
        while True:
            match = self.ready.search(self._log_since_launch())
            if match:
                self.ready_match = match
                return match
            if self._proc.poll() is not None:
                raise LocalClusterError(f"{self.name} exited with {self._proc.returncode} before it was "
                                        f"ready; its log:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise LocalClusterError(f"{self.name} not ready in time; its log:\n{self.log_tail()}")
            self._pause_poll(0.05)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process group; SIGKILL also waits (bounded) until it is gone.
        Nothing is sent once it has ended: its pid may belong to another process by then."""
        if self._proc is None or self._proc.poll() is not None:
            return
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.stopped_by_us = True
        signal_group(self._proc, sig)
        if sig == signal.SIGKILL:
            self._proc.wait(timeout=30)

    def stop(self, timeout_s: float) -> int | None:
        """SIGTERM (after SIGCONT, it may be paused), bounded wait, then SIGKILL; the exit code."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self.stopped_by_us = True
        end_process(self._proc, timeout_s)
        return self._proc.returncode

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.is_file():
            return "(no log)"
        with open(self.log_path, "rb") as log:
            log.seek(max(0, self.log_path.stat().st_size - 64 * 1024))
            return tail_text(log.read(), lines)

    def _log_since_launch(self) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(self._log_offset)
            return log.read(1 << 20).decode("utf-8", "replace")


@functools.lru_cache(maxsize=8)
def missing_cluster_commands(martlet_command: tuple[str, ...]) -> str | None:
    """Why this martlet cannot run a cluster (no ``admin`` command, no ``serve --zookeeper``),
    or None. Asked once per command line: a clear error beats a broker's usage message."""
    for args, needle in ((["admin", "--help"], "--zookeeper"), (["serve", "--help"], "--zookeeper")):
        done = subprocess.run([*martlet_command, *args], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60)
        if done.returncode != 0 or needle not in done.stdout.decode("utf-8", "replace"):
            return (f"`{' '.join(args[:1])} {needle}` is not a command of this martlet "
                    f"({' '.join(martlet_command)}): the cluster commands of issue 11 are missing")
    return None


# ----------------------------------------------------------------------------------------
# the cluster


@dataclass(frozen=True)
class ClusterOptions:
    """How a LocalCluster runs its processes; the defaults suit tests on a small machine.

    ``martlet_command``: the command line before ``admin``/``serve`` (see
    ``default_martlet_command``). ``serve_args``/``admin_args``: appended to every broker's or
    admin's command line (for example ``--config FILE`` or ``--session-ms 2000``).
    ``broker_config``: given a broker's port, the config file it starts with (its own: its
    listeners name that port first, so the cluster's bootstrap finds it), instead of
    ``--listen`` on that port.
    """

    martlet_command: tuple[str, ...] = field(default_factory=default_martlet_command)
    serve_args: tuple[str, ...] = ()
    broker_config: Callable[[int], str] | None = None
    admin_args: tuple[str, ...] = ()
    start_timeout_s: float = 60.0
    # Above the time a broker may spend handing its partitions over when it stops, so that
    # a graceful stop is not cut short by SIGKILL.
    stop_timeout_s: float = 45.0


class LocalCluster:
    """Admins and brokers of one cluster on loopback (see the module header).

    ``start()`` starts ZooKeeper and HDFS unless given, then every admin and broker at once,
    and returns when each has printed its ready line. ``stop()`` ends everything it started.
    """

    def __init__(self, *, brokers: int = 3, admins: int = 1, zookeeper: str | None = None,
                 hdfs_url: str | None = None, workdir: str | os.PathLike[str] | None = None,
                 options: ClusterOptions | None = None) -> None:
        self.options = options or ClusterOptions()
        self.initial_brokers = brokers
        self.initial_admins = admins
        self.name = f"martlet-{uuid.uuid4().hex[:8]}"
        self.zookeeper_address = zookeeper
        self.hdfs_url = hdfs_url
        self.own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else None
        self.brokers: list[ClusterProcess] = []
        self.admins: list[ClusterProcess] = []
        self.own_zookeeper: ReferenceZooKeeper | None = None
        self.own_hdfs: ReferenceHdfs | None = None
        self.startup_seconds: float | None = None

    # -- addresses -----------------------------------------------------------------------

    @property
    def chroot(self) -> str:
        return f"/{self.name}"

    @property
    def zookeeper_connect(self) -> str:
        """What admins and brokers get as --zookeeper: HOST:PORT/chroot."""
        if self.zookeeper_address is None:
            raise LocalClusterError("the cluster is not started")
        return f"{self.zookeeper_address}{self.chroot}"

    @property
    def store_url(self) -> str:
        if self.hdfs_url is None:
            raise LocalClusterError("the cluster is not started")
        return f"{self.hdfs_url.rstrip('/')}/{self.name}"

    @property
    def bootstrap(self) -> str:
        """"127.0.0.1:P1,127.0.0.1:P2,...": every broker, running or not (clients skip dead ones)."""
        return ",".join(f"{LOOPBACK}:{broker.port}" for broker in self.brokers)

    def __repr__(self) -> str:
        return f"LocalCluster({self.name}, admins={self.admins}, brokers={self.brokers})"

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> LocalCluster:
        if self.brokers or self.admins:
            raise LocalClusterError("the cluster is already started")
        began = time.monotonic()
        try:
            self._check_commands()
            self._make_workdir()
            self._start_services()
            self._create_chroot()
            admins = [self._new_admin() for _ in range(self.initial_admins)]
            brokers = [self._new_broker() for _ in range(self.initial_brokers)]
            self._launch_and_wait([*admins, *brokers])
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        _log.info("local cluster %s up in %.1fs: %s", self.name, self.startup_seconds, self.bootstrap)
        return self

    def stop(self, graceful: bool = True) -> None:
        """End every process, then the own ZooKeeper and HDFS, then the own work folder.
        Idempotent. Graceful: the brokers first, all at once (each flushes while the others
        do, and the admins are still there to place what they hand over), then the admins;
        SIGTERM, a bounded wait, SIGKILL. Not graceful: SIGKILL (a test that is over)."""
        try:
            for processes in (self.brokers, self.admins):
                self._end_all(processes, graceful)
        finally:
            self._stop_services()

    def _end_all(self, processes: Sequence[ClusterProcess], graceful: bool) -> None:
        if not graceful:
            for process in processes:
                process.signal(signal.SIGKILL)
            return
        for process in processes:
            process.signal(signal.SIGCONT)  # it may be paused
            process.signal(signal.SIGTERM)
        for process in processes:
            process.stop(self.options.stop_timeout_s)

    # -- brokers -------------------------------------------------------------------------

    def broker(self, index: int) -> ClusterProcess:
        return self.brokers[index]

    def kill(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to broker ``index`` (kill -9 by default, waiting until it is gone)."""
        self.brokers[index].signal(sig)

    def stop_broker(self, index: int) -> int | None:
        """A graceful stop (SIGTERM, bounded wait, SIGKILL); returns the exit code."""
        return self.brokers[index].stop(self.options.stop_timeout_s)

    def start_broker(self, index: int) -> ClusterProcess:
        """Start a stopped or killed broker again, on its port and data dir."""
        return self._restart(self.brokers[index])

    def add_broker(self) -> ClusterProcess:
        broker = self._new_broker()
        self._launch_and_wait([broker])
        return broker

    def pause_broker(self, index: int) -> None:
        self.brokers[index].signal(signal.SIGSTOP)

    def resume_broker(self, index: int) -> None:
        self.brokers[index].signal(signal.SIGCONT)

    # -- admins --------------------------------------------------------------------------

    def kill_admin(self, index: int, sig: int = signal.SIGKILL) -> None:
        self.admins[index].signal(sig)

    def stop_admin(self, index: int) -> int | None:
        return self.admins[index].stop(self.options.stop_timeout_s)

    def start_admin(self, index: int) -> ClusterProcess:
        return self._restart(self.admins[index])

    def add_admin(self) -> ClusterProcess:
        admin = self._new_admin()
        self._launch_and_wait([admin])
        return admin

    def pause_admin(self, index: int) -> None:
        self.admins[index].signal(signal.SIGSTOP)

    def resume_admin(self, index: int) -> None:
        self.admins[index].signal(signal.SIGCONT)

    # -- failure messages ----------------------------------------------------------------

    def log_report(self, lines: int = 20) -> str:
        """The tail of every process log, for an assertion message."""
        parts = [f"{self!r}"]
        for process in [*self.admins, *self.brokers]:
            parts.append(f"--- {process!r} ({process.log_path}):\n{process.log_tail(lines)}")
        if self.own_zookeeper is not None:
            parts.append(f"--- own ZooKeeper:\n{self.own_zookeeper.log_tail(lines)}")
        return "\n".join(parts)

    # -- steps ---------------------------------------------------------------------------

    def _check_commands(self) -> None:
        if self.initial_brokers or self.initial_admins:
            missing = missing_cluster_commands(self.options.martlet_command)
            if missing:
                raise LocalClusterError(missing)

    def _make_workdir(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="martlet-cluster-"))
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)

    def _start_services(self) -> None:
        if self.zookeeper_address is None:
            self.own_zookeeper = ReferenceZooKeeper(base_dir=self.workdir).start()
            self.zookeeper_address = self.own_zookeeper.address
        if self.hdfs_url is None:
            self.own_hdfs = ReferenceHdfs(base_dir=self.workdir).start()
            self.hdfs_url = self.own_hdfs.url

    def _stop_services(self) -> None:
        for service in (self.own_zookeeper, self.own_hdfs):
            if service is not None:
                service.stop()
        if self.own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _create_chroot(self) -> None:
        """The chroot exists before anyone connects under it (kazoo warns otherwise)."""
        from kazoo.client import KazooClient

        assert self.zookeeper_address is not None
        client = KazooClient(hosts=self.zookeeper_address, timeout=10.0)
        try:
            client.start(timeout=self.options.start_timeout_s)
            client.ensure_path(self.chroot)
        finally:
            client.stop()
            client.close()

    def _new_admin(self) -> ClusterProcess:
        assert self.workdir is not None
        index = len(self.admins)
        command = [*self.options.martlet_command, "admin", "--zookeeper", self.zookeeper_connect,
                   "--store", self.store_url, *self.options.admin_args]
        admin = ClusterProcess("admin", index, command, self.workdir / "logs" / f"admin-{index}.log", ADMIN_READY)
        self.admins.append(admin)
        return admin

    def _new_broker(self, port: int | None = None) -> ClusterProcess:
        assert self.workdir is not None
        index = len(self.brokers)
        broker = ClusterProcess("broker", index, [], self.workdir / "logs" / f"broker-{index}.log", BROKER_READY)
        self._place_broker(broker, port or free_ports(1, LOOPBACK)[0])
        self.brokers.append(broker)
        return broker

    def _place_broker(self, broker: ClusterProcess, port: int) -> None:
        assert self.workdir is not None
        data_dir = self.workdir / "data" / f"broker-{broker.index}"
        broker.port = port
        broker.http_port = next(free for free in free_ports(2, LOOPBACK) if free != port)
        listen = ["--listen", f"{LOOPBACK}:{port}"]
        if self.options.broker_config is not None:
            config = self.workdir / "config" / f"broker-{broker.index}.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(self.options.broker_config(port))
            listen = ["--config", str(config)]
        broker.command = [*self.options.martlet_command, "serve", "--zookeeper", self.zookeeper_connect,
                          "--store", self.store_url, *listen, "--data-dir", str(data_dir),
                          "--http", f"{LOOPBACK}:{broker.http_port}", *self.options.serve_args]

    def _launch_and_wait(self, processes: Sequence[ClusterProcess]) -> None:
        """Launch all, then wait for each: they start side by side. A broker whose free port
        was taken meanwhile gets another (only on its first start)."""
        for process in processes:
            process.launch()
        deadline = time.monotonic() + self.options.start_timeout_s
        for process in processes:
            for attempt in range(PORT_ATTEMPTS):
                try:
                    self._wait_ready(process, deadline)
                    break
                except LocalClusterError:
                    if process.role != "broker" or attempt == PORT_ATTEMPTS - 1 or not self._lost_port(process):
                        raise
                self._place_broker(process, free_ports(1, LOOPBACK)[0])
                process.launch()

    def _wait_ready(self, process: ClusterProcess, deadline: float) -> None:
        match = process.wait_ready(deadline)
        if process.role == "broker" and int(match.group(2)) != process.port:
            raise LocalClusterError(f"{process.name} listens on {match.group(0)}, not on port {process.port}")

    @staticmethod
    def _lost_port(process: ClusterProcess) -> bool:
        return not process.alive and ADDRESS_IN_USE in process.log_tail()

    def _restart(self, process: ClusterProcess) -> ClusterProcess:
        if process.alive:
            raise LocalClusterError(f"{process.name} is running (pid {process.pid}); stop or kill it first")
        process.launch()
        self._wait_ready(process, time.monotonic() + self.options.start_timeout_s)
        return process
