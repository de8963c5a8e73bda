"""A broker's CPU seconds and resident memory, read from /proc (Linux only).

CPU is utime + stime of the whole process (every thread; for Kafka, the JVM with its
garbage collector and compiler threads). Peak RSS over a workload comes from sampling
VmRSS on a background thread, since VmHWM only ever rises over the process's life.

Beside the broker a probe reads the CPU of the process serving its store (for a Martlet on
HDFS, the reference HDFS's JVM) and the whole machine's busy time: what bounds a figure
shows in them (a machine near 100 % busy is bound by CPU, and then CPU-s per GB decide;
one well below it is bound by waiting: a round trip, a sync).
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.05


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)


def machine_cpu_seconds() -> float:
    """CPU-s the machine spent busy, over all cores, since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Probe:
    """`with Probe(pid) as probe:` around a workload; then `cpu_s` and `peak_rss_bytes` of the
    broker, `store_cpu_s` of `store_pid` (if given), and the machine's `busy_cpu_s` over
    `seconds`. With pid None (an endpoint not started here) the broker's stay None."""

    def __init__(self, pid: int | None, store_pid: int | None = None) -> None:
        self.pid = pid
        self.store_pid = store_pid
        self.cpu_s: float | None = None
        self.peak_rss_bytes: int | None = None
        self.store_cpu_s: float | None = None
        self.busy_cpu_s = 0.0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_start = 0.0
        self._store_cpu_start = 0.0
        self._started = (0.0, 0.0)  # monotonic clock, machine busy CPU-s

    def __enter__(self) -> Probe:
        self._started = (time.monotonic(), machine_cpu_seconds())
        if self.store_pid is not None:
            self._store_cpu_start = cpu_seconds(self.store_pid)
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
        if kind is None:
            self.seconds = time.monotonic() - self._started[0]
            self.busy_cpu_s = machine_cpu_seconds() - self._started[1]
            if self.store_pid is not None:
                self.store_cpu_s = cpu_seconds(self.store_pid) - self._store_cpu_start
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self.pid is not None and kind is None:
                self.cpu_s = cpu_seconds(self.pid) - self._cpu_start
