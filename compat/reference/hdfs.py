"""Real HDFS (one NameNode, one DataNode) for tests, started from code.

Hadoop's MiniDFSCluster runs both nodes in one JVM; its command-line front end
``org.apache.hadoop.test.MiniDFSClusterManager`` ships in ``hadoop-client-minicluster``, so
nothing is compiled here. The jars come from Maven Central through ``hdfs-pom.xml`` beside
this file and are cached like the reference Kafka's (see ``kafka.py``):

    .cache/m2/                        Maven's local repository (shared with Kafka)
    .cache/hadoop-<version>/libs/     the runtime jars, one flat folder
    .cache/hadoop-<version>/classpath.txt
                                      marker written last; when it and its jars exist, no
                                      Maven run and no network call happen

Every listening socket is on 127.0.0.1: MiniDFSCluster binds the NameNode's RPC and HTTP
addresses and all DataNode addresses to 127.0.0.1 itself; the RPC port is chosen here, the
others by the OS. A cluster keeps its data in one temp folder, so ``stop_process()`` followed
by ``restart()`` brings the same namespace and blocks back on the same NameNode port
(started without ``-format``); ``pause()``/``resume()`` freeze and thaw the JVM instead
(SIGSTOP/SIGCONT: clients see a silent peer rather than a refused connection).

``MARTLET_HADOOP_VERSION`` picks another Hadoop version (default ``DEFAULT_HADOOP_VERSION``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path

from .kafka import free_ports, java_executable, port_open
from .maven import cache_dir, cached_classpath, copy_dependencies, tail_text
from .process import PortTaken, end_process, signal_group

DEFAULT_HADOOP_VERSION = "3.5.0"
MAIN_CLASS = "org.apache.hadoop.test.MiniDFSClusterManager"
POM_PATH = Path(__file__).resolve().with_name("hdfs-pom.xml")
LOOPBACK = "127.0.0.1"
PROBE_DIR = "/.martlet-probe"

_log = logging.getLogger(__name__)


class ReferenceHdfsError(RuntimeError):
    """The reference HDFS could not be fetched, started or stopped."""


# ----------------------------------------------------------------------------------------
# jars and classpath


def hadoop_version() -> str:
    return os.environ.get("MARTLET_HADOOP_VERSION") or DEFAULT_HADOOP_VERSION


def hadoop_home(version: str | None = None) -> Path:
    return cache_dir() / f"hadoop-{version or hadoop_version()}"


def hdfs_classpath(version: str | None = None) -> str:
    """Ensure the jars of ``version`` are cached (fetching them once) and return the classpath."""
    version = version or hadoop_version()
    fill = copy_dependencies(POM_PATH, {"hadoop.version": version}, [f"hadoop-client-minicluster-{version}.jar"],
                             f"fetching Hadoop {version} jars", ReferenceHdfsError)
    return cached_classpath(hadoop_home(version), fill)


# ----------------------------------------------------------------------------------------
# the cluster


class ReferenceHdfs:
    """One MiniDFSCluster (NameNode + DataNode, replication 1) on free loopback ports.

    ``start()`` formats a fresh temp folder, launches the JVM and returns once the NameNode
    port is open and hdfs-native has written, read back and deleted a probe file.
    ``stop()`` ends the JVM and removes the folder. ``stop_process()`` + ``restart()`` (or
    ``pause()`` + ``resume()``) take HDFS away and bring it back with its data.
    """

    def __init__(self, *, version: str | None = None, startup_timeout_s: float = 60.0,
                 stop_timeout_s: float = 20.0, heap: str = "512m",
                 base_dir: str | os.PathLike[str] | None = None) -> None:
        self.version = version or hadoop_version()
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.heap = heap
        self.base_dir = base_dir
        self.host = LOOPBACK
        self.port: int | None = None
        self.workdir: Path | None = None
        self.startup_seconds: float | None = None
        self._classpath: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    # -- public state --------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise ReferenceHdfsError("reference HDFS is not started")
        return f"hdfs://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path | None:
        return None if self.workdir is None else self.workdir / "cluster.log"

    def log_tail(self, lines: int = 40) -> str:
        path = self.log_path
        if path is None or not path.is_file():
            return "(no cluster log)"
        return tail_text(path.read_bytes()[-64 * 1024 :], lines)

    def __enter__(self) -> ReferenceHdfs:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> ReferenceHdfs:
        """Fetch the jars if needed, format a fresh cluster and wait until it serves."""
        if self._proc is not None:
            raise ReferenceHdfsError("reference HDFS is already started")
        self._classpath = hdfs_classpath(self.version)
        began = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix="martlet-refhdfs-", dir=self.base_dir))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.workdir, True)
        lost = ""
        for _attempt in range(3):
            (self.port,) = free_ports(1, self.host)
            try:
                self._launch(format_storage=True)
                self._wait_ready(began)
            except PortTaken as exc:
                lost = str(exc)
                self.stop_process()
                continue
            except BaseException:
                self.stop()
                raise
            self.startup_seconds = time.monotonic() - began
            _log.info("reference HDFS up at %s in %.1fs", self.url, self.startup_seconds)
            return self
        self.stop()
        raise ReferenceHdfsError(f"reference HDFS could not bind its port 3 times; {lost}")

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
            end_process(proc, self.stop_timeout_s)

    def restart(self) -> None:
        """Start the JVM again on the same folder and NameNode port, without formatting.

        The DataNode gets new ports (the NameNode learns them when it registers). Fails if
        another process took the NameNode port meanwhile."""
        if self.workdir is None or self.port is None:
            raise ReferenceHdfsError("reference HDFS was never started or is stopped")
        self.stop_process()
        began = time.monotonic()
        try:
            self._launch(format_storage=False)
            self._wait_ready(began)
        except PortTaken as exc:
            raise ReferenceHdfsError(f"NameNode port {self.port} was taken: {exc}") from None
        _log.info("reference HDFS restarted in %.1fs", time.monotonic() - began)

    def pause(self) -> None:
        """Freeze the JVM (SIGSTOP): connections stay open but nothing answers."""
        if not self.alive:
            raise ReferenceHdfsError("reference HDFS is not running")
        assert self._proc is not None
        signal_group(self._proc, signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw a paused JVM (SIGCONT)."""
        if not self.alive:
            raise ReferenceHdfsError("reference HDFS is not running")
        assert self._proc is not None
        signal_group(self._proc, signal.SIGCONT)

    # -- steps of start ------------------------------------------------------------------

    def _command(self, format_storage: bool) -> list[str]:
        assert self.workdir is not None and self._classpath is not None
        command = [
            java_executable(), f"-Xmx{self.heap}", "-Xms128m", "-Djava.awt.headless=true",
            "-XX:TieredStopAtLevel=1",  # a test cluster: fast start over peak speed
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            f"-Dtest.build.data={self.workdir / 'build'}",
            "-cp", self._classpath, MAIN_CLASS,
            "-nnport", str(self.port), "-datanodes", "1",
            "-D", f"hdfs.minidfs.basedir={self.workdir / 'dfs'}",
            "-D", "dfs.replication=1",
            "-D", "dfs.namenode.safemode.extension=0",
            "-D", "dfs.permissions.enabled=false",
            "-D", "dfs.heartbeat.interval=1",  # lease recovery waits for a DataNode heartbeat (3 s by default)
            "-writeDetails", str(self.workdir / "details.json"),
        ]  # fmt: skip
        if format_storage:
            command.append("-format")
        # Die with this process when it is killed outright (the parent-death signal belongs to
        # the forking thread, so only when started from the main thread).
        setpriv = shutil.which("setpriv")
        if setpriv and threading.current_thread() is threading.main_thread():
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        return command

    def _launch(self, format_storage: bool) -> None:
        assert self.workdir is not None
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / "details.json").unlink()
        with open(self.workdir / "cluster.log", "ab") as log:
            self._proc = subprocess.Popen(
                self._command(format_storage), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True,
            )  # fmt: skip
        proc, timeout_s = self._proc, self.stop_timeout_s
        # Ends the JVM even if nobody calls stop(); detached so stop_process() stays the owner.
        weakref.finalize(self, end_process, proc, timeout_s).atexit = True

    def _check_running(self, deadline: float, waiting_for: str) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            tail = self.log_tail()
            if "BindException" in tail or "Address already in use" in tail:
                raise PortTaken(tail)
            raise ReferenceHdfsError(f"reference HDFS exited with {code} while {waiting_for}; {tail}")
        if time.monotonic() > deadline:
            raise ReferenceHdfsError(
                f"reference HDFS not ready within {self.startup_timeout_s:.0f}s "
                f"({waiting_for}); {self.log_tail()}"
            )

    def _pause_poll(self, seconds: float) -> None:
        assert self._proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=seconds)

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.startup_timeout_s
        assert self.port is not None
        while not port_open(self.host, self.port, timeout=0.5):
            self._check_running(deadline, "waiting for the NameNode port")
            self._pause_poll(0.1)
        last_error = "no attempt"
        while True:
            self._check_running(deadline, f"waiting for a probe file to round-trip: {last_error}")
            try:
                self._probe()
                return
            except Exception as exc:  # safe mode, no DataNode yet, ...: try again
                last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            self._pause_poll(0.2)

    def _probe(self) -> None:
        """Write, read back and delete a small file: needs the NameNode out of safe mode and a
        DataNode registered, not just an open port."""
        from hdfs_native import Client, WriteOptions

        client = Client(self.url)
        path = f"{PROBE_DIR}/{uuid.uuid4().hex}"
        client.mkdirs(PROBE_DIR, create_parent=True)
        writer = client.create(path, WriteOptions(overwrite=False))
        writer.write(b"probe")
        writer.close()
        reader = client.read(path)
        data = reader.read_range(0, min(5, reader.size))
        client.delete(path, recursive=False)
        if data != b"probe":
            raise ReferenceHdfsError(f"probe file read back as {data!r}")
