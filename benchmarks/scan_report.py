"""The scanner benchmark's tables: terminal output, Markdown, and docs/benchmarks.md.

:func:`build_report` turns one run's measurements into sections (speed beside
``ast.parse`` and the other tools, ``caplet scan`` start-up, recall per malware
class on the holdout and the tune set, benign packages flagged, the bars of
issue 16); :func:`show` prints them, :func:`write` puts them into
``benchmarks/scan_results.md`` and, between its markers, into
``docs/benchmarks.md``.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from rich.console import Console, JustifyMethod
from rich.table import Table
from scan_corpus import CLASS_ORDER, Target

#: The scanner section of docs/benchmarks.md lies between these lines.
BEGIN = "<!-- scan:begin (benchmarks/scan_bench.py --write) -->"
END = "<!-- scan:end -->"
#: The bars of issue 16.
RECALL_BAR = 0.90
BENIGN_BAR = 0.02
SPEED_BAR = 20.0
PARSE_RATIO_BAR = 2.5
STARTUP_BAR_MS = 150.0


class Outcome(Protocol):
    """One tool's verdict on one target (see scan_bench.Outcome)."""

    @property
    def target(self) -> str: ...
    @property
    def wall_s(self) -> float: ...
    @property
    def cpu_s(self) -> float: ...
    @property
    def flags(self) -> tuple[bool, ...]: ...
    @property
    def hits(self) -> tuple[str, ...]: ...
    @property
    def error(self) -> str: ...


class Sweep(Protocol):
    """One tool over one list of targets (see scan_bench.Sweep)."""

    @property
    def outcomes(self) -> Sequence[Outcome]: ...
    @property
    def skipped(self) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """What the report needs of a tool: its name, version and flag mappings."""

    name: str
    version: str
    mappings: tuple[tuple[str, str], ...]  # (label, how it is derived)
    unavailable: str = ""


@dataclass(frozen=True, slots=True)
class Measured:
    """Everything one run measured."""

    tools: tuple[ToolInfo, ...]
    runs: dict[tuple[str, str], Sweep]
    stdlib: Target
    benign: tuple[Target, ...]
    benign_problems: tuple[str, ...]
    tune: tuple[Target, ...]
    holdout: tuple[Target, ...]
    #: ``ast.parse`` of the same trees in the same run: corpus -> (MB, CPU seconds).
    parse: dict[str, tuple[float, float]]
    #: Median CPU milliseconds of ``caplet scan EMPTY --json`` and of ``python -c pass``.
    startup_ms: float
    python_ms: float
    #: CPU milliseconds of the first ``caplet scan`` on an empty cache (self-check replayed).
    first_ms: float
    startup_runs: int
    command: str
    cpu: int
    budget_s: float
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()
    text_columns: frozenset[int] = frozenset({0})  # left-aligned; the others are numbers


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part}/{whole})" if whole else "n/a"


def ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.1f}x" if theirs else "n/a"


def mb(targets: Sequence[Target], names: frozenset[str] | None = None) -> float:
    return sum(t.py_bytes for t in targets if names is None or t.name in names) / 1e6


def _cpu(sweep: Sweep, names: frozenset[str] | None = None) -> float:
    return sum(o.cpu_s for o in sweep.outcomes if names is None or o.target in names)


def _wall(sweep: Sweep, names: frozenset[str] | None = None) -> float:
    return sum(o.wall_s for o in sweep.outcomes if names is None or o.target in names)


def _names(sweep: Sweep) -> frozenset[str]:
    return frozenset(o.target for o in sweep.outcomes)


def _flagged(sweep: Sweep, mapping: int, names: frozenset[str] | None = None) -> int:
    return sum(
        1 for o in sweep.outcomes if o.flags[mapping] and (names is None or o.target in names)
    )


def caplet_speed(m: Measured, corpus: str, targets: Sequence[Target]) -> float:
    """caplet's MB/s of CPU on a corpus."""
    seconds = _cpu(m.runs[("caplet", corpus)])
    return mb(targets) / seconds if seconds else 0.0


def parse_ratio(m: Measured, corpus: str, targets: Sequence[Target]) -> float:
    megabytes, seconds = m.parse[corpus]
    return caplet_speed(m, corpus, targets) / (megabytes / seconds) if seconds else 0.0


