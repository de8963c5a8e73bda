"""Runs the scenarios through the chosen clients against one endpoint (and, with a
reference, against that too), then classifies every cell (see report.py).

Work is split into lanes, one per (endpoint, client) and two for the Java client (its driver
is a JVM of its own, so a second one costs no GIL time, and its scenarios take the longest:
one lane ran 110 s of a 125 s suite while the others took 45-63 s). Each lane has its own
driver and takes the next scenario its (endpoint, client) has not started, and lanes run
side by side on threads (`jobs`).
A scenario's topics are deleted when it ends. Every wait inside is bounded by the
scenarios and drivers themselves.
"""

from __future__ import annotations

import queue
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .clients import registry
from .clients.base import Driver, Unsupported
from .report import FAIL, NOT_APPLICABLE, PASS, Cell, Finding, apply_findings, combine
from .scenarios import SCENARIOS, Context, Scenario


@dataclass
class Run:
    cells: list[Cell]
    scenarios: list[str]
    clients: list[str]
    seconds: float
    findings_problems: list[str] = field(default_factory=list)


def run_scenario(scenario: Scenario, name: str, driver: Driver, ctx: Context) -> Cell:
    started = time.monotonic()
    ctx.scenario = name
    try:
        observations = scenario(driver, ctx)
        cell = Cell(name, driver.name, PASS, "expectations held", observations=observations)
    except Unsupported as exc:
        cell = Cell(name, driver.name, NOT_APPLICABLE, str(exc))
    except AssertionError as exc:
        cell = Cell(name, driver.name, FAIL, str(exc) or "assertion failed")
    except Exception as exc:  # a client raising where the driver did not expect it
        where = traceback.extract_tb(exc.__traceback__)[-1]
        cell = Cell(name, driver.name, FAIL,
                    f"{type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
    _drop_topics(driver, ctx)
    cell.seconds = round(time.monotonic() - started, 2)
    return cell


def _drop_topics(driver: Driver, ctx: Context) -> None:
    for topic in ctx.topics:
        try:
            driver.delete_topic(topic)
        except Exception:  # cleanup only; the cell already has its result
            pass
    ctx.topics = []


LANES = {"java": 2}  # lanes per client, one where not named


def run_lane(bootstrap: str, client: str, names: queue.SimpleQueue[str], run_id: str,
             progress: Callable[[str], None]) -> list[Cell]:
    """Takes scenarios from `names` (shared with the client's other lanes on this endpoint)
    until none are left, through one driver."""
    why = registry.unavailable(client)
    if why is not None:
        return [Cell(name, client, NOT_APPLICABLE, why) for name in _drain(names)]
    try:
        driver = registry.make(client, bootstrap)
    except Exception as exc:
        return [Cell(name, client, FAIL, f"client did not start: {type(exc).__name__}: {exc}")
                for name in _drain(names)]
    cells = []
    try:
        for name in _drain(names):
            ctx = Context(bootstrap, f"compat-{run_id}-{client.replace('-', '')}")
            cell = run_scenario(SCENARIOS[name], name, driver, ctx)
            progress(f"{bootstrap} {client:<12} {name:<32} {cell.status:<5} {cell.seconds:6.1f}s")
            cells.append(cell)
    finally:
        try:
            driver.close()
        except Exception as exc:
            progress(f"{bootstrap} {client}: close failed: {exc!r}")
    return cells


def _queue(names: list[str]) -> queue.SimpleQueue[str]:
    pending: queue.SimpleQueue[str] = queue.SimpleQueue()
    for name in names:
        pending.put(name)
    return pending


def _drain(names: queue.SimpleQueue[str]) -> Iterator[str]:
    while True:
        try:
            yield names.get_nowait()
        except queue.Empty:
            return


def run(bootstrap: str, clients: list[str], scenarios: list[str] | None = None, reference: str | None = None,
        findings: list[Finding] | None = None, jobs: int | None = None,
        progress: Callable[[str], None] = lambda line: None) -> Run:
    """Every scenario through every client against `bootstrap`; with `reference`, the same
    against it and the observations compared; with `findings`, listed failures are known."""
    started = time.monotonic()
    names = list(SCENARIOS) if scenarios is None else scenarios
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenarios: {', '.join(unknown)}")
    run_id = uuid.uuid4().hex[:6]
    endpoints = [bootstrap] + ([reference] if reference else [])
    pending = {(endpoint, client): _queue(names) for endpoint in endpoints for client in clients}
    lanes = [lane for lane in pending for _ in range(LANES.get(lane[1], 1))]
    with ThreadPoolExecutor(max_workers=jobs or len(lanes), thread_name_prefix="compat-lane") as pool:
        futures = [(lane, pool.submit(run_lane, lane[0], lane[1], pending[lane], run_id, progress))
                   for lane in lanes]
        done: dict[tuple[str, str, str], Cell] = {}
        for (endpoint, client), future in futures:
            done.update({(endpoint, client, cell.scenario): cell for cell in future.result()})
    cells = []
    for client in clients:
        for name in names:
            theirs = done.get((reference, client, name)) if reference else None
            cells.append(combine(done[(bootstrap, client, name)], theirs))
    problems = apply_findings(cells, findings) if findings is not None else []
    order = {name: i for i, name in enumerate(names)}
    cells.sort(key=lambda c: (order[c.scenario], clients.index(c.client)))
    return Run(cells, names, clients, round(time.monotonic() - started, 1), problems)


def default_clients() -> list[str]:
    """All four; Java is reported as not applicable (with why) when its driver is missing."""
    return list(registry.CLIENTS)


def meta(run_: Run, bootstrap: str, reference: str | None, expect_findings: bool) -> dict[str, Any]:
    return {"bootstrap": bootstrap, "reference": reference, "clients": run_.clients, "scenarios": run_.scenarios,
            "expect_findings": expect_findings, "seconds": run_.seconds,
            "findings_problems": run_.findings_problems}
