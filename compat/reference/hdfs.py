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
import uuid
from pathlib import Path
from typing import Self

from .kafka import java_executable
from .maven import cache_dir, cached_classpath, copy_dependencies
from .process import RestartableService

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


class ReferenceHdfs(RestartableService):
    """One MiniDFSCluster (NameNode + DataNode, replication 1) on free loopback ports.

    ``start()`` formats a fresh temp folder, launches the JVM and returns once the NameNode
    port is open and hdfs-native has written, read back and deleted a probe file.
    ``stop()`` ends the JVM and removes the folder. ``stop_process()`` + ``restart()`` (or
    ``pause()`` + ``resume()``) take HDFS away and bring it back with its data. A restart
    does not format, and the DataNode gets new ports (the NameNode learns them when it
    registers).
    """

    SERVICE = "reference HDFS"
    LOG_NAME = "cluster.log"
    ERROR = ReferenceHdfsError
    PORT_NAME = "NameNode port"

    def __init__(self, *, version: str | None = None, startup_timeout_s: float = 60.0,
                 stop_timeout_s: float = 20.0, heap: str = "512m",
                 base_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(base_dir)
        self.version = version or hadoop_version()
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.heap = heap
        self._classpath: str | None = None

    # -- public state --------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise ReferenceHdfsError("reference HDFS is not started")
        return f"hdfs://{self.host}:{self.port}"

    # -- lifecycle (stop, stop_process, restart, pause, resume: RestartableService) -------

    def start(self) -> Self:
        """Fetch the jars if needed, format a fresh cluster and wait until it serves."""
        self._check_not_started()
        self._classpath = hdfs_classpath(self.version)
        self._start_fresh("martlet-refhdfs-")
        _log.info("reference HDFS up at %s in %.1fs", self.url, self.startup_seconds)
        return self

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
        return command

    def _launch(self, fresh: bool) -> None:
        """Start the JVM; only a fresh cluster formats its storage."""
        assert self.workdir is not None
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / "details.json").unlink()
        self._popen_owned(self._command(format_storage=fresh))

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.startup_timeout_s
        self._wait_port(deadline, "waiting for the NameNode port", 0.1)
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
