"""Runs the scenarios through the chosen clients against one endpoint (and, with a
reference, against that too), then classifies every cell (see report.py).

Work is split into lanes, one per (endpoint, client) and two for the Java client (its driver
is a JVM of its own, so a second one costs no GIL time, and its scenarios take the longest:
one lane ran 110 s of a 125 s suite while the others took 45-63 s). Each lane has its own
driver and takes the next scenario its (endpoint, client) has not started, and lanes run
side by side on threads (`jobs`).
A scenario's topics are deleted when it ends. Every wait inside is bounded by the
scenarios and drivers themselves.

With a security config (a Kafka client properties file) for an endpoint, every driver of that
endpoint applies it to every client it makes (clients/security.py). Before any lane starts, each
chosen client's translation of the file is made (a file one cannot use is a ValueError: a usage
error), and librdkafka logs in once, so that a refused login ends the run at once with the
broker's reason (LoginRefused) instead of failing every cell, some only after their clients'
timeouts. Over a secured endpoint, a scenario that fails because the endpoint would not let the
config's user do something (an ACL its operator did not grant: *_AUTHORIZATION_FAILED) is not
applicable there, with that reason: it says nothing of compatibility.
"""

from __future__ import annotations

import queue
import re
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .clients import registry
from .clients.base import Driver, Unsupported
from .clients.security import ConfigError
from .report import FAIL, NOT_APPLICABLE, PASS, Cell, Finding, apply_findings, combine
from .scenarios import SCENARIOS, Context, Scenario


@dataclass
class Run:
    cells: list[Cell]
    scenarios: list[str]
    clients: list[str]
    seconds: float
    findings_problems: list[str] = field(default_factory=list)


def run_scenario(scenario: Scenario, name: str, driver: Driver, ctx: Context, secured: bool = False) -> Cell:
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
    return _not_authorized(cell) if secured else cell


# An authorization error as the drivers report it: Kafka's name (TOPIC_AUTHORIZATION_FAILED,
# CLUSTER_..., GROUP_..., TRANSACTIONAL_ID_...), or the class of an exception that escaped a
# Python client (TopicAuthorizationFailedError) or the JVM (TopicAuthorizationException).
UNAUTHORIZED = re.compile(r"\b[A-Z_]+_AUTHORIZATION_FAILED\b|\b\w*Authorization(?:Failed)?(?:Error|Exception)\b")


def _not_authorized(cell: Cell) -> Cell:
    """A failure because the secured endpoint's user may not do what the scenario does becomes
    not applicable, saying so."""
    refused = UNAUTHORIZED.search(cell.reason) if cell.status == FAIL else None
    if refused is not None:
        cell.status = NOT_APPLICABLE
        cell.reason = f"the security config's user is not authorized for this ({refused.group()}): {cell.reason}"
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
             progress: Callable[[str], None], security: str | None = None) -> list[Cell]:
    """Takes scenarios from `names` (shared with the client's other lanes on this endpoint)
    until none are left, through one driver (with the endpoint's security config, if any)."""
    why = registry.unavailable(client)
    if why is not None:
        return [Cell(name, client, NOT_APPLICABLE, why) for name in _drain(names)]
    try:
        driver = registry.make(client, bootstrap, security)
    except Exception as exc:
        return [Cell(name, client, FAIL, f"client did not start: {type(exc).__name__}: {exc}")
                for name in _drain(names)]
    cells = []
    try:
        for name in _drain(names):
            ctx = Context(bootstrap, f"compat-{run_id}-{client.replace('-', '')}")
            cell = run_scenario(SCENARIOS[name], name, driver, ctx, secured=security is not None)
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


def run(bootstrap: str, clients: list[str], scenarios: list[str] | None = None,  # noqa: PLR0913 - security: keyword-only
        reference: str | None = None, findings: list[Finding] | None = None, jobs: int | None = None,
        progress: Callable[[str], None] = lambda line: None, *, security: str | None = None,
        reference_security: str | None = None) -> Run:
    """Every scenario through every client against `bootstrap`; with `reference`, the same
    against it and the observations compared; with `findings`, listed failures are known.
    `security` and `reference_security` are client properties files for the two endpoints."""
    started = time.monotonic()
    names = list(SCENARIOS) if scenarios is None else scenarios
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenarios: {', '.join(unknown)}")
    run_id = uuid.uuid4().hex[:6]
    endpoints = [bootstrap] + ([reference] if reference else [])
    securities = {bootstrap: security, **({reference: reference_security} if reference else {})}
    check_security(clients, securities)
    pending = {(endpoint, client): _queue(names) for endpoint in endpoints for client in clients}
    lanes = [lane for lane in pending for _ in range(LANES.get(lane[1], 1))]
    with ThreadPoolExecutor(max_workers=jobs or len(lanes), thread_name_prefix="compat-lane") as pool:
        futures = [(lane, pool.submit(run_lane, lane[0], lane[1], pending[lane], run_id, progress,
                                      securities[lane[0]]))
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


def check_security(clients: list[str], securities: dict[str, str | None]) -> None:
    """Before any client starts: ValueError when a chosen client cannot use an endpoint's
    security config, LoginRefused when an endpoint refuses the login it holds."""
    for endpoint, security in securities.items():
        if security is None:
            continue
        for client in clients:
            if registry.unavailable(client) is None:
                try:
                    registry.check_security(client, security)
                except ConfigError as error:
                    raise ConfigError(f"{client} cannot use the security config {error}") from None
        registry.check_login(endpoint, security)


def default_clients() -> list[str]:
    """All four; Java is reported as not applicable (with why) when its driver is missing."""
    return list(registry.CLIENTS)


def meta(run_: Run, bootstrap: str, reference: str | None, expect_findings: bool, security: str | None = None,
         reference_security: str | None = None) -> dict[str, Any]:
    return {"bootstrap": bootstrap, "reference": reference, "clients": run_.clients, "scenarios": run_.scenarios,
            "expect_findings": expect_findings, "seconds": run_.seconds,
            "findings_problems": run_.findings_problems, "security_config": security,
            "reference_security_config": reference_security if reference else None}
