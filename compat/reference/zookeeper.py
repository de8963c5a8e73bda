"""Real Apache ZooKeeper (one standalone server) for tests and local clusters, started from code.

The server is ``org.apache.zookeeper.server.ZooKeeperServerMain`` reading a ``zoo.cfg``
written here. The jars come from Maven Central through ``zookeeper-pom.xml`` beside this
file and are cached like the reference Kafka's and Hadoop's (see ``maven.py``):

    .cache/m2/                          Maven's local repository (shared)
    .cache/zookeeper-<version>/libs/    the runtime jars, one flat folder
    .cache/zookeeper-<version>/classpath.txt
                                        marker written last; when it and its jars exist, no
                                        Maven run and no network call happen

One server keeps everything in one temp folder:

    <workdir>/zoo.cfg        the configuration (below)
    <workdir>/data/          snapshots and transaction logs (dataDir)
    <workdir>/server.log     the JVM's stdout and stderr

The client port is bound on 127.0.0.1 only (``clientPortAddress``); the admin server (an
HTTP port) is off; the four-letter words in ``FOUR_LETTER_WORDS`` answer on the client port.
``tickTime`` is ``tick_time_ms`` (500 ms by default), so clients may ask for sessions from
``minSessionTimeout`` = 2 ticks (1 s) up to ``max_session_timeout_ms``: fault tests use
sessions of a few seconds and still see them expire quickly.

``stop_process()`` + ``restart()`` bring the server back on the same port with the same data
folder: sessions are in the transaction log, so a client that reconnects within its session
timeout keeps its session and its ephemeral nodes, as with a real ZooKeeper after a short
outage. ``pause()``/``resume()`` freeze and thaw the JVM instead (SIGSTOP/SIGCONT: clients see
a silent peer rather than a refused connection).

``MARTLET_ZOOKEEPER_VERSION`` picks another ZooKeeper version (default
``DEFAULT_ZOOKEEPER_VERSION``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from .kafka import free_ports, java_executable, port_open
from .maven import cache_dir, cached_classpath, copy_dependencies, tail_text, write_atomic
from .process import PortTaken, end_process, signal_group

DEFAULT_ZOOKEEPER_VERSION = "3.9.5"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
POM_PATH = Path(__file__).resolve().with_name("zookeeper-pom.xml")
LOOPBACK = "127.0.0.1"
FOUR_LETTER_WORDS = "ruok,srvr,stat,mntr,cons,conf,envi"
PROBE_TIMEOUT_S = 2.0  # one kazoo connection attempt while waiting for the server

_log = logging.getLogger(__name__)
# The readiness probe's own kazoo logger: while the server starts, kazoo logs every refused or
# dropped attempt as a warning, which is expected here and only noise.
_probe_log = logging.getLogger(f"{__name__}.probe")
_probe_log.setLevel(logging.ERROR)


class ReferenceZooKeeperError(RuntimeError):
    """The reference ZooKeeper could not be fetched, started or stopped."""


# ----------------------------------------------------------------------------------------
# jars and classpath


def zookeeper_version() -> str:
    return os.environ.get("MARTLET_ZOOKEEPER_VERSION") or DEFAULT_ZOOKEEPER_VERSION


def zookeeper_home(version: str | None = None) -> Path:
    return cache_dir() / f"zookeeper-{version or zookeeper_version()}"


def zookeeper_classpath(version: str | None = None) -> str:
    """Ensure the jars of ``version`` are cached (fetching them once) and return the classpath."""
    version = version or zookeeper_version()
    fill = copy_dependencies(POM_PATH, {"zookeeper.version": version}, [f"zookeeper-{version}.jar"],
                             f"fetching ZooKeeper {version} jars", ReferenceZooKeeperError)
    return cached_classpath(zookeeper_home(version), fill)


def four_letter_word(address: str, word: str, timeout_s: float = 2.0) -> str | None:
    """Send a four-letter word ("ruok", "srvr", ...) to "HOST:PORT" and return the answer,
    or None when nothing answers within ``timeout_s`` (stopped, paused or not listening).
    The server answers and closes the connection, so the answer is everything read."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.sendall(word.encode("ascii"))
            return _read_to_end(sock).decode("utf-8", "replace")
    except OSError:
        return None


def _read_to_end(sock: socket.socket, limit_bytes: int = 1 << 20) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit_bytes:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