def classes(targets: Sequence[Target]) -> list[str]:
    """Classes in a stable order: issue 16's as written, the issue-4 families last."""
    seen = list(dict.fromkeys(t.group for t in targets))
    order = {name: index for index, name in enumerate(CLASS_ORDER)}
    return sorted(seen, key=lambda g: (order.get(g, len(order)), g))


def _preamble(m: Measured) -> list[str]:
    tools = "; ".join(
        f"{t.name} {t.version}" + (f" (NOT RUN: {t.unavailable})" if t.unavailable else "")
        for t in m.tools
    )
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (every tool pinned to CPU "
        f"{m.cpu}), Linux {platform.release()}, Python {platform.python_version()}; run "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Command: `{m.command}`",
        "",
        f"Tools: {tools}.",
        "",
        f"Corpora: stdlib {m.stdlib.py_files} `.py` files, {m.stdlib.py_bytes / 1e6:.1f} MB (no "
        f"tests); benign: {len(m.benign)} of the most downloaded PyPI projects "
        "(benchmarks/top_pypi.txt), latest sdist (a pure wheel when there is none), "
        f"{mb(m.benign):.1f} MB of `.py`, fetched into a cache outside the repository; "
        f"malicious: {len(m.tune)} tune + {len(m.holdout)} holdout reconstructions in "
        f"{len(classes(m.holdout))} classes (benchmarks/malware/README.md).",
        "",
        "Throughput counts the bytes of `.py` files in each tree (the same denominator for "
        "every tool); MB = 10^6 bytes. caplet and `ast.parse` run in this process on one "
        "thread (CPU = `time.process_time`); Bandit and GuardDog run as their CLIs, one process "
        "per package (CPU = `getrusage(RUSAGE_CHILDREN)`, including their start-up).",
    ]
    if m.benign_problems:
        lines += ["", "Benign packages not scanned: " + "; ".join(m.benign_problems) + "."]
    return lines


def _speed(m: Measured) -> Section:
    rows: list[tuple[str, ...]] = []
    corpora = (("stdlib", (m.stdlib,)), ("benign", m.benign))
    for corpus, targets in corpora:
        run = m.runs[("caplet", corpus)]
        megabytes = mb(targets)
        parse_mb, parse_s = m.parse[corpus]
        rows.append(
            (
                f"caplet package mode, {corpus}",
                f"{megabytes:.1f}",
                f"{megabytes / _wall(run):.2f}" if _wall(run) else "-",
                f"{caplet_speed(m, corpus, targets):.2f}",
                "1.0x",
            )
        )
        rows.append(
            (
                f"`ast.parse` of every file, {corpus}",
                f"{parse_mb:.1f}",
                "-",
                f"{parse_mb / parse_s:.2f}",
                ratio(caplet_speed(m, corpus, targets), parse_mb / parse_s),
            )
        )
    notes: list[str] = []
    for tool in m.tools:
        if tool.name == "caplet" or tool.unavailable:
            continue
        for corpus, targets in corpora:
            theirs = m.runs[(tool.name, corpus)]
            names = _names(theirs)
            megabytes = mb(targets, names)
            mine = megabytes / _cpu(m.runs[("caplet", corpus)], names)
            label = f"{tool.name}, {corpus}"
            if theirs.skipped:
                label += f" (first {len(names)} of {len(targets)})"
                notes.append(
                    f"{tool.name} stopped at its {m.budget_s:.0f} s budget on the {corpus} corpus "
                    f"after {len(names)} packages (ranking order); its ratio compares caplet on "
                    "those same packages."
                )
            cpu = _cpu(theirs)
            rows.append(
                (
                    label,
                    f"{megabytes:.1f}",
                    f"{megabytes / _wall(theirs):.2f}" if _wall(theirs) else "-",
                    f"{megabytes / cpu:.2f}" if cpu else "-",
                    ratio(mine, megabytes / cpu) if cpu else "n/a",
                )
            )
    return Section(
        "Throughput on one core",
        ("what", "MB of .py", "MB/s (wall)", "MB/s (CPU)", "caplet is (CPU)"),
        tuple(rows),
        tuple(notes),
    )


