"""What a selftest run found: one result per case, the machine's layers, and three renderings.

The verdict of each case is one of four (:class:`CaseStatus`); whether the
run *passes* also depends on the machine: a case whose expected layer is
missing here and that some other layer still contained is reported (never
hidden) but does not fail the run, while a case that was not contained
always does. The renderings are a rich table for people, a JSON document
for programs (``--json``) and a Markdown table for docs/security.md
(``--write``), which is replaced between two marker comments so the rest of
the page stays hand-written.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from caplet._errors import SelftestError
from caplet._selftest._model import Family, HostileCase, Layer

__all__ = [
    "BEGIN_MARKER",
    "END_MARKER",
    "CaseResult",
    "CaseStatus",
    "GatedResult",
    "SelftestReport",
    "markdown_table",
    "print_report",
    "table_case_names",
    "write_markdown",
]

BEGIN_MARKER = "<!-- caplet selftest: begin -->"
END_MARKER = "<!-- caplet selftest: end -->"


class CaseStatus(enum.Enum):
    """How one attack ended."""

    #: Stopped by the layer the case expects, and contained.
    CONTAINED = "contained"
    #: Contained, but the expected layer's evidence is missing (another layer held).
    ELSEWHERE = "contained-elsewhere"
    #: The attack did what it tried to do, or left something behind.
    OPEN = "open"
    #: The case could not be run (the arena or the harness failed).
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class GatedResult:
    """The same attack with every layer on (the static gate first): how it ended."""

    status: CaseStatus
    outcome: str

    @property
    def contained(self) -> bool:
        return self.status in (CaseStatus.CONTAINED, CaseStatus.ELSEWHERE)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's outcome. ``layer_missing``: its expected layer is missing on this machine.

    ``status`` and the rest are the red team's run, the static gate off (the
    kernel layers measured alone); ``with_every_layer`` the same attack on an
    ordinary host (``None`` for the cases about caplet's own layers, which
    run once).
    """

    name: str
    family: Family
    attack: str
    layer: Layer
    status: CaseStatus
    outcome: str
    detail: str = ""
    layer_missing: bool = False
    gap: str = ""
    with_every_layer: GatedResult | None = None

    @property
    def passed(self) -> bool:
        """Contained as expected (or elsewhere where the expected layer is missing, or a
        known gap), and contained with every layer on too."""
        if self.with_every_layer is not None and not self.with_every_layer.contained:
            return False
        match self.status:
            case CaseStatus.CONTAINED:
                return not self.gap
            case CaseStatus.ELSEWHERE:
                return self.layer_missing or bool(self.gap)
            case CaseStatus.OPEN | CaseStatus.ERROR:
                return False

    @classmethod
    def of(
        cls,
        case: HostileCase,
        status: CaseStatus,
        outcome: str,
        detail: str = "",
        *,
        layer_missing: bool,
        with_every_layer: GatedResult | None = None,
    ) -> CaseResult:
        return cls(
            case.name,
            case.family,
            case.attack,
            case.layer,
            status,
            outcome,
            detail,
            layer_missing=layer_missing,
            gap=case.gap,
            with_every_layer=with_every_layer,
        )


@dataclass(frozen=True, slots=True)
class SelftestReport:
    """Every result, and what ``caplet doctor`` says about this machine's layers.

    ``layers`` maps each isolation layer to "" (available) or why it is
    missing; ``details`` are doctor's facts (kernel, Landlock ABI ...).
    """

    results: tuple[CaseResult, ...]
    layers: Mapping[str, str]
    details: Mapping[str, str]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def missing_layers(self) -> tuple[str, ...]:
        return tuple(layer for layer, why in self.layers.items() if why)

    def exposed_by_missing_layers(self) -> dict[str, list[CaseResult]]:
        """Missing layer -> the cases that rely on it (whatever became of them)."""
        exposed: dict[str, list[CaseResult]] = {layer: [] for layer in self.missing_layers}
        for result in self.results:
            layer = result.layer.isolation_layer
            if layer in exposed:
                exposed[layer].append(result)
        return exposed

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in CaseStatus}
        for result in self.results:
            counts[result.status.value] += 1
        return counts

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
            "summary": self.counts(),
            "layers": {
                layer: {"available": not why, "reason": why} for layer, why in self.layers.items()
            },
            "details": dict(self.details),
            "missing_layers": {
                layer: [
                    {"name": r.name, "status": r.status.value, "passed": r.passed} for r in cases
                ]
                for layer, cases in self.exposed_by_missing_layers().items()
            },
            "cases": [
                {
                    "name": r.name,
                    "family": r.family.value,
                    "attack": r.attack,
                    "expected_layer": r.layer.value,
                    "status": r.status.value,
                    "passed": r.passed,
                    "outcome": r.outcome,
                    "detail": r.detail,
                    "layer_missing": r.layer_missing,
                    "gap": r.gap,
                    "static_gate_off": True,
                    "with_every_layer": None
                    if r.with_every_layer is None
                    else {
                        "status": r.with_every_layer.status.value,
                        "outcome": r.with_every_layer.outcome,
                    },
                }
                for r in self.results
            ],
        }


