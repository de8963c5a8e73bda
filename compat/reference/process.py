"""The processes started for tests on loopback: ending them, and what the reference services
(Kafka, HDFS, ZooKeeper) share.

Each service runs in its own session (start_new_session), so its pid is its process group
and a signal reaches every process it started.
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
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Self

from .maven import tail_text

_log = logging.getLogger(__name__)
KILL_WAIT_S = 30
LOOPBACK = "127.0.0.1"


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def end_process(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGCONT (it may be paused), SIGTERM its process group, wait, SIGKILL if needed."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGCONT, signal.SIGTERM):
        signal_group(proc, sig)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _log.warning("pid %d ignored SIGTERM; killing it", proc.pid)
        signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=KILL_WAIT_S)


def terminate(proc: subprocess.Popen[bytes], workdir: Path | None, timeout_s: float) -> None:
    """End the process, then remove its working folder."""
    try:
        end_process(proc, timeout_s)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


class PortTaken(Exception):
    """A service lost a race for the port picked for it; the caller retries on new ports."""


def start_on_free_ports(start_once: Callable[[], None], after_port_taken: Callable[[], None],
                        after_failure: Callable[[], None], attempts: int = 3) -> str | None:
    """Call ``start_once`` (which picks free ports and starts on them) until it does not lose
    its ports to another process (``PortTaken``), at most ``attempts`` times.

    ``after_port_taken`` cleans up before the next try; on any other error
    ``after_failure`` cleans up and the error goes on. Returns None once started, else the
    last ``PortTaken`` message (the caller says it gave up)."""
    lost = ""
    for _attempt in range(attempts):
        try:
            start_once()
        except PortTaken as exc:
            lost = str(exc)
            after_port_taken()
            continue
        except BaseException:
            after_failure()
            raise
        return None
    return lost


# ----------------------------------------------------------------------------------------
# ports on loopback


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """Distinct ports the OS reports free on ``host`` right now (all bound at once)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def dying_with_parent(command: list[str]) -> list[str]:
    """``command`` under ``setpriv --pdeathsig KILL``, so it dies with this process when this
    one is killed outright. The parent-death signal belongs to the forking thread, so only
    when started from the main thread (elsewhere ``command`` is returned as it is)."""
    setpriv = shutil.which("setpriv")
    if setpriv and threading.current_thread() is threading.main_thread():
        return [setpriv, "--pdeathsig", "KILL", "--", *command]
    return command


# ----------------------------------------------------------------------------------------
# a process we started


class ProcessHandle:
    """The handle of one process we start (or None before the first start)."""

    _proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def _pause_poll(self, seconds: float) -> None:
        """Bounded poll interval that ends early if the process exits."""
        assert self._proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=seconds)


class LoopbackService(ProcessHandle):
    """A reference service (a JVM) on a free loopback port, in a temp work folder of its own.

    Holds what the reference services share: the process handle, the folder with the log
    file ``LOG_NAME``, and the checks made while waiting for it to serve. A subclass names
    itself (``SERVICE``, used in error messages), its error class (``ERROR``), and sets
    ``startup_timeout_s`` and ``stop_timeout_s``.
    """

    SERVICE: ClassVar[str]  # "reference ZooKeeper"
    LOG_NAME: ClassVar[str]  # "server.log", in the work folder
    ERROR: ClassVar[type[Exception]]
    startup_timeout_s: float
    stop_timeout_s: float

    def __init__(self, base_dir: str | os.PathLike[str] | None) -> None:
        self.base_dir = base_dir
        self.host = LOOPBACK
        self.port: int | None = None
        self.workdir: Path | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def log_path(self) -> Path | None:
        return None if self.workdir is None else self.workdir / self.LOG_NAME

    def log_tail(self, lines: int = 40) -> str:
        path = self.log_path
        if path is None or not path.is_file():
            return f"(no {self.LOG_NAME.removesuffix('.log')} log)"
        return tail_text(path.read_bytes()[-64 * 1024 :], lines)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _popen(self, command: list[str], log_mode: str) -> subprocess.Popen[bytes]:
        """Start ``command`` in the work folder, in its own session, its output to the log."""
        assert self.workdir is not None
        with open(self.workdir / self.LOG_NAME, log_mode) as log:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,
            )  # fmt: skip
        return self._proc

    def _failure_report(self) -> str:
        """What an error about a failed start shows of the log."""
        return self.log_tail()

    def _check_running(self, deadline: float, waiting_for: str) -> None:
        """Raise if the process exited (``PortTaken`` when it lost its port) or ``deadline``
        (monotonic) has passed."""
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            report = self._failure_report()
            if "BindException" in report or "Address already in use" in report:
                raise PortTaken(report)
            raise self.ERROR(f"{self.SERVICE} exited with {code} while {waiting_for}; {report}")
        if time.monotonic() > deadline:
            raise self.ERROR(
                f"{self.SERVICE} not ready within {self.startup_timeout_s:.0f}s "
                f"({waiting_for}); {self._failure_report()}"
            )

    def _wait_port(self, deadline: float, waiting_for: str, poll_s: float) -> None:
        """Wait until ``self.port`` accepts connections (not yet that it serves)."""
        assert self.port is not None
        while not port_open(self.host, self.port, timeout=0.5):
            self._check_running(deadline, waiting_for)
            self._pause_poll(poll_s)


