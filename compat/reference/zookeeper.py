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

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from .kafka import java_executable
from .maven import cache_dir, cached_classpath, copy_dependencies, write_atomic
from .process import RestartableService

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


class ReferenceZooKeeper(RestartableService):
    """One standalone ZooKeeper server on a free loopback port.

    ``start()`` writes a fresh ``zoo.cfg`` and data folder, launches the JVM and returns once
    a kazoo client has connected and read ``/``. ``stop()`` ends the JVM and removes the
    folder. ``stop_process()`` + ``restart()`` (or ``pause()`` + ``resume()``) take the server
    away and bring it back with its data and sessions (a paused server's clock of sessions is
    frozen too, so no session expires meanwhile).
    """

    SERVICE = "reference ZooKeeper"
    LOG_NAME = "server.log"
    ERROR = ReferenceZooKeeperError
    PORT_NAME = "ZooKeeper port"

    def __init__(self, settings: ZooKeeperSettings | None = None, *, version: str | None = None,
                 base_dir: str | os.PathLike[str] | None = None, die_with_parent: bool = True) -> None:
        """``base_dir``: where the temp folder goes (default: the system's temp folder).
        ``die_with_parent=False`` lets the server outlive this process (``martlet cluster
        up``): no parent-death signal and no finalizer that ends it."""
        super().__init__(base_dir)
        self.settings = settings or ZooKeeperSettings()
        self.startup_timeout_s = self.settings.startup_timeout_s
        self.stop_timeout_s = self.settings.stop_timeout_s
        self.version = version or zookeeper_version()
        self.die_with_parent = die_with_parent
        self._classpath: str | None = None

    # -- public state --------------------------------------------------------------------

    @property
    def address(self) -> str:
        """"127.0.0.1:PORT", the connect string of kazoo and of ``--zookeeper``."""
        if self.port is None:
            raise ReferenceZooKeeperError("reference ZooKeeper is not started")
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"ReferenceZooKeeper({self.version}, {self.host}:{self.port}, {state})"

    # -- lifecycle (stop, stop_process, restart, pause, resume: RestartableService) -------

    def start(self) -> Self:
        """Fetch the jars if needed, start a fresh server and wait until a client connects."""
        self._check_not_started()
        self._classpath = zookeeper_classpath(self.version)
        self._start_fresh("martlet-refzk-")
        _log.info("reference ZooKeeper up at %s in %.1fs", self.address, self.startup_seconds)
        return self

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
        return [
            java_executable(), f"-Xmx{self.settings.heap}", "-Xms64m", "-Djava.awt.headless=true",
            "-XX:TieredStopAtLevel=1",  # a test server: fast start over peak speed
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.settings.log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", self._classpath, MAIN_CLASS, str(self.workdir / "zoo.cfg"),
        ]  # fmt: skip

    def _launch(self, fresh: bool) -> None:
        """Write the configuration and start the JVM (the data folder is kept over restarts)."""
        assert self.workdir is not None
        (self.workdir / "data").mkdir(exist_ok=True)
        write_atomic(self.workdir / "zoo.cfg", self.config_text())
        self._popen_owned(self._command())

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.startup_timeout_s
        self._wait_port(deadline, "waiting for the client port", 0.05)
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
