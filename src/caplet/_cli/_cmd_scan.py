"""Commands that read code without running it: scan and audit."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from caplet._cli._arguments import usable_path
from caplet._cli._command import EXIT_REFUSED, Out, Run, command
from caplet._cli._documents import audit_json, jsonable
from caplet._cli._options import Common, Name, StaticOnlyFlag
from caplet._cli._safe import plain
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._scanner import scan_tree
from caplet._version import __version__

if TYPE_CHECKING:
    from rich.progress import TaskID

    from caplet._capabilities._model import Capability
    from caplet._cli._documents import JSONValue
    from caplet._scan._batch import Job
    from caplet._scan._rules import Rule

# What only some scans need is imported where it is used: the manifest loader
# (pydantic) for a folder with a manifest, the batch runner (multiprocessing),
# the index client and SARIF for the options asking for them, the host for a
# plugin name, rich's tables for a run without --json. `caplet scan PATH` starts
# in a budget (issue 16: 150 ms of CPU; tests/_cli/test_app_startup.py).

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
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            help="A plugin name, or paths: directories, Python files, sdists (.tar.gz), wheels "
            "(a directory holding only sdists and wheels scans each of them).",
            show_default=False,
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
    requirements: Annotated[
        Path | None,
        typer.Option(
            "--requirements",
            "-r",
            help="Also scan the releases this requirements file pins (name==version), "
            "downloaded from the index and never run.",
        ),
    ] = None,
    index_url: Annotated[
        str | None,
        typer.Option(
            "--index-url",
            help="Package index for -r (default: CAPLET_INDEX_URL, PIP_INDEX_URL, else PyPI).",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Targets scanned at once (default: every core)."),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            metavar="ADDRESS",
            help="Scan on the Dask cluster whose scheduler is at ADDRESS (tcp://HOST:8786), "
            "one package per task (pip install 'caplet[dask]'; docs/fleet.md).",
        ),
    ] = None,
) -> None:
    """Statically scan plugins or any Python code without running it.

    Exit 1 when a finding at or above --fail-on remains (default: danger).
    """
    out = run.out
    if rules:
        from caplet._scan._rules import RULES

        catalogue = sorted(RULES.values(), key=lambda r: r.rule_id)
        out.emit({"ok": True, "rules": [_rule_json(r) for r in catalogue]})
        if not run.as_json:
            from caplet._cli._render import print_rules

            print_rules(out.console, catalogue)
        return
    names = targets or []
    if not names and requirements is None:
        run.usage("caplet scan needs a TARGET (a plugin name or a path), or --rules")
    if dask is not None and jobs is not None:
        run.usage("--dask and --jobs exclude each other: the cluster decides how many run")
    threshold = {
        FailOn.danger: 0,
        FailOn.warning: 1,
        FailOn.info: 2,
        FailOn.never: -1,
    }[fail_on]
    batch = requirements is not None or len(names) > 1 or _archive_folder(names)
    if batch or dask is not None:
        options = _Batch(requirements, index_url, mode, jobs, sarif, threshold, verbose, dask)
        _scan_batch(run, names, options, single=not batch, fail_on=fail_on)
        return
    report, label = _run_scan(names[0], run, mode)
    if sarif is not None:
        from caplet._scan._sarif import to_sarif, write_sarif

        write_sarif(sarif, to_sarif([report], tool_version=__version__))
    _report(run, report, label, threshold=threshold, verbose=verbose, fail_on=fail_on)


def _report(
    run: Run, report: ScanReport, label: str, *, threshold: int, verbose: bool, fail_on: FailOn
) -> None:
    """One target's document and table; exit 1 when a finding at or above the threshold remains."""
    failing = [f for f in report.findings if not f.covered and f.severity.rank <= threshold]
    run.out.emit(
        _report_json(report, label, ok=not failing),
        failure=f"{len(failing)} finding(s) at or above --fail-on {fail_on.value} in {label}",
    )
    if not run.as_json:
        from caplet._cli._render import print_scan_report

        print_scan_report(run.out.console, report, label=label, verbose=verbose)
    if failing:
        raise typer.Exit(EXIT_REFUSED)


def _report_json(report: ScanReport, label: str, *, ok: bool) -> dict[str, JSONValue]:
    return {
        "ok": ok,
        "target": label,
        "mode": report.mode.value,
        "files_scanned": report.files_scanned,
        "files_parsed": report.files_parsed,
        "bytes_scanned": report.bytes_scanned,
        "findings": [jsonable(f) for f in report.findings],
    }


@dataclass(frozen=True, slots=True)
class _Batch:
    """The options of a scan of several targets."""

    requirements: Path | None
    index_url: str | None
    mode: ScanModeChoice
    jobs: int | None
    sarif: Path | None
    threshold: int
    verbose: bool
    dask: str | None


def _archive_folder(names: Sequence[str]) -> bool:
    """One target that is a folder of sdists and wheels: a batch of packages."""
    from caplet._scan._batch import archives_in

    return len(names) == 1 and Path(names[0]).is_dir() and archives_in(Path(names[0])) is not None