def _startup(m: Measured) -> Section:
    return Section(
        "Start-up: `caplet scan EMPTY_DIR --json`, CPU of the whole process",
        ("what", f"median CPU of {m.startup_runs} runs"),
        (
            (
                "`caplet scan` (imports, the rule self-check's probe, an empty scan)",
                f"{m.startup_ms:.0f} ms",
            ),
            (
                "the first `caplet scan` of a cache directory (the self-check replayed)",
                f"{m.first_ms:.0f} ms",
            ),
            ("`python -c pass` (the interpreter alone)", f"{m.python_ms:.0f} ms"),
        ),
    )


def _recall(m: Measured, split: str, targets: Sequence[Target]) -> Section:
    available = [t for t in m.tools if not t.unavailable]
    header = ["class", "samples"] + [
        f"{t.name}: {label}" for t in available for label, _ in t.mappings
    ]
    rows: list[tuple[str, ...]] = []
    groups = classes(targets)
    for group in [*groups, "all"]:
        members = frozenset(t.name for t in targets if group in {"all", t.group})
        cells = [group if group != "all" else "**all classes**", str(len(members))]
        for tool in available:
            sweep = m.runs[(tool.name, split)]
            for index in range(len(tool.mappings)):
                cells.append(pct(_flagged(sweep, index, members), len(members)))
        rows.append(tuple(cells))
    title = (
        "Recall per class, holdout (written before and blind to the rules; a sample counts "
        "when the tool gives it a high-severity finding)"
        if split == "holdout"
        else "Recall per class, tune (the rules were tuned on these)"
    )
    return Section(title, tuple(header), tuple(rows))


def _benign(m: Measured) -> Section:
    rows: list[tuple[str, ...]] = []
    notes = ['How each tool\'s output is mapped to "flagged at high severity":', ""]
    for tool in m.tools:
        if tool.unavailable:
            rows.append((f"{tool.name}: not run here ({tool.unavailable})", "-"))
            continue
        sweep = m.runs[(tool.name, "benign")]
        scanned = len(sweep.outcomes)
        for index, (label, rule) in enumerate(tool.mappings):
            notes.append(f"* {tool.name}, {label}: {rule}.")
            coverage = f" (first {scanned} of {len(m.benign)})" if sweep.skipped else ""
            rows.append((f"{tool.name}: {label}", pct(_flagged(sweep, index), scanned) + coverage))
    errors = [
        f"{tool.name} errors on {corpus}: "
        + ", ".join(
            f"{o.target} ({o.error[:80]})" for o in m.runs[(tool.name, corpus)].outcomes if o.error
        )
        for tool in m.tools
        if not tool.unavailable
        for corpus in ("benign", "tune", "holdout")
        if any(o.error for o in m.runs[(tool.name, corpus)].outcomes)
    ]
    return Section(
        f"Benign packages flagged ({len(m.benign)} most downloaded PyPI projects)",
        ("tool: high-severity mapping", "benign packages flagged"),
        tuple(rows),
        (*notes, "", *errors),
    )


def _families(m: Measured) -> Section:
    sweep = m.runs[("caplet", "benign")]
    found: dict[str, set[str]] = {}
    for outcome in sweep.outcomes:
        for rule in outcome.hits:
            found.setdefault(rule, set()).add(outcome.target)
    rows = tuple(
        (rule, pct(len(pkgs), len(sweep.outcomes)), ", ".join(sorted(pkgs)))
        for rule, pkgs in sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))
    )
    return Section(
        "caplet DANGER findings on the benign corpus, by rule",
        ("rule", "benign packages", "which"),
        rows or (("(none)", "0", ""),),
        (),
        frozenset({0, 2}),
    )


