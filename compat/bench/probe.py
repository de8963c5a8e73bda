"""A broker's CPU seconds and resident memory, read from /proc (Linux only).

CPU is utime + stime of the whole process (every thread; for Kafka, the JVM with its
garbage collector and compiler threads). Peak RSS over a workload comes from sampling
VmRSS on a background thread, since VmHWM only ever rises over the process's life.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.05


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Probe:
    """`with Probe(pid) as probe:` around a workload; then `cpu_s` and `peak_rss_bytes`.
    With pid None (an endpoint not started here) both stay None."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.cpu_s: float | None = None
        self.peak_rss_bytes: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_start = 0.0

    def __enter__(self) -> Probe:
        if self.pid is not None:
            self._cpu_start = cpu_seconds(self.pid)
            self.peak_rss_bytes = rss_bytes(self.pid)
            self._thread = threading.Thread(target=self._sample, name="bench-probe", daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        assert self.pid is not None
        while not self._stop.wait(SAMPLE_S):
            try:
                rss = rss_bytes(self.pid)
            except OSError:
                return  # the process is gone; the workload reports that
            self.peak_rss_bytes = max(self.peak_rss_bytes or 0, rss)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self.pid is not None and kind is None:
                self.cpu_s = cpu_seconds(self.pid) - self._cpu_start
