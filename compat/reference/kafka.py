"""Real Apache Kafka (KRaft, single node) and its CLI tools, started from code.

The jars come from Maven Central through ``pom.xml`` beside this file and are cached under
``<repo>/.cache`` (or ``$MARTLET_CACHE_DIR``):

    .cache/m2/                       Maven's local repository (self-contained)
    .cache/kafka-<version>/libs/     the runtime jars, one flat folder
    .cache/kafka-<version>/classpath.txt
                                     marker written last: the jar names; when it exists and
                                     its jars do, no Maven run and no network call happen

``MARTLET_KAFKA_VERSION`` picks another Kafka version (default ``DEFAULT_KAFKA_VERSION``).
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from .maven import cache_dir, cached_classpath, copy_dependencies, tail_text, write_atomic
from .process import LoopbackService, dying_with_parent, free_ports, start_on_free_ports, terminate
from .process import port_open as port_open  # callers import it from here

DEFAULT_KAFKA_VERSION = "4.4.0"
BROKER_MAIN_CLASS = "kafka.Kafka"

# CLI tool name -> main class (checked against the 4.4.0 jars; kafka-tools holds all but
# the storage tool, which lives in kafka_2.13).
KAFKA_TOOLS: dict[str, str] = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "configs": "org.apache.kafka.tools.ConfigCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "storage": "kafka.tools.StorageTool",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
}

POM_PATH = Path(__file__).resolve().with_name("pom.xml")
NODE_ID = 1

_log = logging.getLogger(__name__)

_BROKER_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""

# Tools print their data on stdout, so their log lines go to stderr and only from WARN up.
_TOOLS_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""


class ReferenceKafkaError(RuntimeError):
    """The reference Kafka could not be fetched, started or run."""


class ReferenceToolTimeout(ReferenceKafkaError):
    """A Kafka CLI tool did not finish in time; carries what it printed."""

    def __init__(self, message: str, stdout: bytes, stderr: bytes) -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


# ----------------------------------------------------------------------------------------
# jars and classpath


def kafka_version() -> str:
    return os.environ.get("MARTLET_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def kafka_home(version: str | None = None) -> Path:
    return cache_dir() / f"kafka-{version or kafka_version()}"


def kafka_classpath(version: str | None = None) -> str:
    """Ensure the jars of ``version`` are cached (fetching them once) and return the classpath."""
    version = version or kafka_version()
    required = [f"kafka_2.13-{version}.jar", f"kafka-tools-{version}.jar"]
    fill = copy_dependencies(POM_PATH, {"kafka.version": version}, required, f"fetching Kafka {version} jars",
                             ReferenceKafkaError)
    return cached_classpath(kafka_home(version), fill)


def _tools_log_config(version: str) -> Path:
    path = kafka_home(version) / "tools-log4j2.properties"
    if not path.is_file():
        write_atomic(path, _TOOLS_LOG4J)
    return path


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ReferenceKafkaError("no java on PATH and no usable JAVA_HOME")
    return java




# ----------------------------------------------------------------------------------------
# CLI tools


def tool_main_class(tool: str) -> str:
    """Main class of a tool; accepts ``topics``, ``kafka-topics`` and ``kafka-topics.sh``."""
    name = tool.removesuffix(".sh").removeprefix("kafka-")
    try:
        return KAFKA_TOOLS[name]
    except KeyError:
        known = ", ".join(sorted(KAFKA_TOOLS))
        raise ReferenceKafkaError(f"unknown Kafka tool {tool!r}; known: {known}") from None


def tool_command(tool: str, args: Sequence[str], *, version: str | None = None,
                 heap: str = "512m") -> list[str]:
    version = version or kafka_version()
    classpath = kafka_classpath(version)
    return [
        java_executable(), f"-Xmx{heap}", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={_tools_log_config(version)}",
        "-cp", classpath, tool_main_class(tool), *args,
    ]  # fmt: skip


def run_tool(tool: str, args: Sequence[str], timeout_s: float | None,
             input: bytes | None = None, *, capture: bool = True,
             version: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a Kafka CLI tool by its main class; raise ReferenceToolTimeout after ``timeout_s``.

    With ``capture`` (the default) stdout/stderr are returned as bytes and stdin is ``input``
    or empty; without it the tool shares this process's stdin/stdout/stderr.
    """
    command = tool_command(tool, list(args), version=version)
    stdin = subprocess.DEVNULL if (input is None and capture) else None
    try:
        return subprocess.run(
            command, input=input, stdin=stdin, capture_output=capture, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        err = exc.stderr or b""
        raise ReferenceToolTimeout(
            f"kafka tool {tool!r} {list(args)} did not finish within {timeout_s}s\n"
            f"--- stdout (tail) ---\n{tail_text(out)}\n--- stderr (tail) ---\n{tail_text(err)}",
            out, err,
        ) from None


# ----------------------------------------------------------------------------------------
# the broker

def _new_cluster_id() -> str:
    """A random base64 id that does not start with '-' (the storage tool would read it as an
    option; Kafka's own Uuid.randomUuid avoids such ids for the same reason)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class ReferenceKafka(LoopbackService):
    """One real Kafka broker+controller (KRaft combined mode) on free loopback ports.

    ``start()`` formats storage in a fresh temp folder, launches ``kafka.Kafka`` and returns
    once the broker lists itself in a Metadata response. ``stop()`` ends it and removes the
    folder. Usable as a context manager; several can run at once.
    """

    SERVICE = "reference Kafka"
    LOG_NAME = "broker.log"
    ERROR = ReferenceKafkaError

    def __init__(self, *, version: str | None = None, startup_timeout_s: float = 60.0,
                 stop_timeout_s: float = 30.0, heap: str = "512m",
                 config_overrides: Mapping[str, object] | None = None,
                 base_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(base_dir)
        self.version = version or kafka_version()
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.heap = heap
        self.config_overrides = dict(config_overrides or {})
        self.controller_port: int | None = None
        self.cluster_id: str | None = None

    # -- public state --------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        if self.port is None or self._proc is None:
            raise ReferenceKafkaError("reference Kafka is not started")
        return f"{self.host}:{self.port}"

    def log_report(self, lines: int = 30) -> str:
        """The broker log's ERROR/FATAL lines and exception messages, then its last lines."""
        path = self.log_path
        if path is None or not path.is_file():
            return "(no broker log)"
        text = path.read_bytes().decode("utf-8", "replace")
        errors = [
            line for line in text.splitlines()
            if (" ERROR " in line or " FATAL " in line or "Exception" in line)
            and not line.lstrip().startswith("at ")
        ]  # fmt: skip
        report = f"broker log {path}"
        if errors:
            report += " errors (first 15):\n" + "\n".join(errors[:15]) + "\n---"
        return report + f" last lines:\n{tail_text(text, lines)}"

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<ReferenceKafka {self.version} {state} port={self.port} pid={self.pid}>"

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> Self:
        if not self.alive:
            self.start()
        return self

    def start(self) -> Self:
        if self.alive:
            raise ReferenceKafkaError("reference Kafka already started")
        if self._proc is not None:  # stopped earlier: start afresh
            self._discard()
        began = time.monotonic()
        classpath = kafka_classpath(self.version)

        def start_once() -> None:  # a new folder each time: storage is formatted for its ports
            self._start_once(classpath, time.monotonic() + self.startup_timeout_s)

        lost = start_on_free_ports(start_once, self._discard, self._discard)
        if lost is not None:
            raise ReferenceKafkaError(f"reference Kafka could not bind its ports 3 times; {lost}")
        self.startup_seconds = time.monotonic() - began
        _log.info("reference Kafka up at %s in %.1fs", self.bootstrap, self.startup_seconds)
        return self

    def stop(self) -> None:
        """Stop the broker (SIGTERM, bounded wait, SIGKILL) and remove its folder. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        elif self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _discard(self) -> None:
        self.stop()
        self._proc = None
        self._finalizer = None
        self.workdir = None
        self.port = self.controller_port = None

    # -- steps of start ------------------------------------------------------------------

    def _start_once(self, classpath: str, deadline: float) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="martlet-refkafka-", dir=self.base_dir))
        self.port, self.controller_port = free_ports(2, self.host)
        self.cluster_id = _new_cluster_id()
        props = self._write_config()
        self._format_storage(classpath, props, deadline)
        self._launch(classpath, props)
        self._wait_port(deadline, "waiting for its port", 0.1)
        self._wait_broker_registered(deadline)

    def server_properties(self) -> dict[str, str]:
        assert self.workdir is not None
        broker = f"{self.host}:{self.port}"
        controller = f"{self.host}:{self.controller_port}"
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": NODE_ID,
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"PLAINTEXT://{broker},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{broker},CONTROLLER://{controller}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.workdir / "data",
            "num.partitions": 1,
            "default.replication.factor": 1,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        props.update(self.config_overrides)
        return {key: str(value) for key, value in props.items()}

    def _write_config(self) -> Path:
        assert self.workdir is not None
        (self.workdir / "log4j2.properties").write_text(_BROKER_LOG4J)
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        return path

    def _java_base(self, classpath: str, heap: str) -> list[str]:
        assert self.workdir is not None
        return [
            java_executable(), f"-Xmx{heap}", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.workdir}", "-cp", classpath,
        ]  # fmt: skip

    def _format_storage(self, classpath: str, props: Path, deadline: float) -> None:
        assert self.cluster_id is not None
        command = [
            *self._java_base(classpath, "256m"), "-XX:TieredStopAtLevel=1",  # short-lived
            KAFKA_TOOLS["storage"], "format",
            "--cluster-id", self.cluster_id, "--config", str(props), "--standalone",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, stdin=subprocess.DEVNULL, capture_output=True,
                timeout=max(1.0, deadline - time.monotonic()), cwd=self.workdir,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise ReferenceKafkaError(
                "formatting Kafka storage timed out:\n"
                + tail_text((exc.stdout or b"") + (exc.stderr or b""))
            ) from None
        if done.returncode != 0:
            raise ReferenceKafkaError(
                f"formatting Kafka storage failed (exit {done.returncode}):\n"
                + tail_text(done.stdout + done.stderr)
            )

    def _launch(self, classpath: str, props: Path) -> None:
        assert self.workdir is not None
        command = [
            *self._java_base(classpath, self.heap), f"-Xms{min_heap(self.heap)}",
            "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", BROKER_MAIN_CLASS, str(props),
        ]  # fmt: skip
        proc = self._popen(dying_with_parent(command), "wb")
        # Ends the broker and removes its folder even if nobody calls stop(); stop() runs it.
        self._finalizer = weakref.finalize(self, terminate, proc, self.workdir, self.stop_timeout_s)

    def _failure_report(self) -> str:
        return self.log_report()

    def _wait_broker_registered(self, deadline: float) -> None:
        """Poll Metadata until this node is listed (it is only once unfenced)."""
        try:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient
        except ImportError:  # no client library: settle for an ApiVersions answer
            while True:
                self._check_running(deadline, "waiting for an ApiVersions answer")
                if _api_versions_ok(self.host, self.port or 0, timeout=2.0):
                    return
                self._pause_poll(0.2)
        admin = AdminClient({
            "bootstrap.servers": self.bootstrap,
            "logger": logging.getLogger(f"{__name__}.probe"),  # type: ignore[dict-item]  # accepted; not in the stub
        })  # fmt: skip
        while True:
            self._check_running(deadline, "waiting for the broker to register")
            remaining = max(0.5, min(2.0, deadline - time.monotonic()))
            try:
                metadata = admin.list_topics(timeout=remaining)
            except KafkaException:
                self._pause_poll(0.1)
                continue
            if NODE_ID in metadata.brokers:
                return
            self._pause_poll(0.1)


def min_heap(heap: str) -> str:
    """Initial heap: the smaller of 256m and the max heap."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    suffix = heap[-1].lower()
    size = int(heap[:-1]) * units[suffix] if suffix in units else int(heap)
    return heap if size <= 256 << 20 else "256m"


def _api_versions_ok(host: str, port: int, timeout: float) -> bool:
    """Send ApiVersions v0 (valid on every Kafka version) and check for error code 0."""
    client_id = b"martlet-probe"
    request = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            correlation_id, error_code = struct.unpack_from(">ih", _recv_exact(sock, size))
    except (OSError, struct.error, EOFError):
        return False
    return correlation_id == 1 and error_code == 0


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise EOFError("connection closed")
        chunks += chunk
    return bytes(chunks)
