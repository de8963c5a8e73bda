"""Results of a compat run: comparing observations between endpoints, known findings
(compat/FINDINGS.md), the scenario x client table, the JSON report and the summary line.

Statuses of a cell (one scenario through one client):
    pass    every expectation held (and, with a reference, the observations matched)
    fail    an expectation failed, or the observations differ from the reference's
    known   a failure listed in compat/FINDINGS.md (only with --expect-findings)
    fixed   listed in compat/FINDINGS.md but passed: remove the entry (counts as unexpected)
    n/a     the client cannot express the scenario (or is not available here), with why
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, KNOWN, FIXED, NOT_APPLICABLE = "pass", "fail", "known", "fixed", "n/a"
FINDINGS_PATH = Path(__file__).with_name("FINDINGS.md")
_FENCE = re.compile(r"^```findings\s*$(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


@dataclass
class Cell:
    scenario: str
    client: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    observations: dict[str, Any] | None = None
    reference_observations: dict[str, Any] | None = None
    differences: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    rank: int
    scenario: str
    client: str  # a client name or "*" (every client the scenario applies to)
    reason: str

    def matches(self, scenario: str, client: str) -> bool:
        return self.scenario == scenario and self.client in ("*", client)


# -- comparing observations -------------------------------------------------------------------

def differences(target: Any, reference: Any, path: str = "") -> list[str]:
    """Paths where two observations differ, skipping keys that start with "_" (volatile:
    ids, broker-chosen timestamps, raw version tables)."""
    if isinstance(target, dict) and isinstance(reference, dict):
        out: list[str] = []
        for key in sorted(set(target) | set(reference), key=str):
            if str(key).startswith("_"):
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in target or key not in reference:
                out.append(f"{where}: {'missing' if key not in target else _short(target[key])} vs "
                           f"{'missing' if key not in reference else _short(reference[key])} (reference)")
            else:
                out += differences(target[key], reference[key], where)
        return out
    if isinstance(target, list) and isinstance(reference, list) and len(target) == len(reference):
        return [d for i, (a, b) in enumerate(zip(target, reference)) for d in differences(a, b, f"{path}[{i}]")]
    if target != reference:
        return [f"{path or '.'}: {_short(target)} vs {_short(reference)} (reference)"]
    return []


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def combine(target: Cell, reference: Cell | None) -> Cell:
    """One cell from the target's run and, when given, the reference's run of the same
    scenario through the same client."""
    if reference is None:
        return target
    target.reference_observations = reference.observations
    if target.status == NOT_APPLICABLE or reference.status == NOT_APPLICABLE:
        target.status, target.reason = NOT_APPLICABLE, target.reason or reference.reason
    elif target.status == FAIL:
        if reference.status == FAIL:
            target.reason += f" (the reference failed too: {reference.reason})"
    elif reference.status == FAIL:
        target.status, target.reason = FAIL, f"the reference failed: {reference.reason}"
    else:
        target.differences = differences(target.observations, reference.observations)
        if target.differences:
            target.status = FAIL
            target.reason = "differs from the reference: " + "; ".join(target.differences[:5])
    return target


# -- known findings ---------------------------------------------------------------------------

def parse_findings(text: str) -> list[Finding]:
    """Entries from the ```findings fenced blocks: `rank | scenario | client | reason` per
    line; blank lines and lines starting with # are skipped."""
    found: list[Finding] = []
    for block in _FENCE.findall(text):
        for number, line in enumerate(block.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|", 3)]
            if len(parts) != 4 or not parts[0].isdigit() or not parts[1] or not parts[2]:
                raise ValueError(f"findings line {number} is not `rank | scenario | client | reason`: {line!r}")
            found.append(Finding(int(parts[0]), parts[1], parts[2], parts[3]))
    return found


def load_findings(path: Path = FINDINGS_PATH) -> list[Finding]:
    return parse_findings(path.read_text()) if path.exists() else []


def apply_findings(cells: list[Cell], findings: list[Finding]) -> list[str]:
    """Listed failures become known, listed passes become fixed; returns problems with the
    list itself (entries naming a scenario that does not exist)."""
    for cell in cells:
        listed = next((f for f in findings if f.matches(cell.scenario, cell.client)), None)
        if listed is None:
            continue
        if cell.status == FAIL:
            cell.status = KNOWN
            cell.reason = f"finding #{listed.rank}: {listed.reason} [observed: {cell.reason}]"
        elif cell.status == PASS:
            cell.status = FIXED
            cell.reason = f"listed as finding #{listed.rank} in compat/FINDINGS.md but passed: remove the entry"
    scenarios = {cell.scenario for cell in cells}
    return [f"finding #{f.rank} names unknown scenario {f.scenario!r}" for f in findings
            if f.scenario not in scenarios]


# -- output -----------------------------------------------------------------------------------

def counts(cells: list[Cell]) -> dict[str, int]:
    out = {status: 0 for status in (PASS, FAIL, KNOWN, FIXED, NOT_APPLICABLE)}
    for cell in cells:
        out[cell.status] += 1
    return out


def unexpected(cells: list[Cell]) -> list[Cell]:
    return [cell for cell in cells if cell.status in (FAIL, FIXED)]


def table(cells: list[Cell], scenarios: list[str], clients: list[str]) -> str:
    """The scenario x client grid, then one line per cell that did not pass, with why."""
    by_key = {(c.scenario, c.client): c for c in cells}
    width = max([len("scenario"), *map(len, scenarios)])
    widths = [max(len(client), 5) for client in clients]
    lines = ["  ".join(["scenario".ljust(width), *(c.ljust(w) for c, w in zip(clients, widths))])]
    lines.append("  ".join(["-" * width, *("-" * w for w in widths)]))
    for scenario in scenarios:
        row = [scenario.ljust(width)]
        for client, w in zip(clients, widths):
            cell = by_key.get((scenario, client))
            row.append((cell.status.upper() if cell and cell.status == FAIL else cell.status if cell else "-").ljust(w))
        lines.append("  ".join(row).rstrip())
    notes = [f"  {c.scenario} / {c.client}: {c.status}: {c.reason}"
             for scenario in scenarios for client in clients
             if (c := by_key.get((scenario, client))) is not None and c.status != PASS]
    if notes:
        lines += ["", "Reasons (every cell that did not pass):", *notes]
    return "\n".join(lines)


def summary(cells: list[Cell]) -> str:
    """The last line: `N passed, M failed` (known failures count as failed)."""
    n = counts(cells)
    return f"{n[PASS] + n[FIXED]} passed, {n[FAIL] + n[KNOWN]} failed"


def details(cells: list[Cell]) -> str:
    n = counts(cells)
    return (f"{n[KNOWN]} known (compat/FINDINGS.md), {n[FAIL]} unexpected failures, "
            f"{n[FIXED]} listed but passing, {n[NOT_APPLICABLE]} not applicable")


def to_json(cells: list[Cell], meta: dict[str, Any]) -> str:
    document = {**meta, "counts": counts(cells), "summary": summary(cells),
                "results": [asdict(cell) for cell in cells]}
    return json.dumps(document, indent=2, sort_keys=False, default=str)
