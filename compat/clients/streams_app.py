"""A Kafka Streams word count (kafka-streams 4.4.0, exactly_once_v2) as a process tests run.

The app is the Maven project in ``compat/clients/streams/``: lines from an input topic are
split into words, regrouped by word, counted in a state store with a compacted changelog,
and each new count goes to an output topic as (word, 8-byte big-endian long). It is run as
``java -cp <jars> dev.martlet.compat.streams.WordCount <bootstrap> <application.id> <input>
<output> <state dir>`` and prints ``STATE <name>`` on stdout at each state change of its
KafkaStreams; its logs go to a file the caller names.

Built on first use into the git-ignored cache, as the Java driver is (java_driver.py):

    .cache/streams-app/<source hash>/       martlet-streams-app.jar and libs/*.jar
    .cache/streams-app/<source hash>/classpath.txt   marker written last

The source hash covers ``pom.xml`` and ``src/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from ..reference.kafka import java_executable
from ..reference.maven import cache_dir, cached_classpath, project_hash, run_maven, tail_text
from ..reference.process import dying_with_parent

PROJECT_DIR = Path(__file__).resolve().with_name("streams")
POM_PATH = PROJECT_DIR / "pom.xml"
MAIN_CLASS = "dev.martlet.compat.streams.WordCount"
JAR_NAME = "martlet-streams-app.jar"
STOP_TIMEOUT_S = 40.0  # the app closes within 20 s of SIGTERM
SIGTERM_EXIT = 128 + signal.SIGTERM  # a JVM that ran its shutdown hooks on SIGTERM exits so
KILL_WAIT_S = 30.0


class StreamsAppError(RuntimeError):
    """The streams app could not be built, or did not reach a state in time."""


def source_hash() -> str:
    """A hash of the app's sources (pom.xml and everything under src/)."""
    return project_hash(PROJECT_DIR)


def app_classpath() -> str:
    """The classpath of the built app, building it first when its sources changed."""
    return cached_classpath(cache_dir() / "streams-app" / source_hash(), _build)


def _build(staging: Path) -> list[str]:
    run_maven(POM_PATH, [f"-Dapp.out={staging}", "package"], "building the Kafka Streams app", StreamsAppError)
    libs = sorted(p.name for p in (staging / "libs").glob("*.jar"))
    if not (staging / JAR_NAME).is_file() or not any(n.startswith("kafka-streams-") for n in libs):
        raise StreamsAppError(f"Maven built no {JAR_NAME} or copied no kafka-streams jar into {staging}")
    shutil.rmtree(staging / "target", ignore_errors=True)
    return [JAR_NAME, *(f"libs/{name}" for name in libs)]


class WordCountApp:
    """One run of the word count: started at construction, ended by `kill` or `stop`."""

    def __init__(self, bootstrap: str, application_id: str, input_topic: str, output_topic: str,
                 state_dir: Path, log_path: Path, log_level: str = "info") -> None:
        self.log_path = log_path
        command = [
            java_executable(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            f"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.streams={log_level}",
            "-Dorg.slf4j.simpleLogger.logFile=System.err", "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp", app_classpath(), MAIN_CLASS,
            bootstrap, application_id, input_topic, output_topic, str(state_dir),
        ]  # fmt: skip
        self._states: list[str] = []
        self._changed = threading.Condition()
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(dying_with_parent(command), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=log)
        assert self._proc.stdout is not None
        self._reader = threading.Thread(target=self._read_states, args=(self._proc.stdout,),
                                        name="streams-app-states", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def states(self) -> list[str]:
        with self._changed:
            return list(self._states)

    def _read_states(self, stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in iter(stream.readline, b""):
                text = line.decode("utf-8", "replace").strip()
                if text.startswith("STATE "):
                    with self._changed:
                        self._states.append(text.removeprefix("STATE "))
                        self._changed.notify_all()
        with self._changed:
            self._states.append("EXITED")
            self._changed.notify_all()

    def wait_state(self, state: str, timeout_s: float) -> None:
        """Wait until the app has reported `state`; raise if it exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while state not in self._states:
                left = deadline - time.monotonic()
                if "EXITED" in self._states or left <= 0:
                    raise StreamsAppError(f"the streams app did not reach {state} within {timeout_s:.0f}s "
                                          f"(states {self._states}); log:\n{self.log_tail()}")
                self._changed.wait(left)

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
        self._proc.wait(timeout=KILL_WAIT_S)
        self._end_reader()

    def stop(self) -> int:
        """SIGTERM (the app closes its KafkaStreams); kill -9 when it does not exit in time.
        Returns the exit code: SIGTERM_EXIT after a clean close, 1 when a stream thread died."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise StreamsAppError(f"the streams app did not stop within {STOP_TIMEOUT_S:.0f}s; "
                                      f"log:\n{self.log_tail()}") from None
        self._end_reader()
        return self._proc.returncode

    def _end_reader(self) -> None:
        self._reader.join(timeout=5)
        if not self._reader.is_alive() and self._proc.stdout is not None:
            self._proc.stdout.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return tail_text(self.log_path.read_bytes()[-256 * 1024:], lines)
        except OSError:
            return "(no log)"


__all__ = ["SIGTERM_EXIT", "StreamsAppError", "WordCountApp", "app_classpath", "source_hash"]
