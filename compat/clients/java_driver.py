"""The Java client (Apache Kafka's kafka-clients) as a compat `Driver`.

Each `JavaDriver` runs one JVM, ``java -cp <jars> dev.martlet.compat.driver.Driver <bootstrap>
[<client properties file>]`` (the Maven project in ``compat/clients/java/``; the file, from
--security-config, is merged into every client's config), and speaks the JSON-lines protocol of
``base.py`` with it: one request line on its stdin, one answer line back on its stdout.
Every call waits a bounded time; a JVM that dies or does not answer in time raises
`JavaDriverError` with the tail of the JVM's stderr (a JVM that timed out is killed, since
its answer could no longer be matched to a request).

The driver is built on first use into the git-ignored cache (``<repo>/.cache`` or
``$MARTLET_CACHE_DIR``, the same one compat/reference/kafka.py uses):

    .cache/m2/                              Maven's local repository
    .cache/java-driver/<source hash>/       martlet-java-driver.jar and libs/*.jar
    .cache/java-driver/<source hash>/classpath.txt
                                            marker written last: the jars, relative

The source hash covers ``pom.xml`` and ``src/``, so a changed driver is rebuilt once and an
unchanged one never is (no Maven run, no network).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import IO, Any

from ..reference.kafka import java_executable
from ..reference.maven import cache_dir, cached_classpath, project_hash, read_marker, run_maven, tail_text
from .base import Record, Unsupported

PROJECT_DIR = Path(__file__).resolve().with_name("java")
POM_PATH = PROJECT_DIR / "pom.xml"
MAIN_CLASS = "dev.martlet.compat.driver.Driver"
JAR_NAME = "martlet-java-driver.jar"

START_TIMEOUT_S = 60.0
# Every call may take this long on top of its own timeout_s; the JVM bounds its client calls
# well below it (admin 30 s, send 10 s + delivery 30 s, transaction steps 10 s each).
CALL_TIMEOUT_S = 120.0
CLOSE_TIMEOUT_S = 30.0
STDERR_TAIL_LINES = 30


class JavaDriverError(RuntimeError):
    """The Java driver could not be built or started, died, or did not answer in time."""


class JavaCallError(JavaDriverError):
    """The JVM answered {"error": message}: the call failed without a Kafka error slot to
    report it in (a bad argument, or a client exception in an operation that has none).
    ``detail`` is the JVM's message: "<KAFKA_ERROR_NAME>: ..." for a Kafka error, else
    "<ExceptionClass>: ..."."""

    def __init__(self, op: str, detail: str) -> None:
        super().__init__(f"java driver: {op} failed: {detail}")
        self.op = op
        self.detail = detail


# ----------------------------------------------------------------------------------------
# building


def source_hash() -> str:
    """A hash of the driver's sources (pom.xml and everything under src/)."""
    return project_hash(PROJECT_DIR)


def driver_home() -> Path:
    return cache_dir() / "java-driver" / source_hash()


def driver_classpath() -> str:
    """The classpath of the built driver, building it first when its sources changed."""
    return cached_classpath(driver_home(), _build)


def _build(staging: Path) -> list[str]:
    run_maven(POM_PATH, [f"-Ddriver.out={staging}", "package"], "building the Java driver", JavaDriverError)
    libs = sorted(p.name for p in (staging / "libs").glob("*.jar"))
    if not (staging / JAR_NAME).is_file() or not any(n.startswith("kafka-clients-") for n in libs):
        raise JavaDriverError(f"Maven built no {JAR_NAME} or copied no kafka-clients jar into {staging}")
    shutil.rmtree(staging / "target", ignore_errors=True)
    return [JAR_NAME, *(f"libs/{name}" for name in libs)]


def java_available() -> bool:
    """Whether a JavaDriver can run here: java, and a built driver or Maven to build one."""
    try:
        java_executable()
    except RuntimeError:
        return False
    return read_marker(driver_home()) is not None or shutil.which("mvn") is not None


# ----------------------------------------------------------------------------------------
# the JVM