def _bars(m: Measured) -> Section:
    caplet_holdout = m.runs[("caplet", "holdout")]
    recall = []
    for group in classes(m.holdout):
        members = frozenset(t.name for t in m.holdout if t.group == group)
        recall.append((_flagged(caplet_holdout, 0, members) / len(members), group))
    worst, worst_group = min(recall)
    benign = m.runs[("caplet", "benign")]
    share = _flagged(benign, 0) / len(benign.outcomes) if benign.outcomes else 1.0
    speeds = {
        corpus: caplet_speed(m, corpus, targets)
        for corpus, targets in (("stdlib", (m.stdlib,)), ("benign", m.benign))
    }
    ratios = {
        corpus: parse_ratio(m, corpus, targets)
        for corpus, targets in (("stdlib", (m.stdlib,)), ("benign", m.benign))
    }

    def yes(ok: bool) -> str:
        return "yes" if ok else "no"

    tune_missed = [o.target for o in m.runs[("caplet", "tune")].outcomes if not o.flags[0]]
    hold_missed = [
        t.group
        for t in m.holdout
        if not next(o for o in caplet_holdout.outcomes if o.target == t.name).flags[0]
    ]
    return Section(
        "Against the bars (issue 16)",
        ("bar", "measured", "met"),
        (
            (
                f"holdout recall ≥ {RECALL_BAR:.0%} in every class",
                f"lowest: {worst:.1%} ({worst_group})",
                yes(worst >= RECALL_BAR),
            ),
            (
                f"≤ {BENIGN_BAR:.0%} of the benign corpus with any DANGER",
                f"{share:.1%}",
                yes(share <= BENIGN_BAR),
            ),
            (
                f"≥ {SPEED_BAR:.0f} MB/s of CPU, package mode (stdlib; benign)",
                f"{speeds['stdlib']:.1f}; {speeds['benign']:.1f} MB/s",
                yes(min(speeds.values()) >= SPEED_BAR),
            ),
            (
                f"≥ {PARSE_RATIO_BAR}x `ast.parse` of the same tree (stdlib; benign)",
                f"{ratios['stdlib']:.2f}x; {ratios['benign']:.2f}x",
                yes(min(ratios.values()) >= PARSE_RATIO_BAR),
            ),
            (
                f"`caplet scan` start-up ≤ {STARTUP_BAR_MS:.0f} ms CPU",
                f"{m.startup_ms:.0f} ms",
                yes(m.startup_ms <= STARTUP_BAR_MS),
            ),
        ),
        (
            f"caplet misses on tune: {', '.join(tune_missed) or 'none'}; on holdout: "
            f"{len(hold_missed)} (classes: {', '.join(sorted(hold_missed)) or 'none'}; names "
            "withheld on purpose: the holdout must stay unseen by rule tuning).",
            *m.notes,
        ),
    )


def build_report(m: Measured) -> tuple[list[str], list[Section]]:
    return _preamble(m), [
        _bars(m),
        _recall(m, "holdout", m.holdout),
        _recall(m, "tune", m.tune),
        _benign(m),
        _speed(m),
        _startup(m),
        _families(m),
    ]


def markdown(sections: Sequence[Section], preamble: Sequence[str]) -> str:
    out = [BEGIN, "## Static scanner: speed, precision and recall (`benchmarks/scan_bench.py`)", ""]
    out += [*preamble, ""]
    for section in sections:
        out += [f"### {section.title}", ""]
        out.append("| " + " | ".join(section.header) + " |")
        out.append(
            "|"
            + "|".join(
                "---" if i in section.text_columns else "---:" for i in range(len(section.header))
            )
            + "|"
        )
        out += ["| " + " | ".join(row) + " |" for row in section.rows]
        if section.notes:
            out.append("")
            out += list(section.notes)
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def show(sections: Sequence[Section], preamble: Sequence[str]) -> None:
    # Piped output would otherwise wrap every table at 80 columns.
    screen = Console(width=None if sys.stdout.isatty() else 160)
    for line in preamble:
        screen.print(line, markup=False, highlight=False)
    for section in sections:
        table = Table(title=section.title, title_justify="left")
        for index, column in enumerate(section.header):
            justify: JustifyMethod = "left" if index in section.text_columns else "right"
            table.add_column(column, justify=justify, overflow="fold")
        for row in section.rows:
            table.add_row(*row)
        screen.print(table)
        for note in section.notes:
            screen.print(note, markup=False, highlight=False)


def write(text: str, results: Path, docs: Path, say: Callable[[str], None]) -> None:
    """``text`` into ``results`` and, replacing the scanner section, into ``docs``."""
    results.write_text(text, encoding="utf-8")
    page = docs.read_text(encoding="utf-8")
    if BEGIN in page and END in page:
        before, rest = page.split(BEGIN, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
    else:
        # the first run with markers: the old section ends where the soak's begins
        start = page.index("## Static scanner")
        end = page.index("<!-- soak:begin", start)
        before, after = page[:start], page[end:]
    docs.write_text(before + text + "\n" + after, encoding="utf-8")
    say(f"wrote {results.name} and the scanner section of {docs.name}")