_STYLE = {
    CaseStatus.CONTAINED: "green",
    CaseStatus.ELSEWHERE: "yellow",
    CaseStatus.OPEN: "bold red",
    CaseStatus.ERROR: "red",
}


def _verdict(result: CaseResult) -> str:
    if result.passed:
        return "pass" if result.status is CaseStatus.CONTAINED else "pass (degraded)"
    return "FAIL"


def print_report(console: Console, report: SelftestReport) -> None:
    """The rich table, then the machine's layers and what a missing one leaves open."""
    table = Table(title="caplet selftest: the hostile corpus", show_lines=False)
    columns = (
        "attack",
        "family",
        "expected layer",
        "static gate OFF: kernel layers alone",
        "every layer on",
        "result",
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    for result in report.results:
        outcome = result.outcome if not result.detail else f"{result.outcome} [{result.detail}]"
        gated = result.with_every_layer
        table.add_row(
            Text(f"{result.name}: {result.attack}"),
            result.family.value,
            result.layer.value,
            Text(outcome),
            Text("(same run)")
            if gated is None
            else Text(f"{gated.status.value}: {gated.outcome}", style=_STYLE[gated.status]),
            Text(f"{result.status.value}, {_verdict(result)}", style=_STYLE[result.status]),
        )
    console.print(table)
    console.print("[bold]isolation layers on this machine[/] (caplet doctor):")
    for layer, why in report.layers.items():
        console.print(f"  [green]✓[/] {layer}" if not why else f"  [red]✗[/] {layer}: {why}")
    for layer, cases in report.exposed_by_missing_layers().items():
        names = ", ".join(f"{r.name} ({r.status.value})" for r in cases) or "no case"
        console.print(f"[yellow]missing {layer}[/] leaves these to other layers: {names}")
    counts = ", ".join(f"{n} {status}" for status, n in report.counts().items() if n)
    verdict = "[green]passed[/]" if report.ok else "[bold red]FAILED[/]"
    console.print(f"{len(report.results)} cases in {report.seconds:.1f} s: {counts}; {verdict}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _gated_cell(gated: GatedResult | None) -> str:
    if gated is None:
        return "(same run)"
    return _cell(f"{gated.status.value}: {gated.outcome}")


def markdown_table(report: SelftestReport) -> str:
    """The Markdown table docs/security.md publishes, between its markers."""
    lines = [
        BEGIN_MARKER,
        "",
        "| case | attack | family | expected layer | static gate off: kernel layers alone "
        "| every layer on | result |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| `{r.name}` | {_cell(r.attack)} | {r.family.value} | {r.layer.value} | "
        f"{_cell(r.outcome)} | {_gated_cell(r.with_every_layer)} | "
        f"{r.status.value}, {_verdict(r)} |"
        for r in report.results
    ]
    available = ", ".join(layer for layer, why in report.layers.items() if not why) or "none"
    missing = ", ".join(report.missing_layers) or "none"
    kernel = report.details.get("kernel", "?")
    lines += [
        "",
        f"{len(report.results)} cases, {'all passed' if report.ok else 'FAILED'}; layers "
        f"available: {available}; missing: {missing}; kernel {kernel}.",
        "",
        END_MARKER,
    ]
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, report: SelftestReport) -> None:
    """Write the table to ``path``: between its markers when the file has them, else alone."""
    table = markdown_table(report)
    try:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
    except OSError as exc:
        raise SelftestError(f"cannot read {path} to update its selftest table: {exc}") from exc
    start, end = current.find(BEGIN_MARKER), current.find(END_MARKER)
    if start != -1 and end > start:
        text = current[:start] + table + current[end + len(END_MARKER) :].lstrip("\n")
    else:
        text = "# caplet selftest\n\n" + table
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SelftestError(
            f"cannot write the selftest table to {path}: {exc}; pick a writable path"
        ) from exc


_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|", re.MULTILINE)


def table_case_names(text: str) -> list[str]:
    """The case names in the selftest table of a Markdown page (in order)."""
    start, end = text.find(BEGIN_MARKER), text.find(END_MARKER)
    if start == -1 or end < start:
        return []
    return _ROW.findall(text[start:end])