class RestartableService(LoopbackService):
    """A ``LoopbackService`` whose process can be taken away and brought back on the same
    folder and port (``stop_process()`` + ``restart()``, or ``pause()`` + ``resume()``).

    A subclass provides ``_launch(fresh)`` (start the process; ``fresh`` on the first start
    in a new folder) and ``_wait_ready(began)`` (return once it serves), and sets
    ``PORT_NAME`` (what ``restart()`` says was taken) and ``die_with_parent``.
    """

    PORT_NAME: ClassVar[str]  # "ZooKeeper port"
    die_with_parent: bool = True

    def _launch(self, fresh: bool) -> None:
        raise NotImplementedError

    def _wait_ready(self, began: float) -> None:
        raise NotImplementedError

    def _check_not_started(self) -> None:
        if self._proc is not None:
            raise self.ERROR(f"{self.SERVICE} is already started")

    def _start_fresh(self, workdir_prefix: str) -> None:
        """Make a new work folder, then launch on a free port until one is not taken by
        another process before the service binds it (3 tries)."""
        began = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix=workdir_prefix, dir=self.base_dir))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.workdir, True)

        def start_once() -> None:
            (self.port,) = free_ports(1, self.host)
            self._launch(fresh=True)
            self._wait_ready(began)

        lost = start_on_free_ports(start_once, self.stop_process, self.stop)
        if lost is not None:
            self.stop()
            raise self.ERROR(f"{self.SERVICE} could not bind its port 3 times; {lost}")
        self.startup_seconds = time.monotonic() - began

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
        """Start the JVM again on the same folder and port; fails if another process took
        the port meanwhile."""
        if self.workdir is None or self.port is None:
            raise self.ERROR(f"{self.SERVICE} was never started or is stopped")
        self.stop_process()
        began = time.monotonic()
        try:
            self._launch(fresh=False)
            self._wait_ready(began)
        except PortTaken as exc:
            raise self.ERROR(f"{self.PORT_NAME} {self.port} was taken: {exc}") from None
        logging.getLogger(type(self).__module__).info(
            "%s restarted in %.1fs", self.SERVICE, time.monotonic() - began)

    def pause(self) -> None:
        """Freeze the JVM (SIGSTOP): connections stay open but nothing answers."""
        signal_group(self._running(), signal.SIGSTOP)

    def resume(self) -> None:
        """Thaw a paused JVM (SIGCONT)."""
        signal_group(self._running(), signal.SIGCONT)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            raise self.ERROR(f"{self.SERVICE} is not running")
        return self._proc

    def _popen_owned(self, command: list[str]) -> None:
        """Start ``command`` (appending to the log over restarts), dying with this process
        unless ``die_with_parent`` is off."""
        if self.die_with_parent:
            command = dying_with_parent(command)
        proc = self._popen(command, "ab")
        if self.die_with_parent:
            # Ends the JVM even if nobody calls stop(); detached so stop_process() stays the owner.
            weakref.finalize(self, end_process, proc, self.stop_timeout_s).atexit = True
