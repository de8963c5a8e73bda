"""`martlet bench --udp`: UDP datagrams a second a broker accepts and persists (gateway/udp.py).

A fresh broker listens for datagrams (no rate limit); one sender, in this process, sends
`--datagrams` text datagrams of about DATAGRAM_BYTES (keyless, a topic of PARTITIONS
partitions) as fast as a Python socket loop can. Reported per round: the sender's rate, what
the broker received and accepted (its own counters, read over HTTP; the difference between
sent and received is what the kernel dropped, a full socket buffer), accepted datagrams a
second (from the first send until the last accepted one), and the time until C covers every
accepted record (all persisted). Medians over rounds.
"""

from __future__ import annotations

import json
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .runner import MARTLET_CMD

PARTITIONS = 4
DATAGRAM_BYTES = 100
START_TIMEOUT_S = 60.0
SETTLE_S = 1.0  # the counters standing still this long: the broker has taken every datagram that arrived
PERSISTED_TIMEOUT_S = 120.0
POLL_S = 0.02
HTTP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Round:
    sent: int
    send_s: float
    received: int
    accepted: int
    accepted_s: float  # from the first send until the last accepted datagram was counted
    persisted_s: float  # from the first send until C covered every accepted record

    @property
    def accepted_per_s(self) -> float:
        return self.accepted / self.accepted_s if self.accepted_s else 0.0


def main(datagrams: int, rounds: int, progress: Callable[[str], None] = print) -> int:
    results = []
    for number in range(1, rounds + 1):
        with tempfile.TemporaryDirectory(prefix="martlet-udp-bench-") as folder, _broker(Path(folder)) as (udp, http):
            topic = f"udp-bench-{number}"
            _create_topic(http, topic)
            progress(f"round {number}/{rounds}: {datagrams:,} datagrams")
            results.append(_round(udp, http, topic, datagrams))
    progress("")
    print(_report(results))
    return 0 if all(r.accepted for r in results) else 1


def _round(udp: tuple[str, int], http: str, topic: str, datagrams: int) -> Round:
    payload = [f"{topic}\n".encode() + (b"%08d " % i).ljust(DATAGRAM_BYTES - len(topic) - 1, b"x")
               for i in range(datagrams)]
    before = _udp_counters(http)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        started = time.monotonic()
        for datagram in payload:
            sock.sendto(datagram, udp)
        send_s = time.monotonic() - started
    counters, accepted_at = _settled(http)
    accepted = counters["accepted"] - before["accepted"]
    persisted_at = _wait_persisted(http, topic, counters["records"] - before["records"])
    return Round(datagrams, send_s, counters["received"] - before["received"], accepted,
                 accepted_at - started, persisted_at - started)


def _settled(http: str) -> tuple[dict[str, int], float]:
    """The counters once they stand still for SETTLE_S, and when `accepted` last grew."""
    counters = _udp_counters(http)
    changed = time.monotonic()
    while time.monotonic() - changed < SETTLE_S:
        time.sleep(POLL_S)  # polling the broker's counters; ends SETTLE_S after the last change
        now = _udp_counters(http)
        if now["received"] != counters["received"] or now["accepted"] != counters["accepted"]:
            counters, changed = now, time.monotonic()
    return counters, changed


def _wait_persisted(http: str, topic: str, records: int) -> float:
    deadline = time.monotonic() + PERSISTED_TIMEOUT_S
    while time.monotonic() < deadline:
        doc = _get(http, f"/api/v1/topics/{topic}")
        if sum(int(p["checkpoint"]) for p in doc["partitions"]) >= records:
            return time.monotonic()
        time.sleep(POLL_S)  # polling C, bounded by the deadline
    raise RuntimeError(f"C did not cover {records} records within {PERSISTED_TIMEOUT_S:.0f} s")


def _report(results: list[Round]) -> str:
    def median(values: list[float]) -> float:
        return statistics.median(values)

    lines = [f"UDP front end: {results[0].sent:,} text datagrams of {DATAGRAM_BYTES} bytes from one sender, "
             f"{PARTITIONS} partitions, medians of {len(results)} round(s)",
             f"  sender           {median([r.sent / r.send_s for r in results]):12,.0f} datagrams/s",
             f"  received         {median([r.received for r in results]):12,.0f} of {results[0].sent:,} "
             "(the rest dropped by the kernel: socket buffer full)",
             f"  accepted         {median([r.accepted for r in results]):12,.0f}",
             f"  accepted/s       {median([r.accepted_per_s for r in results]):12,.0f} datagrams/s "
             "(first send to last accepted)",
             f"  persisted after  {median([r.persisted_s for r in results]):12.2f} s (first send until C covers all)"]
    lines += [f"  round {i}: sent in {r.send_s:.2f} s, received {r.received:,}, accepted {r.accepted:,} in "
              f"{r.accepted_s:.2f} s, persisted after {r.persisted_s:.2f} s" for i, r in enumerate(results, 1)]
    return "\n".join(lines)


def _get(http: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{http}{path}", timeout=HTTP_TIMEOUT_S) as answer:
        doc = json.loads(answer.read())
    assert isinstance(doc, dict)
    return doc


def _udp_counters(http: str) -> dict[str, int]:
    udp = _get(http, "/api/v1/status")["udp"]
    assert isinstance(udp, dict)
    return udp


def _create_topic(http: str, topic: str) -> None:
    request = urllib.request.Request(f"http://{http}/api/v1/topics", method="POST",
                                     data=json.dumps({"name": topic, "partitions": PARTITIONS}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
        answer.read()


@contextmanager
def _broker(folder: Path) -> Iterator[tuple[tuple[str, int], str]]:
    """A broker with HTTP and UDP on free ports, no rate limit: ((udp host, port), http)."""
    config = folder / "martlet.toml"
    config.write_text('[udp]\nlisten = "127.0.0.1:0"\nrate_per_source = 0\n')
    args = [*MARTLET_CMD, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir",
            str(folder / "data"), "--config", str(config)]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline().decode().strip() for _ in range(3)]
            if not lines[2].startswith("martlet udp on "):
                raise RuntimeError(f"martlet did not start: {lines!r}")
            host, port = lines[2].rsplit(" ", 1)[-1].rsplit(":", 1)
            yield (host, int(port)), lines[1].rsplit(" ", 1)[-1]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=START_TIMEOUT_S)
