"""Commands that read code without running it: scan and audit."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from caplet._audit._model import Verdict
from caplet._capabilities._model import Capability
from caplet._cli._arguments import usable_path
from caplet._cli._command import EXIT_REFUSED, Out, Run, command
from caplet._cli._options import Common, Name, StaticOnlyFlag
from caplet._cli._render import (
    JSONValue,
    audit_json,
    jsonable,
    print_audit,
    print_rules,
    print_scan_report,
    trust_text,
)
from caplet._manifest._load import load_manifest
from caplet._manifest._model import MANIFEST_NAMES
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._rules import RULES, Rule
from caplet._scan._sarif import to_sarif, write_sarif
from caplet._scan._scanner import scan_tree
from caplet._version import __version__

__all__ = ["FailOn", "ScanModeChoice"]


class FailOn(StrEnum):
    """Lowest severity that makes `caplet scan` exit 1."""

    danger = "danger"
    warning = "warning"
    info = "info"
    never = "never"


class ScanModeChoice(StrEnum):
    """``auto``: plugin mode for a plugin (a name, or a folder with a manifest)."""

    auto = "auto"
    plugin = "plugin"
    package = "package"


@command("scan", common=Common.DIRS)
def scan_command(
    run: Run,
    *,
    target: Annotated[
        str | None,
        typer.Argument(
            help="A plugin name, a directory, a Python file, an sdist (.tar.gz) or a wheel."
        ),
    ] = None,
    mode: Annotated[
        ScanModeChoice,
        typer.Option(
            "--mode",
            help="plugin: undeclared capabilities are danger; package: only threats are "
            "(auto picks plugin when there is a manifest).",
        ),
    ] = ScanModeChoice.auto,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Exit 1 on uncovered findings at or above this.")
    ] = FailOn.danger,
    sarif: Annotated[
        Path | None,
        typer.Option("--sarif", help="Also write SARIF 2.1.0 to this file.", callback=usable_path),
    ] = None,
    rules: Annotated[
        bool, typer.Option("--rules", help="List the rule catalogue and exit.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List info findings too.")
    ] = False,
) -> None:
    """Statically scan a plugin or any Python code without running it.

    Exit 1 when a finding at or above --fail-on remains (default: danger).
    """
    out = run.out
    if rules:
        catalogue = sorted(RULES.values(), key=lambda r: r.rule_id)
        out.emit({"ok": True, "rules": [_rule_json(r) for r in catalogue]})
        if not run.as_json:
            print_rules(out.console, catalogue)
        return
    if target is None:
        run.usage("caplet scan needs a TARGET (a plugin name or a path), or --rules")
    report, label = _run_scan(target, run, mode)
    if sarif is not None:
        write_sarif(sarif, to_sarif([report], tool_version=__version__))
    threshold = {
        FailOn.danger: 0,
        FailOn.warning: 1,
        FailOn.info: 2,
        FailOn.never: -1,
    }[fail_on]
    failing = [f for f in report.findings if not f.covered and f.severity.rank <= threshold]
    out.emit(
        {
            "ok": not failing,
            "target": label,
            "mode": report.mode.value,
            "files_scanned": report.files_scanned,
            "files_parsed": report.files_parsed,
            "bytes_scanned": report.bytes_scanned,
            "findings": [jsonable(f) for f in report.findings],
        },
        failure=f"{len(failing)} finding(s) at or above --fail-on {fail_on.value} in {label}",
    )
    if not run.as_json:
        print_scan_report(out.console, report, label=label, verbose=verbose)
    if failing:
        raise typer.Exit(EXIT_REFUSED)


def _rule_json(r: Rule) -> dict[str, JSONValue]:
    return {
        "id": r.rule_id,
        "family": r.family.value,
        "kind": r.kind.value,
        "severity": r.severity.value,
        "covered_severity": r.covered_severity.value if r.covered_severity else None,
        "covered_by": r.covered_by.value if r.covered_by else None,
        "rationale": r.rationale,
    }


def _run_scan(target: str, run: Run, mode: ScanModeChoice) -> tuple[ScanReport, str]:
    """Scan ``target``: a path when one exists, else a plugin of the plugins directory."""
    path = Path(target)
    if not path.exists():
        if mode is ScanModeChoice.package or _looks_like_path(target):
            run.usage(f"cannot scan {target!r}: no such file or directory")
        return run.host().scan_report(target), target
    capabilities: tuple[Capability, ...] = ()
    manifest_found = False
    if (
        path.is_dir()
        and mode is not ScanModeChoice.package
        and any(os.path.lexists(path / n) for n in MANIFEST_NAMES)
    ):
        # A manifest that is there but invalid is an error, never a silent
        # fallback to package mode (which would excuse undeclared capabilities).
        capabilities = load_manifest(path).capabilities
        manifest_found = True
    chosen = (
        ScanMode.PLUGIN
        if mode is ScanModeChoice.plugin or (mode is ScanModeChoice.auto and manifest_found)
        else ScanMode.PACKAGE
    )
    with _progress(run.out) as progress:
        report = scan_tree(path, capabilities, mode=chosen, progress=progress)
    return report, str(path)


#: What only a path looks like: a plugin name is kebab-case, with no dot and no slash.
_PATH_SUFFIXES = (".py", ".whl", ".zip", ".tar.gz", ".tgz", ".tar")


def _looks_like_path(target: str) -> bool:
    """True for a target that can only be a path (``./x``, ``/x``, ``a/b``, ``x.whl``)."""
    return "/" in target or target.startswith((".", "~")) or target.endswith(_PATH_SUFFIXES)


@contextmanager
def _progress(out: Out) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for scans of many files, whenever stderr is a terminal
    (stdout may be a pipe or a --json document; the bar never mixes with it)."""
    from rich.progress import Progress

    if not out.err.is_terminal:
        yield None
        return
    with Progress(transient=True, console=out.err) as bar:
        task = bar.add_task("scanning", total=None)

        def update(done: int, total: int) -> None:
            if total >= _PROGRESS_MIN_FILES:
                bar.update(task, completed=done, total=total)

        yield update


#: Fewer files than this scan too fast for a progress bar to help.
_PROGRESS_MIN_FILES = 200


@command("audit", common=Common.DIRS)
def audit_command(
    run: Run,
    *,
    name: Name,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List warning and info findings too.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Re-run the audit instead of using the cached one.")
    ] = False,
    static_only: StaticOnlyFlag = False,
) -> None:
    """Audit a plugin, with the LLM auditor when CAPLET_LLM_* configure one (else static-only).

    Cached by content hash and model; --fresh re-runs. A model that fails makes
    the audit fail closed (HIGH, reject); --static-only chooses a static-only
    audit instead, for this run. The report says what the canary status
    means. Exits 1 when the audit recommends reject.
    """
    out = run.out
    host = run.host()
    audit = host.audit(name, fresh=fresh, static_only=static_only)
    info = host.manager.require_plugin(name)
    rejected = audit.verdict is Verdict.REJECT
    out.emit(
        {
            "ok": not rejected,
            "audit": audit_json(audit),
            "tier": info.tier.value,
            "signature": jsonable(info.signature),
        },
        failure=f"the audit of {name} recommends reject ({audit.risk_level.value})",
    )
    if not run.as_json:
        print_audit(out.console, audit, verbose=verbose)
        out.say("  trust: ", trust_text(info))
    if rejected:
        raise typer.Exit(EXIT_REFUSED)