# ----------------------------------------------------------------------------------------
# the server


@dataclass(frozen=True)
class ZooKeeperSettings:
    """How one reference server runs; the defaults suit tests on a small machine."""

    tick_time_ms: int = 500
    max_session_timeout_ms: int = 60_000
    heap: str = "256m"
    log_level: str = "info"  # slf4j-simple's level for the server log
    startup_timeout_s: float = 30.0
    stop_timeout_s: float = 10.0

    @property
    def min_session_timeout_ms(self) -> int:
        return 2 * self.tick_time_ms  # ZooKeeper's default: the server raises shorter requests to it


class ReferenceZooKeeper:
    """One standalone ZooKeeper server on a free loopback port.

    ``start()`` writes a fresh ``zoo.cfg`` and data folder, launches the JVM and returns once
    a kazoo client has connected and read ``/``. ``stop()`` ends the JVM and removes the
    folder. ``stop_process()`` + ``restart()`` (or ``pause()`` + ``resume()``) take the server
    away and bring it back with its data and sessions.
    """

    def __init__(self, settings: ZooKeeperSettings | None = None, *, version: str | None = None,
                 base_dir: str | os.PathLike[str] | None = None, die_with_parent: bool = True) -> None:
        """``base_dir``: where the temp folder goes (default: the system's temp folder).
        ``die_with_parent=False`` lets the server outlive this process (``martlet cluster
        up``): no parent-death signal and no finalizer that ends it."""
        self.settings = settings or ZooKeeperSettings()
        self.version = version or zookeeper_version()
        self.base_dir = base_dir
        self.die_with_parent = die_with_parent
        self.host = LOOPBACK
        self.port: int | None = None
        self.workdir: Path | None = None
        self.startup_seconds: float | None = None
        self._classpath: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    # -- public state --------------------------------------------------------------------

    @property
    def address(self) -> str:
        """"127.0.0.1:PORT", the connect string of kazoo and of ``--zookeeper``."""
        if self.port is None:
            raise ReferenceZooKeeperError("reference ZooKeeper is not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path | None:
        return None if self.workdir is None else self.workdir / "server.log"

    def log_tail(self, lines: int = 40) -> str:
        path = self.log_path
        if path is None or not path.is_file():
            return "(no server log)"
        return tail_text(path.read_bytes()[-64 * 1024 :], lines)

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"ReferenceZooKeeper({self.version}, {self.host}:{self.port}, {state})"

    def __enter__(self) -> ReferenceZooKeeper:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> ReferenceZooKeeper:
        """Fetch the jars if needed, start a fresh server and wait until a client connects."""
        if self._proc is not None:
            raise ReferenceZooKeeperError("reference ZooKeeper is already started")
        self._classpath = zookeeper_classpath(self.version)
        began = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix="martlet-refzk-", dir=self.base_dir))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.workdir, True)
        lost = ""
        for _attempt in range(3):
            (self.port,) = free_ports(1, self.host)
            try:
                self._launch()
                self._wait_ready(began)
            except PortTaken as exc:
                lost = str(exc)
                self.stop_process()
                continue
            except BaseException:
                self.stop()
                raise
            self.startup_seconds = time.monotonic() - began
            _log.info("reference ZooKeeper up at %s in %.1fs", self.address, self.startup_seconds)
            return self
        self.stop()
        raise ReferenceZooKeeperError(f"reference ZooKeeper could not bind its port 3 times; {lost}")

    def stop(self) -> None:
        """End the JVM (SIGTERM, bounded wait, SIGKILL) and remove its folder. Idempotent."""
        try:
            self.stop_process()
        finally:
            if self._finalizer is not None:
                self._finalizer()  # removes the folder
            self._finalizer = None
            self.workdir = None
            self.port = None

    def stop_process(self) -> None:
        """End the JVM but keep its folder and port for ``restart()``."""
        proc, self._proc = self._proc, None
        if proc is not None:
            end_process(proc, self.settings.stop_timeout_s)

    def restart(self) -> None:
        """Start the JVM again on the same folder and port; sessions and ephemeral nodes
        whose timeout has not run out are still there. Fails if another process took the
        port meanwhile."""
        if self.workdir is None or self.port is None:
            raise ReferenceZooKeeperError("reference ZooKeeper was never started or is stopped")
        self.stop_process()
        began = time.monotonic()
        try:
            self._launch()
            self._wait_ready(began)
        except PortTaken as exc:
            raise ReferenceZooKeeperError(f"ZooKeeper port {self.port} was taken: {exc}") from None
        _log.info("reference ZooKeeper restarted in %.1fs", time.monotonic() - began)

    def pause(self) -> None:
        """Freeze the JVM (SIGSTOP): connections stay open but nothing answers, and no
        session expires meanwhile (the server's clock of sessions is frozen too)."""
        signal_group(self._running(), signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw a paused JVM (SIGCONT)."""
        signal_group(self._running(), signal.SIGCONT)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            raise ReferenceZooKeeperError("reference ZooKeeper is not running")
        return self._proc

    # -- steps of start ------------------------------------------------------------------

    def config_text(self) -> str:
        """The ``zoo.cfg`` of this server (see the module header)."""
        assert self.workdir is not None and self.port is not None
        return "\n".join([
            f"tickTime={self.settings.tick_time_ms}",
            f"dataDir={self.workdir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"maxSessionTimeout={self.settings.max_session_timeout_ms}",
            "admin.enableServer=false",
            f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
            # A crash of the JVM loses nothing without fsync (the page cache keeps it); a
            # crash of the machine would, and a test server does not outlive the machine.
            "forceSync=no",
            "",
        ])  # fmt: skip

    def _command(self) -> list[str]:
        assert self.workdir is not None and self._classpath is not None
        command = [
            java_executable(), f"-Xmx{self.settings.heap}", "-Xms64m", "-Djava.awt.headless=true",
            "-XX:TieredStopAtLevel=1",  # a test server: fast start over peak speed
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.settings.log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", self._classpath, MAIN_CLASS, str(self.workdir / "zoo.cfg"),
        ]  # fmt: skip
        # Die with this process when it is killed outright (the parent-death signal belongs to
        # the forking thread, so only when started from the main thread).
        setpriv = shutil.which("setpriv")
        if self.die_with_parent and setpriv and threading.current_thread() is threading.main_thread():
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        return command

    def _launch(self) -> None:
        assert self.workdir is not None
        (self.workdir / "data").mkdir(exist_ok=True)
        write_atomic(self.workdir / "zoo.cfg", self.config_text())
        with open(self.workdir / "server.log", "ab") as log:
            self._proc = subprocess.Popen(
                self._command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,
            )  # fmt: skip
        if self.die_with_parent:
            proc, timeout_s = self._proc, self.settings.stop_timeout_s
            # Ends the JVM even if nobody calls stop(); detached so stop_process() stays the owner.
            weakref.finalize(self, end_process, proc, timeout_s).atexit = True

    def _check_running(self, deadline: float, waiting_for: str) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            tail = self.log_tail()
            if "BindException" in tail or "Address already in use" in tail:
                raise PortTaken(tail)
            raise ReferenceZooKeeperError(f"reference ZooKeeper exited with {code} while {waiting_for}; {tail}")
        if time.monotonic() > deadline:
            raise ReferenceZooKeeperError(
                f"reference ZooKeeper not ready within {self.settings.startup_timeout_s:.0f}s "
                f"({waiting_for}); {self.log_tail()}"
            )

    def _pause_poll(self, seconds: float) -> None:
        assert self._proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=seconds)

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.settings.startup_timeout_s
        assert self.port is not None
        while not port_open(self.host, self.port, timeout=0.5):
            self._check_running(deadline, "waiting for the client port")
            self._pause_poll(0.05)
        last_error = "no attempt"
        while True:
            self._check_running(deadline, f"waiting for a client to connect: {last_error}")
            try:
                self._probe()
                return
            except Exception as exc:  # the port opens before the server serves sessions
                last_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            self._pause_poll(0.1)

    def _probe(self) -> None:
        """Connect with kazoo and read ``/``: the server has loaded its data and serves
        sessions, not just an open port."""
        from kazoo.client import KazooClient

        session_timeout_s = max(PROBE_TIMEOUT_S, self.settings.min_session_timeout_ms / 1000)
        client = KazooClient(hosts=self.address, timeout=session_timeout_s, logger=_probe_log)
        try:
            client.start(timeout=PROBE_TIMEOUT_S)
            client.get_children("/")
        finally:
            client.stop()
            client.close()