def _scan_batch(
    run: Run, names: Sequence[str], options: _Batch, *, single: bool, fail_on: FailOn
) -> None:
    """Several targets (paths, a folder of sdists, a requirements file) on every core, or
    one package per task on the Dask cluster at ``options.dask`` (caplet._scan_cluster)."""
    from caplet._scan._batch import Job, archives_in, default_jobs, scan_jobs
    from caplet._scan._fetch import default_index, fetch, read_requirements
    from caplet._scan._sarif import to_sarif, write_sarif

    out = run.out
    with tempfile.TemporaryDirectory(prefix="caplet-scan-") as downloads:
        batch: list[Job] = []
        for name in names:
            path = Path(name)
            if not path.exists():
                if options.dask is not None:
                    run.usage(
                        f"caplet scan --dask scans files and directories; {name!r} is neither"
                    )
                run.usage(
                    f"{name!r} is not a path: with several targets each must be a directory, "
                    "a Python file, an sdist or a wheel (scan a plugin by name on its own)"
                )
            folder = archives_in(path) if path.is_dir() else None
            for item in folder or [path]:
                capabilities, chosen = _scan_mode(item, options.mode)
                batch.append(Job(item, capabilities, chosen, str(item)))
        if options.requirements is not None:
            index = options.index_url or default_index(os.environ)
            for pinned in read_requirements(options.requirements, index):
                out.err.print(plain(f"fetching {pinned.name}=={pinned.version}", "dim"))
                archive = fetch(pinned, index, Path(downloads), options.requirements)
                batch.append(Job(archive, (), ScanMode.PACKAGE, f"{pinned.name}=={pinned.version}"))
        with _progress(out, minimum=2) as progress:
            if options.dask is not None:
                from caplet._scan_cluster import scan_on_cluster

                reports = scan_on_cluster(options.dask, batch, _scan_at, progress=progress)
            else:
                workers = options.jobs or default_jobs()
                reports = scan_jobs(batch, workers=workers, progress=progress)
    if options.sarif is not None:
        write_sarif(options.sarif, to_sarif(reports, tool_version=__version__))
    if single and len(reports) == 1:
        # One target (with --dask): the same document and exit as a local scan of it.
        _report(
            run,
            reports[0],
            batch[0].label,
            threshold=options.threshold,
            verbose=options.verbose,
            fail_on=fail_on,
        )
        return
    failed = 0
    documents: list[JSONValue] = []
    for job, report in zip(batch, reports, strict=True):
        failing = any(
            not f.covered and f.severity.rank <= options.threshold for f in report.findings
        )
        failed += failing
        documents.append(_report_json(report, job.label, ok=not failing))
        if not run.as_json:
            from caplet._cli._render import print_scan_report

            print_scan_report(out.console, report, label=job.label, verbose=options.verbose)
    out.emit(
        {"ok": not failed, "targets": documents},
        failure=f"{failed} of {len(batch)} targets have findings at or above --fail-on "
        f"{fail_on.value}",
    )
    if failed:
        raise typer.Exit(EXIT_REFUSED)


def _scan_at(job: Job, path: Path) -> ScanReport:
    """Scan one job's package at ``path`` (on a Dask worker: its own copy of the package)."""
    return scan_tree(path, job.capabilities, mode=job.mode)


def _scan_mode(path: Path, mode: ScanModeChoice) -> tuple[tuple[Capability, ...], ScanMode]:
    """A path's declared capabilities and mode: plugin mode for a folder with a manifest."""
    from caplet._manifest._names import MANIFEST_NAMES

    if (
        path.is_dir()
        and mode is not ScanModeChoice.package
        and any(os.path.lexists(path / n) for n in MANIFEST_NAMES)
    ):
        from caplet._manifest._load import load_manifest

        # A manifest that is there but invalid is an error, never a silent
        # fallback to package mode (which would excuse undeclared capabilities).
        return load_manifest(path).capabilities, ScanMode.PLUGIN
    return (), ScanMode.PLUGIN if mode is ScanModeChoice.plugin else ScanMode.PACKAGE


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
    capabilities, chosen = _scan_mode(path, mode)
    with _progress(run.out) as progress:
        report = scan_tree(path, capabilities, mode=chosen, progress=progress)
    return report, str(path)


#: What only a path looks like: a plugin name is kebab-case, with no dot and no slash.
_PATH_SUFFIXES = (".py", ".whl", ".zip", ".tar.gz", ".tgz", ".tar")


def _looks_like_path(target: str) -> bool:
    """True for a target that can only be a path (``./x``, ``/x``, ``a/b``, ``x.whl``)."""
    return "/" in target or target.startswith((".", "~")) or target.endswith(_PATH_SUFFIXES)


@contextmanager
def _progress(out: Out, minimum: int | None = None) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for scans of many files, whenever stderr is a terminal
    (stdout may be a pipe or a --json document; the bar never mixes with it).

    The bar is drawn at the first update of a scan with at least ``minimum`` files
    (default :data:`_PROGRESS_MIN_FILES`), never before: a small scan ends before a bar
    would help, and drawing one to erase it at once only flashes the terminal.
    """
    if not out.err_is_terminal():
        yield None
        return
    from rich.progress import Progress

    least = _PROGRESS_MIN_FILES if minimum is None else minimum
    bar = Progress(transient=True, console=out.err)
    lock = threading.Lock()  # --jobs: updates come from the pool's threads
    task: TaskID | None = None

    def update(done: int, total: int) -> None:
        nonlocal task
        if total < least:
            return
        with lock:
            if task is None:
                bar.start()
                task = bar.add_task("scanning", total=total)
            drawn = task
        bar.update(drawn, completed=done, total=total)

    try:
        yield update
    finally:
        with lock:
            if task is not None:
                bar.stop()


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
    from caplet._audit._model import Verdict

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
        from caplet._cli._render import print_audit, trust_text

        print_audit(out.console, audit, verbose=verbose)
        out.say("  trust: ", trust_text(info))
    if rejected:
        raise typer.Exit(EXIT_REFUSED)