def _end_jvm(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Close its stdin (it exits at end of input), wait, then kill."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _read_answers(stream: IO[bytes], answers: queue.Queue[bytes | None]) -> None:
    try:
        for line in iter(stream.readline, b""):
            answers.put(line)
    except (OSError, ValueError):
        pass
    finally:
        answers.put(None)


class JavaDriver:
    """One JVM running the Java client; every `base.Driver` method is one request to it."""

    name = "java"

    def __init__(self, bootstrap: str, *, call_timeout_s: float = CALL_TIMEOUT_S,
                 start_timeout_s: float = START_TIMEOUT_S, heap: str = "256m",
                 security_config: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.call_timeout_s = call_timeout_s
        classpath = driver_classpath()
        self._stderr = tempfile.TemporaryFile(prefix="martlet-java-driver-", suffix=".stderr")
        command = [
            java_executable(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=" + os.environ.get("MARTLET_JAVA_DRIVER_LOG", "warn"),
            "-Dorg.slf4j.simpleLogger.logFile=System.err", "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp", classpath, MAIN_CLASS, bootstrap,
            *([str(Path(security_config).resolve())] if security_config else []),
        ]  # fmt: skip
        self._lock = threading.Lock()
        self._answers: queue.Queue[bytes | None] = queue.Queue()
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self._finalizer = weakref.finalize(self, _end_jvm, self._proc, 5.0)
        assert self._proc.stdout is not None
        self._reader = threading.Thread(
            target=_read_answers, args=(self._proc.stdout, self._answers), name="java-driver-reader", daemon=True
        )
        self._reader.start()
        try:
            hello = self._call("hello", {}, timeout_s=start_timeout_s)
        except BaseException:
            self.close()
            raise
        self.client_version: str = hello["version"]

    def __enter__(self) -> JavaDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 64 * 1024))
            return tail_text(self._stderr.read(), lines) or "(empty)"
        except (OSError, ValueError):
            return "(stderr unavailable)"

    # -- the protocol ----------------------------------------------------------------------

    def _call(self, op: str, args: dict[str, Any], timeout_s: float | None = None) -> Any:
        wait_s = self.call_timeout_s if timeout_s is None else timeout_s
        with self._lock:
            proc = self._proc
            if proc is None:
                raise JavaDriverError(f"java driver: {op} called after close()")
            line = json.dumps({"op": op, "args": args}, separators=(",", ":")) + "\n"
            try:
                assert proc.stdin is not None
                proc.stdin.write(line.encode("utf-8"))
                proc.stdin.flush()
            except OSError:
                raise self._died(op) from None
            try:
                answer_line = self._answers.get(timeout=wait_s)
            except queue.Empty:
                proc.kill()
                proc.wait(timeout=30)
                raise JavaDriverError(
                    f"java driver: {op} got no answer within {wait_s:.0f}s; the JVM was killed.\n"
                    f"--- JVM stderr (tail) ---\n{self.stderr_tail()}"
                ) from None
            if answer_line is None:
                raise self._died(op)
        try:
            answer = json.loads(answer_line)
        except ValueError:
            raise JavaDriverError(
                f"java driver: {op} answered a line that is not JSON: {answer_line[:500]!r}"
            ) from None
        if "ok" in answer:
            return answer["ok"]
        if "unsupported" in answer:
            raise Unsupported(answer["unsupported"])
        raise JavaCallError(op, str(answer.get("error", answer)))

    def _died(self, op: str) -> JavaDriverError:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        state = "closed its stdout" if code is None else f"exited with {code}"
        return JavaDriverError(
            f"java driver: the JVM {state} during {op}.\n--- JVM stderr (tail) ---\n{self.stderr_tail()}"
        )

    def close(self) -> None:
        """Ask the JVM to close its clients and exit; kill it if it does not in time."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(JavaDriverError):
                self._call("close", {}, timeout_s=CLOSE_TIMEOUT_S)
        with self._lock:
            self._proc = None
            _end_jvm(proc, CLOSE_TIMEOUT_S)
            self._finalizer.detach()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self._reader.join(timeout=5)
            self._stderr.close()

    # -- admin -----------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> str:
        return self._call("create_topic", {"topic": topic, "partitions": partitions, "configs": configs})

    def delete_topic(self, topic: str) -> str:
        return self._call("delete_topic", {"topic": topic})

    def add_partitions(self, topic: str, total: int) -> str:
        return self._call("add_partitions", {"topic": topic, "total": total})

    def describe_topic(self, topic: str) -> dict[str, Any]:
        return self._call("describe_topic", {"topic": topic})

    def alter_topic_config(self, topic: str, name: str, value: str) -> str:
        return self._call("alter_topic_config", {"topic": topic, "name": name, "value": value})

    def describe_broker(self) -> dict[str, Any]:
        return self._call("describe_broker", {})

    def delete_records(self, topic: str, partition: int, before_offset: int) -> dict[str, Any]:
        return self._call("delete_records", {"topic": topic, "partition": partition, "before_offset": before_offset})

    def api_versions(self) -> dict[str, list[int]]:
        return self._call("api_versions", {})

    # -- produce and consume ---------------------------------------------------------------

    def produce(self, topic: str, records: list[Record], codec: str = "none", acks: str = "all",
                idempotent: bool = False, max_request_bytes: int | None = None) -> list[dict[str, Any]]:
        return self._call("produce", {"topic": topic, "records": records, "codec": codec, "acks": acks,
                                      "idempotent": idempotent, "max_request_bytes": max_request_bytes})

    def consume(self, topic: str, partitions: list[int] | None, from_offset: str | int, max_records: int,
                timeout_s: float, isolation: str = "read_uncommitted") -> list[Record]:
        return self._call("consume", {"topic": topic, "partitions": partitions, "from_offset": from_offset,
                                      "max_records": max_records, "timeout_s": timeout_s, "isolation": isolation},
                          timeout_s=self.call_timeout_s + timeout_s)

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation: str = "read_uncommitted") -> dict[str, Any]:
        return self._call("list_offsets", {"topic": topic, "partition": partition, "spec": spec,
                                           "isolation": isolation})

    def consume_position(self, topic: str, partition: int, from_offset: str | int, until_offset: int,
                         timeout_s: float, isolation: str = "read_uncommitted",
                         group: str | None = None) -> dict[str, Any]:
        return self._call("consume_position", {"topic": topic, "partition": partition, "from_offset": from_offset,
                                               "until_offset": until_offset, "timeout_s": timeout_s,
                                               "isolation": isolation, "group": group},
                          timeout_s=self.call_timeout_s + timeout_s)

    # -- consumer groups -------------------------------------------------------------------

    def member_start(self, handle: str, group: str, topics: list[str], assignor: str | None = None,
                     instance_id: str | None = None, session_timeout_ms: int = 10_000,
                     protocol: str = "classic") -> None:
        self._call("member_start", {"handle": handle, "group": group, "topics": topics, "assignor": assignor,
                                    "instance_id": instance_id, "session_timeout_ms": session_timeout_ms,
                                    "protocol": protocol})

    def reader_start(self, handle: str, topic: str, partitions: list[int]) -> None:
        """A consumer of `partitions` with no group, from the earliest offset; polled with
        member_poll and stopped with member_stop."""
        self._call("reader_start", {"handle": handle, "topic": topic, "partitions": partitions})

    def member_poll(self, handle: str, timeout_s: float) -> dict[str, Any]:
        return self._call("member_poll", {"handle": handle, "timeout_s": timeout_s},
                          timeout_s=self.call_timeout_s + timeout_s)

    def member_commit(self, handle: str) -> str:
        return self._call("member_commit", {"handle": handle})

    def member_stop(self, handle: str) -> None:
        self._call("member_stop", {"handle": handle})

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[str, int]:
        return self._call("committed", {"group": group, "topic": topic, "partitions": partitions})

    # -- transactions ----------------------------------------------------------------------

    def transaction(self, topic: str, records: list[Record], transactional_id: str, commit: bool) -> str:
        return self._call("transaction", {"topic": topic, "records": records,
                                          "transactional_id": transactional_id, "commit": commit})

    def transaction_begin(self, handle: str, transactional_id: str) -> str:
        return self._call("transaction_begin", {"handle": handle, "transactional_id": transactional_id})

    def transaction_send(self, handle: str, topic: str, records: list[Record]) -> list[dict[str, Any]]:
        return self._call("transaction_send", {"handle": handle, "topic": topic, "records": records})

    def transaction_end(self, handle: str, commit: bool) -> str:
        return self._call("transaction_end", {"handle": handle, "commit": commit})


__all__ = ["JavaCallError", "JavaDriver", "JavaDriverError", "driver_classpath", "java_available", "source_hash"]
