"""The ``caplet`` command line: a thin layer over :class:`caplet.PluginHost`.

Each command parses its arguments, calls the library, renders the result
(rich for people, ``--json`` for programs) and maps the outcome to an exit
code. Only :class:`CapletError` is caught by the commands; anything else is
a bug, which ``main()`` reports in one line (caplet._cli._internal).

Exit codes (also in README and ``caplet --help``):

* 0: success;
* 1: refused, failed, or findings at or above the threshold;
* 2: usage error (bad arguments, unknown command, plugin or config key);
* 3: the environment or state failed (state database, a lock file that
  cannot be written, a full disk, worker start, a broken ``CAPLET_LLM_*``
  setting or an API key the provider refuses, an update that could not be
  rolled back), or ``caplet doctor --check-state`` found the state damaged;
* 70: an internal error, a bug of caplet's (one line; ``CAPLET_DEBUG=1``
  shows the traceback).

``caplet shell`` on a terminal exits 0 when left (``/exit``, ``/quit``,
Ctrl-D) whatever failed inside it; reading commands from a pipe, it exits
1 when any input failed.

A deep audit whose model cannot be reached is not an error: it falls back to
a static-only result that says so (``caplet audit`` exits 1 only when that
result recommends reject).

Text a plugin or a model controls (manifest fields, reasons, errors, results,
guest output) is shown escaped and never as markup (caplet._cli._safe), and
the consoles escape whatever a missed boundary lets through; ``--json``
documents carry it exactly, their control characters JSON-escaped.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from caplet._atomic import atomic_write
from caplet._audit._model import Verdict
from caplet._capabilities._lint import lint_composition
from caplet._capabilities._model import Capability
from caplet._cli._arguments import usable_path, usable_text
from caplet._cli._internal import EXIT_INTERNAL, debug_enabled, report_internal_error
from caplet._cli._prompt import NoInputPrompter, RichPrompter
from caplet._cli._render import (
    JSONValue,
    audit_json,
    broken_json,
    hook_results_json,
    jsonable,
    plugin_json,
    print_audit,
    print_findings,
    print_hook_results,
    print_hook_statuses,
    print_plugins,
    print_rules,
    print_scan_report,
    risk_text,
    show_consent,
    trust_text,
)
from caplet._cli._safe import TerminalLogHandler, cli_console, plain
from caplet._config._coerce import unknown_keys_message
from caplet._config._prompt import Prompter
from caplet._display import safe_line, safe_text
from caplet._errors import (
    AuditConfigError,
    CapletError,
    ConfigError,
    GuestError,
    HookError,
    LockfileError,
    LockfileWriteError,
    ManifestError,
    PluginNotFoundError,
    ProviderAuthError,
    SandboxError,
    SignatureError,
    StoreError,
    TrustError,
    UpdateError,
    WorkerStartError,
)
from caplet._host._consent import Consent, ConsentRequest, Widening, describe_widening
from caplet._host._guest_result import GuestResult
from caplet._host._hooks import ErrorPolicy
from caplet._host._host import PluginHost
from caplet._host._loading import LoadingRules
from caplet._host._locked import LockProblem
from caplet._host._records import Outcome
from caplet._host._state_check import check_state
from caplet._manifest._load import load_manifest
from caplet._manifest._model import MANIFEST_NAMES
from caplet._scan._batch import Job, archives_in, default_jobs, scan_jobs
from caplet._scan._fetch import default_index, fetch, read_requirements
from caplet._scan._model import ScanMode, ScanReport
from caplet._scan._rules import RULES, Rule
from caplet._scan._sarif import to_sarif, write_sarif
from caplet._scan._scanner import scan_tree
from caplet._suggest import closest, did_you_mean
from caplet._trust._hashing import SIGNATURE_FILE
from caplet._trust._keyring import Keyring
from caplet._trust._lockfile import (
    LOCKFILE_NAME,
    LockEntry,
    Lockfile,
    read_lockfile,
    update_lockfile,
)
from caplet._trust._paths import default_state_dir
from caplet._trust._signing import (
    PublicKey,
    generate_keypair,
    is_encrypted_secret_key,
    parse_public_key,
    parse_secret_key,
    sign_digest,
)
from caplet._trust._store import Decision
from caplet._version import __version__

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_STATE",
    "EXIT_USAGE",
    "app",
    "main",
]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_STATE = 3


class _SuggestingGroup(TyperGroup):
    """Unknown subcommands get caplet's own suggestion (edit distance <= 3, ties to the first)."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            suggestion = closest(name, self.list_commands(ctx))
            hint = f" Did you mean {suggestion!r}?" if suggestion else ""
            ctx.fail(f"No such command {name!r}.{hint} Run `caplet --help` for the list.")
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=_SuggestingGroup,
    name="caplet",
    help=(
        "Capability-scoped plugins: scan, audit, approve and run untrusted plugins, each in "
        "its own worker.\n\nExit codes: 0 ok; 1 refused, failed or findings; 2 usage error; "
        "3 state or environment error; 70 internal error (a bug: CAPLET_DEBUG=1 shows it)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

PluginsDir = Annotated[
    Path,
    typer.Option(
        "--plugins-dir",
        "-p",
        envvar="CAPLET_PLUGINS_DIR",
        help="Directory holding one folder per plugin.",
        show_default=True,
        callback=usable_path,
    ),
]
StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="CAPLET_STATE_DIR",
        help="Where approvals, audits and the decision log live (default: the user state dir).",
        callback=usable_path,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of text.")]
LockfileOption = Annotated[
    Path | None,
    typer.Option(
        "--lockfile",
        envvar="CAPLET_LOCKFILE",
        help="The lock file (default: caplet.lock beside the plugins directory).",
        callback=usable_path,
    ),
]
LockedOption = Annotated[
    bool | None,
    typer.Option(
        "--locked/--no-locked",
        help="Locked mode: only plugins pinned in the lock file load "
        "(default: on when CAPLET_LOCKED=1 or CI=true).",
    ),
]
YesFlag = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
ConsentFlag = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Consent to enabling a plugin that is not approved, for this process, without "
        "asking (its audit is still shown on stderr).",
    ),
]
StaticOnlyFlag = Annotated[
    bool,
    typer.Option(
        "--static-only",
        help="Audit static-only although CAPLET_LLM_* configure a model (this run only; "
        "labelled so, never cached).",
    ),
]
Name = Annotated[str, typer.Argument(help="Plugin name.", callback=usable_text)]

_DEFAULT_PLUGINS = Path("plugins")


class FailOn(StrEnum):
    """Lowest severity that makes `caplet scan` exit 1."""

    danger = "danger"
    warning = "warning"
    info = "info"
    never = "never"


class _Out:
    """Where a command writes: stdout for results, stderr for people-facing noise."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.console = cli_console()
        self.err = cli_console(stderr=True)

    def emit(self, document: JSONValue) -> None:
        if self.as_json:
            # ensure_ascii (the default) writes control characters as \uXXXX: exact and inert.
            sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")

    def say(self, *parts: Any) -> None:
        if not self.as_json:
            self.console.print(*parts)


def _exit_code(exc: CapletError) -> int:
    if isinstance(exc, PluginNotFoundError):
        return EXIT_USAGE
    if isinstance(
        exc,
        StoreError
        | LockfileWriteError
        | WorkerStartError
        | AuditConfigError
        | ProviderAuthError
        | UpdateError,
    ):
        return EXIT_STATE
    if isinstance(exc, ConfigError | ManifestError | TrustError | SandboxError):
        return EXIT_REFUSED
    return EXIT_REFUSED


def _fail(out: _Out, exc: CapletError) -> NoReturn:
    code = _exit_code(exc)
    if out.as_json:
        out.emit({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}})
    else:
        # The message may quote plugin text, a worker's stderr or a traceback: kept
        # multi-line, escaped, never markup.
        out.err.print(Text("error: ", style="bold red") + plain(str(exc), multiline=True))
    raise typer.Exit(code)


@contextmanager
def _handled(out: _Out) -> Iterator[None]:
    try:
        yield
    except CapletError as exc:
        _fail(out, exc)


def _host(
    plugins_dir: Path,
    state_dir: Path | None,
    out: _Out,
    *,
    lockfile: Path | None = None,
    locked: bool | None = None,
) -> PluginHost:
    prompter: Prompter = RichPrompter(out.err) if sys.stdin.isatty() else NoInputPrompter()
    host = PluginHost(
        plugins_dir,
        state_dir=state_dir,
        prompter=prompter,
        lockfile=lockfile,
        loading=LoadingRules.from_environment(os.environ, locked=locked),
    )
    for broken in host.manager.broken_plugins():
        out.err.print(
            Text("warning: ", style="yellow")
            + plain(f"skipped plugin {broken.directory.name}: {broken.error}", multiline=True)
        )
    return host


def _refused(out: _Out, outcome: Outcome, document: dict[str, JSONValue]) -> NoReturn:
    document.update({"ok": False, "reason": outcome.reason})
    out.emit(document)
    if not out.as_json:
        out.err.print(Text("refused: ", style="bold red") + plain(outcome.reason, multiline=True))
    raise typer.Exit(EXIT_REFUSED)


def _version_callback(value: bool) -> None:
    if value:
        sys.stdout.write(f"caplet {__version__}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Show the version."
        ),
    ] = False,
) -> None:
    """Capability-scoped plugins for Python."""


# -- list / info ------------------------------------------------------------------------------


@app.command("list")
def list_command(
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    as_json: JsonFlag = False,
) -> None:
    """List discovered plugins, their state, approval, risk and trust tier."""
    out = _Out(as_json)
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        plugins = host.list_plugins()
        broken = host.manager.broken_plugins()
        out.emit(
            {
                "ok": True,
                "plugins_dir": str(plugins_dir),
                "locked": host.manager.locked,
                "plugins": [
                    {**plugin_json(p), "quarantine": jsonable(p.quarantine)} for p in plugins
                ],
                "skipped": [broken_json(b) for b in broken],
            }
        )
        if not as_json:
            print_plugins(out.console, plugins, [])
            for info in plugins:
                if info.inert_reason:
                    out.console.print(plain(info.inert_reason, multiline=True))
                if info.quarantine is not None:
                    out.console.print(
                        plain(
                            f"{info.name} quarantined since {_when(info.quarantine.since)}: "
                            f"{info.quarantine.reason} (release it with "
                            f"`caplet release {info.name}`)",
                            multiline=True,
                        )
                    )


@app.command("info")
def info_command(
    name: Name,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one plugin: manifest, capabilities, config schema, trust state."""
    out = _Out(as_json)
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        info = host.manager.require_plugin(name)
        document = plugin_json(info, detail=True)
        lint = lint_composition(info.manifest.capabilities)
        document["composition"] = [jsonable(f) for f in lint]
        document["isolation"] = host.isolation
        hooks = host.hook_status(name)
        document["hooks"] = [jsonable(status) for status in hooks]
        out.emit({"ok": True, **document})
        if as_json:
            return
        # Every value below is the manifest author's (or derived from the folder they
        # shipped): plain() escapes it and keeps it from being read as markup.
        m = info.manifest
        out.say(plain(m.name, "bold") + plain(f" {m.version}: {m.description}"))
        out.say(plain(f"  path:      {info.path}"))
        out.say(f"  hash:      {info.content_hash}")
        out.say(plain(f"  source:    {info.source}"))
        out.say("  trust:     ", trust_text(info))
        out.say(plain(f"  signature: {info.signature.detail}"))
        out.say(f"  approved:  {'yes' if info.approved else 'no'}")
        if info.inert_reason:
            out.say(plain(f"  inert:     {info.inert_reason}", "red", multiline=True))
        if info.audit:
            out.say("  audit:    ", risk_text(info.audit))
        for module in m.modules:
            out.say(plain(f"  module host.{module.name}: {', '.join(module.function_names)}"))
        print_hook_statuses(out.console, hooks)
        declared = ", ".join(safe_line(c.declared) for c in m.capabilities) or "none"
        out.say(plain(f"  capabilities: {declared}"))
        for field in m.config:
            default = "******" if field.secret and field.default is not None else field.default
            flags = " (always asked)" if field.always_prompt else ""
            about = f": {field.description}" if field.description else ""
            out.say(
                plain(
                    f"  config {field.name}: {field.type.value}, default {default!r}{flags}{about}"
                )
            )
        if lint:
            print_findings(out.console, lint, title="Capability composition")
        out.say(f"  isolation: {host.isolation}")


# -- scan / audit -------------------------------------------------------------------------------


class ScanModeChoice(StrEnum):
    """``auto``: plugin mode for a plugin (a name, or a folder with a manifest)."""

    auto = "auto"
    plugin = "plugin"
    package = "package"


@app.command("scan")
def scan_command(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            help="A plugin name, or paths: directories, Python files, sdists (.tar.gz), wheels "
            "(a directory holding only sdists and wheels scans each of them).",
            show_default=False,
        ),
    ] = None,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
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
    as_json: JsonFlag = False,
) -> None:
    """Statically scan plugins or any Python code without running it.

    Exit 1 when a finding at or above --fail-on remains (default: danger).
    """
    out = _Out(as_json)
    with _handled(out):
        if rules:
            catalogue = sorted(RULES.values(), key=lambda r: r.rule_id)
            out.emit({"ok": True, "rules": [_rule_json(r) for r in catalogue]})
            if not as_json:
                print_rules(out.console, catalogue)
            return
        names = targets or []
        if not names and requirements is None:
            _usage(out, "caplet scan needs a TARGET (a plugin name or a path), or --rules")
        threshold = {
            FailOn.danger: 0,
            FailOn.warning: 1,
            FailOn.info: 2,
            FailOn.never: -1,
        }[fail_on]
        if dask is not None and jobs is not None:
            _usage(out, "--dask and --jobs exclude each other: the cluster decides how many run")
        if dask is not None or requirements is not None or len(names) > 1 or _archive_folder(names):
            batch = requirements is not None or len(names) > 1 or _archive_folder(names)
            _scan_batch(
                names,
                requirements,
                index_url,
                mode,
                jobs,
                sarif,
                threshold,
                verbose,
                out,
                dask,
                single=not batch,
            )
            return
        target = names[0]
        report, label = _run_scan(target, plugins_dir, state_dir, mode, out)
        if sarif is not None:
            write_sarif(sarif, to_sarif([report], tool_version=__version__))
        failing = [f for f in report.findings if not f.covered and f.severity.rank <= threshold]
        out.emit(_report_json(report, label, ok=not failing))
        if not as_json:
            print_scan_report(out.console, report, label=label, verbose=verbose)
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


def _archive_folder(names: Sequence[str]) -> bool:
    """One target that is a folder of sdists and wheels: a batch of packages."""
    return len(names) == 1 and Path(names[0]).is_dir() and archives_in(Path(names[0])) is not None


def _scan_batch(
    names: Sequence[str],
    requirements: Path | None,
    index_url: str | None,
    mode: ScanModeChoice,
    jobs: int | None,
    sarif: Path | None,
    threshold: int,
    verbose: bool,
    out: _Out,
    dask: str | None = None,
    *,
    single: bool = False,
) -> None:
    """Several targets (paths, a folder of sdists, a requirements file), on every core,
    or one package per task on the Dask cluster at ``dask`` (caplet._scan_cluster)."""
    with tempfile.TemporaryDirectory(prefix="caplet-scan-") as downloads:
        batch: list[Job] = []
        for name in names:
            path = Path(name)
            if not path.exists():
                if dask is not None:
                    _usage(
                        out, f"caplet scan --dask scans files and directories; {name!r} is neither"
                    )
                _usage(
                    out,
                    f"{name!r} is not a path: with several targets each must be a directory, "
                    "a Python file, an sdist or a wheel (scan a plugin by name on its own)",
                )
            folder = archives_in(path) if path.is_dir() else None
            for item in folder or [path]:
                capabilities, chosen = _scan_mode(item, mode)
                batch.append(Job(item, capabilities, chosen, str(item)))
        if requirements is not None:
            index = index_url or default_index(os.environ)
            for pinned in read_requirements(requirements):
                out.err.print(plain(f"fetching {pinned.name}=={pinned.version}", "dim"))
                archive = fetch(pinned, index, Path(downloads), requirements)
                batch.append(Job(archive, (), ScanMode.PACKAGE, f"{pinned.name}=={pinned.version}"))
        with _progress(out, minimum=2) as progress:
            if dask is not None:
                from caplet._scan_cluster import scan_on_cluster

                reports = scan_on_cluster(dask, batch, _scan_at, progress=progress)
            else:
                reports = scan_jobs(batch, workers=jobs or default_jobs(), progress=progress)
    if sarif is not None:
        write_sarif(sarif, to_sarif(reports, tool_version=__version__))
    if single and len(reports) == 1:
        # One target (with --dask): the same document and exit as a local scan of it.
        (report,) = reports
        label = batch[0].label
        kept = [f for f in report.findings if not f.covered and f.severity.rank <= threshold]
        out.emit(_report_json(report, label, ok=not kept))
        if not out.as_json:
            print_scan_report(out.console, report, label=label, verbose=verbose)
        if kept:
            raise typer.Exit(EXIT_REFUSED)
        return
    failed = False
    documents: list[JSONValue] = []
    for job, report in zip(batch, reports, strict=True):
        failing = any(not f.covered and f.severity.rank <= threshold for f in report.findings)
        failed = failed or failing
        documents.append(_report_json(report, job.label, ok=not failing))
        if not out.as_json:
            print_scan_report(out.console, report, label=job.label, verbose=verbose)
    out.emit({"ok": not failed, "targets": documents})
    if failed:
        raise typer.Exit(EXIT_REFUSED)


def _scan_at(job: Job, path: Path) -> ScanReport:
    """Scan one job's package at ``path`` (on a Dask worker: its own copy of the package)."""
    return scan_tree(path, job.capabilities, mode=job.mode)


def _scan_mode(path: Path, mode: ScanModeChoice) -> tuple[tuple[Capability, ...], ScanMode]:
    """A path's declared capabilities and mode: plugin mode for a folder with a manifest."""
    if (
        path.is_dir()
        and mode is not ScanModeChoice.package
        and any(os.path.lexists(path / n) for n in MANIFEST_NAMES)
    ):
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


def _run_scan(
    target: str,
    plugins_dir: Path,
    state_dir: Path | None,
    mode: ScanModeChoice,
    out: _Out,
) -> tuple[ScanReport, str]:
    """Scan ``target``: a path when one exists, else a plugin of the plugins directory."""
    path = Path(target)
    if not path.exists():
        if mode is ScanModeChoice.package:
            _usage(out, f"cannot scan {target!r} in package mode: no such file or directory")
        with _host(plugins_dir, state_dir, out) as host:
            return host.scan_report(target), target
    capabilities, chosen = _scan_mode(path, mode)
    with _progress(out) as progress:
        report = scan_tree(path, capabilities, mode=chosen, progress=progress)
    return report, str(path)


@contextmanager
def _progress(out: _Out, minimum: int | None = None) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on a terminal for scans of many files or targets (never in --json)."""
    if out.as_json or not out.console.is_terminal:
        yield None
        return
    least = _PROGRESS_MIN_FILES if minimum is None else minimum
    with Progress(transient=True, console=out.console) as bar:
        task = bar.add_task("scanning", total=None)

        def update(done: int, total: int) -> None:
            if total >= least:
                bar.update(task, completed=done, total=total)

        yield update


#: Fewer files than this scan too fast for a progress bar to help.
_PROGRESS_MIN_FILES = 200


@app.command("audit")
def audit_command(
    name: Name,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List warning and info findings too.")
    ] = False,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Re-run the audit instead of using the cached one.")
    ] = False,
    static_only: StaticOnlyFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Audit a plugin, with the LLM auditor when CAPLET_LLM_* configure one (else static-only).

    Cached by content hash and model; --fresh re-runs. A model that fails makes
    the audit fail closed (HIGH, reject); --static-only chooses a static-only
    audit instead, for this run. The report says what the canary status
    means. Exits 1 when the audit recommends reject.
    """
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out) as host:
        audit = host.audit(name, fresh=fresh, static_only=static_only)
        info = host.manager.require_plugin(name)
        rejected = audit.verdict is Verdict.REJECT
        out.emit(
            {
                "ok": not rejected,
                "audit": audit_json(audit),
                "tier": info.tier.value,
                "signature": jsonable(info.signature),
            }
        )
        if not as_json:
            print_audit(out.console, audit, verbose=verbose)
            out.say("  trust: ", trust_text(info))
        if rejected:
            raise typer.Exit(EXIT_REFUSED)


# -- approve / unapprove


@app.command("approve")
def approve_command(
    name: Name,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    static_only: StaticOnlyFlag = False,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Show the audit (with what its canary status means) and capabilities, then
    persistently approve this exact content.

    --static-only approves on a static-only audit chosen for this run, when the
    configured model fails or is not wanted.
    """
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out) as host:
        info = host.manager.require_plugin(name)
        if static_only:
            audit = host.audit(name, static_only=True)
        else:
            audit = host.manager.get_cached_audit(name) or host.audit(name)
        lint = lint_composition(info.manifest.capabilities)
        if not as_json:
            out.say(plain(f"Approve {name} {info.version}", "bold"))
            print_audit(out.console, audit)
        if not yes:
            if not sys.stdin.isatty():
                out.err.print(
                    "error: approving needs confirmation; pass --yes when stdin is not a terminal"
                )
                raise typer.Exit(EXIT_USAGE)
            # click writes the question as it is: escaped here.
            question = f"Approve {safe_line(name)} with these capabilities?"
            if not typer.confirm(question, default=False):
                raise typer.Exit(EXIT_REFUSED)
        outcome = host.approve(name)
        document: dict[str, JSONValue] = {
            "name": name,
            "audit": audit_json(audit),
            "composition": [jsonable(f) for f in lint],
        }
        if not outcome:
            _refused(out, outcome, document)
        document.update({"ok": True, "approval": jsonable(host.get_approval_record(name))})
        out.emit(document)
        out.say(
            Text("approved ", style="green") + plain(f"{name}: {outcome.reason}", multiline=True)
        )


@app.command("unapprove")
def unapprove_command(
    name: Name,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Remove a plugin's approval (it must be audited and approved again)."""
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out) as host:
        _finish(out, host.unapprove(name), name)


# -- enable / disable / call ----------------------------------------------------------------------


def _enable(host: PluginHost, out: _Out, name: str, entries: Sequence[str], *, yes: bool) -> None:
    """Apply inline config (a typo'd key is a usage error), get consent, prompt, enable.

    A plugin with no approval of its current content needs consent (issue
    14): the audit, its capabilities and the composition lint are shown on
    stderr, then asked on a terminal, or given by ``--yes``; without a
    terminal and without ``--yes`` it is a usage error (exit 2) naming the
    fix. Consent is asked before any configuration prompt, and holds only
    for the content that was shown.
    """
    inert = host.manager.inert_reason(name)
    if inert:
        _refused(out, Outcome(False, inert), {"name": name})
    result = host.manager.apply_inline_config(name, entries)
    if result.unknown:
        fields = host.manager.require_plugin(name).manifest.config
        _usage(out, unknown_keys_message(name, fields, result.unknown))
    consent: bool | Consent = False
    request = host.consent_request(name)
    if request is not None:
        _ask_consent(out, request, yes=yes)
        shown = request.content_hash
        consent = lambda asked: asked.content_hash == shown  # noqa: E731 - only what was shown
    _finish(out, host.enable(name, consent=consent), name, report=False)


def _ask_consent(out: _Out, request: ConsentRequest, *, yes: bool) -> None:
    """Show what a person consents to; return when they do, exit when they do not."""
    name = request.plugin
    if not out.as_json:
        show_consent(out.err, request)
    if yes:
        if not out.as_json:
            out.err.print(plain(f"consent for {name} given by --yes (this process only)"))
        return
    if out.as_json or not sys.stdin.isatty():
        _usage(
            out,
            f"enabling plugin {name!r} needs consent: {request.why}; review its audit "
            f"(caplet audit {name}) and pass --yes to enable it for this process, or approve "
            f"it first (caplet approve {name})",
        )
    question = f"Enable {safe_line(name)} {safe_line(request.version)} for this process?"
    if not typer.confirm(question, default=False, err=True):
        _refused(
            out,
            Outcome(False, f"plugin {name!r} was not enabled: consent was not given"),
            {"name": name},
        )


def _finish(out: _Out, outcome: Outcome, name: str, *, report: bool = True) -> None:
    """Exit 1 with the reason when refused; otherwise emit the success document."""
    if not outcome:
        _refused(out, outcome, {"name": name})
    if report:
        out.emit({"ok": True, "name": name, "also_affected": list(outcome.affected)})
        out.say(plain(outcome.reason, multiline=True))


def _usage(out: _Out, message: str) -> NoReturn:
    if out.as_json:
        out.emit({"ok": False, "error": {"type": "UsageError", "message": message}})
    else:
        out.err.print(Text("usage error: ", style="bold red") + plain(message, multiline=True))
    raise typer.Exit(EXIT_USAGE)


@app.command("enable")
def enable_command(
    name: Name,
    config: Annotated[
        list[str] | None, typer.Argument(help="key=value configuration entries.")
    ] = None,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    yes: ConsentFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Configure and enable a plugin, starting its worker (enablement lasts for this process).

    Use it to check that a plugin enables with a given configuration; to call
    it in the same process use `caplet call --enable NAME k=v MODULE.FUNCTION`.
    A plugin that is not approved is enabled only with consent: its audit is
    shown and asked about on a terminal, or --yes; without either, exit 2.
    """
    out = _Out(as_json)
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        _enable(host, out, name, config or [], yes=yes)
        info = host.manager.require_plugin(name)
        out.emit(
            {"ok": True, "plugin": plugin_json(info, detail=True), "isolation": host.isolation}
        )
        out.say(
            Text("enabled ", style="green")
            + plain(f"{name} {info.version} (isolation: {host.isolation})")
        )


@app.command("disable")
def disable_command(
    name: Name,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Disable a plugin and the plugins that require it (within this process)."""
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out) as host:
        _finish(out, host.disable(name), name)


# -- release / log ------------------------------------------------------------------------------


@app.command("release")
def release_command(
    name: Name,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Lift a plugin's quarantine (it stays disabled until enabled again).

    A plugin is quarantined when its circuit breaker trips too often; fix
    the cause first. Exits 1 when the plugin was not quarantined.
    """
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out) as host:
        _finish(out, host.release(name), name)


@app.command("doctor")
def doctor_command(
    check_state: Annotated[
        bool,
        typer.Option(
            "--check-state",
            help="Check caplet's state instead of the isolation layers: the state database "
            "(SQLite integrity, schema, every record; or the PostgreSQL store CAPLET_STORE "
            "names), trusted keys, interrupted updates, the lock file and leftover temporary "
            "files. Exit 3 when damaged.",
        ),
    ] = False,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Probe each isolation layer on this machine; exit 1 if strict isolation cannot run.

    With --check-state, check the state instead: exit 0 when it is healthy
    (warnings, such as a leftover temporary file, are listed with their
    fix) and 3 when it is damaged, naming the file and the fix.
    """
    out = _Out(as_json)
    if check_state:
        with _handled(out):
            _doctor_state(out, plugins_dir, state_dir, lockfile)
        return
    from caplet._sandbox._sandboxed import isolation_report

    with _handled(out):
        report = isolation_report()
        out.emit(
            {
                "ok": report.complete,
                "layers": {
                    layer: {"available": not why, "reason": why, "fix": report.fixes.get(layer, "")}
                    for layer, why in report.layers.items()
                },
                "details": dict(report.details),
            }
        )
        for layer, why in report.layers.items():
            if why:
                fix = report.fixes.get(layer, "")
                detail = f"{layer}: {why}" + (f"\n    fix: {fix}" if fix else "")
                out.say(Text("✗ ", style="red") + plain(detail, multiline=True))
            else:
                out.say(Text("✓ ", style="green") + plain(layer))
        for key, value in report.details.items():
            out.say(plain(f"  {key}: {value}"))
        if not report.complete:
            out.say("strict isolation (the default) will refuse to start plugins here")
            raise typer.Exit(EXIT_REFUSED)


def _doctor_state(
    out: _Out, plugins_dir: Path, state_dir: Path | None, lockfile: Path | None
) -> None:
    """`caplet doctor --check-state`: the report of :func:`check_state`, exit 3 when damaged."""
    lock_path = lockfile if lockfile is not None else plugins_dir.parent / LOCKFILE_NAME
    report = check_state(state_dir, lockfile=lock_path)
    out.emit(
        {
            "ok": report.ok,
            "state_dir": str(report.state_dir),
            "database": None if report.database is None else str(report.database),
            **({} if report.store is None else {"store": report.store}),
            "lockfile": None if report.lockfile is None else str(report.lockfile),
            "problems": [
                {
                    "kind": problem.kind.value,
                    "damaged": problem.damaged,
                    "path": problem.path,
                    "message": problem.message,
                }
                for problem in report.problems
            ],
        }
    )
    database = report.store or report.database or f"no state database yet in {report.state_dir}"
    lines: list[Text] = []
    for problem in report.problems:
        # Text, not markup: messages quote paths and plugin-controlled names.
        mark = Text("✗ ", style="red") if problem.damaged else Text("! ", style="yellow")
        lines.append(mark + plain(problem.message, multiline=True))
    if report.ok:
        summary = f"state ok: {database}; lock file {report.lockfile}"
        if report.warnings:
            summary += f" ({len(report.warnings)} warning(s))"
        lines.append(Text(summary, style="green"))
    else:
        lines.append(
            Text(
                f"state damaged: {len(report.damaged)} problem(s); fix them before running plugins",
                style="bold red",
            )
        )
    if not out.as_json:
        for line in lines:
            # Not wrapped: the paths and `rm`/`mv` commands stay whole for copying.
            out.console.print(line, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(EXIT_STATE)


@app.command("log")
def log_command(
    name: Annotated[
        str | None,
        typer.Argument(help="Only this plugin's decisions (default: all).", callback=usable_text),
    ] = None,
    limit: Annotated[
        int,
        # max: SQLite's INTEGER range (a larger one raised OverflowError, issue 13).
        typer.Option("--limit", "-n", min=0, max=2**63 - 1, help="How many entries, newest first."),
    ] = 50,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Show the decision log, newest first: approvals, enables, refusals, trips, quarantines."""
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out) as host:
        decisions = host.manager.store.decisions(name, limit)
        if name is not None and not decisions and host.get_plugin(name) is None:
            # Nothing logged and nothing discovered: most likely a typo.
            host.manager.require_plugin(name)
        out.emit({"ok": True, "plugin": name, "decisions": [_decision_json(d) for d in decisions]})
        if not as_json:
            _print_decisions(out.console, decisions, name)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _decision_json(decision: Decision) -> JSONValue:
    document = jsonable(decision)
    assert isinstance(document, dict)
    document["time"] = _when(decision.at)
    return document


def _print_decisions(console: Console, decisions: Sequence[Decision], name: str | None) -> None:
    title = f"Decision log of {name}" if name else "Decision log"
    if not decisions:
        console.print(plain(f"{title}: no entries"))
        return
    table = Table(title=plain(f"{title} (newest first)"), title_justify="left")
    for column in ("time", "plugin", "action", "target", "decision", "detail"):
        table.add_column(column, overflow="fold")
    for decision in decisions:
        # Escaped Text, not markup: targets and details quote plugin-controlled strings.
        table.add_row(
            _when(decision.at),
            plain(decision.plugin),
            plain(decision.action),
            plain(decision.target),
            Text("allowed", style="green") if decision.allowed else Text("denied", style="red"),
            plain(decision.detail, multiline=True),
        )
    console.print(table)


def _split_call_tokens(tokens: Sequence[str], enable: bool) -> tuple[list[str], str, list[str]]:
    """``[k=v ...] MODULE.FUNCTION [JSON ...]`` -> (config entries, target, JSON args)."""
    entries: list[str] = []
    index = 0
    while index < len(tokens) and _looks_like_entry(tokens[index]):
        entries.append(tokens[index])
        index += 1
    if index >= len(tokens):
        raise _CallUsageError("missing MODULE.FUNCTION (for example: greet.say)")
    if entries and not enable:
        raise _CallUsageError(
            f"configuration entries ({', '.join(entries)}) need --enable: "
            "caplet call --enable NAME k=v MODULE.FUNCTION ARGS"
        )
    target = tokens[index]
    if "." not in target:
        raise _CallUsageError(f"{target!r} is not MODULE.FUNCTION (for example: greet.say)")
    return entries, target, list(tokens[index + 1 :])


def _looks_like_entry(token: str) -> bool:
    key, sep, _ = token.partition("=")
    return bool(sep) and key.strip().isidentifier()


class _CallUsageError(Exception):
    """Internal: a malformed `caplet call` command line."""


@app.command("call")
def call_command(
    name: Name,
    tokens: Annotated[
        list[str] | None,
        typer.Argument(help="[k=v ...] MODULE.FUNCTION [ARG ...]; each ARG is one JSON value."),
    ] = None,
    enable: Annotated[
        bool,
        typer.Option(
            "--enable", help="Enable the plugin (with k=v config) first, in this process."
        ),
    ] = False,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    yes: ConsentFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Call MODULE.FUNCTION of a plugin in its worker and print the result.

    Enablement is per process, so `--enable` is how a one-off command line
    enables and calls: caplet call --enable hello greet.say '"world"'.
    Enabling a plugin that is not approved needs consent (asked on a
    terminal, or --yes). Put `--` before JSON arguments that start with a
    dash (negative numbers).
    """
    out = _Out(as_json)
    try:
        entries, target, raw_args = _split_call_tokens(tokens or [], enable)
        args = [_parse_json_arg(raw) for raw in raw_args]
    except _CallUsageError as exc:
        _usage(out, str(exc))
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        if enable:
            _enable(host, out, name, entries, yes=yes)
        result = host.call(name, target, *args)
        out.emit({"ok": True, "plugin": name, "function": target, "result": jsonable(result)})
        if not as_json:
            text = result if isinstance(result, str) else json.dumps(jsonable(result), indent=2)
            out.console.print(plain(text, multiline=True))


def _parse_json_arg(raw: str) -> object:
    try:
        value: object = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _CallUsageError(
            f"argument {raw!r} is not JSON ({exc.msg}); quote strings, e.g. '\"world\"'"
        ) from exc
    return value


# -- exec


def _split_exec_tokens(tokens: Sequence[str]) -> tuple[list[tuple[str, list[str]]], str]:
    """``[--enable NAME [k=v ...]]... CODE`` -> ([(plugin, config entries)], CODE).

    The last token is always the code, even when it looks like ``k=v``
    (``x=1`` is a snippet too).
    """
    plugins: list[tuple[str, list[str]]] = []
    index = 0
    while index < len(tokens) - 1 or (index < len(tokens) and tokens[index].startswith("--enable")):
        word = tokens[index]
        if word == "--enable":
            if index + 1 >= len(tokens):
                raise _CallUsageError("--enable needs a plugin name: --enable NAME [k=v ...] CODE")
            name, index = tokens[index + 1], index + 2
        elif word.startswith("--enable="):
            name, index = word.partition("=")[2], index + 1
        else:
            break
        entries: list[str] = []
        while index < len(tokens) - 1 and _looks_like_entry(tokens[index]):
            entries.append(tokens[index])
            index += 1
        plugins.append((name, entries))
    rest = list(tokens[index:])
    if not rest:
        raise _CallUsageError("missing CODE (Python source, or - to read it from stdin)")
    if len(rest) > 1:
        unknown = [t for t in rest if t.startswith("--")]
        if unknown:
            raise _CallUsageError(
                f"unknown option {unknown[0]!r}; options are --enable NAME [k=v ...], --timeout "
                "SECONDS and --json (put -- before code that starts with a dash)"
            )
        raise _CallUsageError(
            f"expected one CODE argument, got {len(rest)}: quote the snippet as one argument, "
            "or pass - and send it on stdin"
        )
    return plugins, rest[0]


def _guest_json(result: GuestResult) -> dict[str, JSONValue]:
    return {
        "ok": result.ok,
        "status": result.status.value,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "value": jsonable(result.value),
        "repr": result.value_repr,
        "error": result.error,
        "error_type": result.error_type,
        "truncated": result.truncated,
    }


@app.command("exec", context_settings={"ignore_unknown_options": True})
def exec_command(
    tokens: Annotated[
        list[str] | None,
        typer.Argument(
            help="[--enable NAME [k=v ...]]... CODE: the plugins to enable first (with their "
            "configuration), then the snippet (- reads it from stdin)."
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Seconds the snippet may run (default: the policy's)."),
    ] = None,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    yes: ConsentFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Run Python CODE as guest code in a zero-capability sandbox and print what it did.

    The snippet can only call the enabled plugins' declared functions
    (import host.<module>); enable them for this process with --enable:
    caplet exec --enable fs-read root=/srv/notes 'import host.fsread as f; f.read_file("a.md")'.
    Prints the snippet's stdout, its stderr (to stderr) and the value of its
    last expression. Exits 1 when the snippet raised, timed out or crashed
    its sandbox, 3 when no sandbox could be started.
    """
    out = _Out(as_json)
    try:
        plugins, code = _split_exec_tokens(tokens or [])
    except _CallUsageError as exc:
        _usage(out, str(exc))
    if code == "-":
        code = sys.stdin.read()
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        for name, entries in plugins:
            _enable(host, out, name, entries, yes=yes)
        try:
            result = host.exec(code, timeout=timeout)
        except GuestError as exc:
            _usage(out, str(exc))
        out.emit(_guest_json(result))
        if not as_json:
            # The guest's own bytes, escaped as the shell shows them (--json has them exact).
            sys.stdout.write(safe_text(result.stdout))
            sys.stderr.write(safe_text(result.stderr))
            if result.value_repr is not None:
                sys.stdout.write(safe_text(result.value_repr) + "\n")
            if result.error is not None:
                sys.stderr.write(safe_text(result.error))
            if result.truncated:
                sys.stderr.write(
                    "[caplet: output over the policy's limit was dropped "
                    "(Policy.guest.max_output_kb)]\n"
                )
        if not result.ok:
            raise typer.Exit(EXIT_REFUSED)


# -- shell


@app.command("shell")
def shell_command(
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Seconds each snippet may run (default: the policy's)."),
    ] = None,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
) -> None:
    """Interactive shell: Python runs as guest code, /plugin manages plugins (/help lists).

    Each input runs in a fresh zero-capability sandbox that can only call the
    enabled plugins (import host.<module>). /plugin enable NAME k=v ...
    audits, shows the report, asks, configures and enables for this session
    (an approved plugin skips the audit); /plugin list|disable|approve|
    unapprove|audit, /system, /help, /exit. On a terminal: line editing,
    Tab completion and a history in the state directory (shell.history).
    When stdin is not a terminal, commands are read line by line without
    prompts or questions (-y answers yes) and the exit code is 1 when any
    input failed. No --json: a session's output is text for a person; use
    `caplet exec --json` from programs.
    """
    from caplet._cli._shell import Shell, stdin_reader

    out = _Out(False)
    interactive = sys.stdin.isatty()
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        if not interactive:
            summary = Shell(
                host,
                stdin_reader(sys.stdin),
                out.console,
                err=out.err,
                interactive=False,
                timeout=timeout,
            ).run()
            if summary.failures:
                raise typer.Exit(EXIT_REFUSED)
            return
        from caplet._cli._line_editor import HISTORY_FILE, ReadlineEditor

        editor = ReadlineEditor(
            host.manager.state_dir / HISTORY_FILE,
            warn=lambda message: out.err.print(plain(f"warning: {message}", "yellow")),
        )
        shell = Shell(
            host, editor.read_line, out.console, err=out.err, history=editor, timeout=timeout
        )
        editor.completer = shell.complete
        with editor:
            shell.run()


# -- emit


@app.command("emit")
def emit_command(
    event: Annotated[str, typer.Argument(help="The event, e.g. content:afterSave.")],
    payload: Annotated[
        str, typer.Option("--payload", help="The payload: one JSON value (default: null).")
    ] = "null",
    enable: Annotated[
        list[str] | None,
        typer.Option(
            "--enable",
            help="Enable this plugin first, in this process (repeat it; requirements first).",
        ),
    ] = None,
    abort: Annotated[
        bool, typer.Option("--abort", help="Stop at the first plugin that fails (error policy).")
    ] = False,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    yes: ConsentFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Emit EVENT to the enabled plugins subscribed to it and show each one's result.

    Enablement is per process, so name the plugins to enable with --enable:
    caplet emit content:afterSave --payload '{"id": 1}' --enable search.
    Exits 1 when any subscribed plugin failed.
    """
    out = _Out(as_json)
    try:
        value: object = json.loads(payload)
    except json.JSONDecodeError as exc:
        _usage(
            out, f"--payload {payload!r} is not JSON ({exc.msg}); e.g. --payload '{{\"id\": 1}}'"
        )
    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        policy = ErrorPolicy.ABORT if abort else ErrorPolicy.CONTINUE
        try:
            host.define_hook(event, error_policy=policy)
        except HookError as exc:
            _usage(out, str(exc))
        for name in enable or ():
            _enable(host, out, name, [], yes=yes)
        results = host.emit(event, value)
        waiting = [
            info.name
            for info in host.list_plugins()
            if not info.enabled and info.manifest.hook(event) is not None
        ]
        out.emit({**hook_results_json(results), "subscribed_not_enabled": list(waiting)})
        if not as_json:
            print_hook_results(out.console, results)
            known = {h.event for info in host.list_plugins() for h in info.manifest.hooks}
            if event not in known:
                out.console.print(
                    plain(
                        f"no discovered plugin subscribes to {event}"
                        f"{did_you_mean(event, sorted(known))}"
                    )
                )
            if waiting:
                out.console.print(
                    plain(
                        f"subscribed but not enabled: {', '.join(waiting)} "
                        f"(enable them with --enable NAME)"
                    )
                )
        if not results.ok:
            raise typer.Exit(EXIT_REFUSED)


# -- demo / new


@app.command("demo")
def demo_command(
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the whole job on the bundled example plugins: discover, scan, approve, enable, call."""
    from caplet._cli._demo import run_demo

    out = _Out(as_json)
    with _handled(out):
        ok, steps = run_demo(out.console if not as_json else None, state_dir=state_dir)
        out.emit({"ok": ok, "steps": steps})
        if not ok:
            raise typer.Exit(EXIT_REFUSED)


@app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="Plugin name (kebab-case).", callback=usable_text)],
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    as_json: JsonFlag = False,
) -> None:
    """Scaffold a new plugin folder that validates, scans clean and can be called."""
    from caplet._cli._scaffold import scaffold

    out = _Out(as_json)
    with _handled(out):
        path = scaffold(plugins_dir, name)
        out.emit({"ok": True, "name": name, "path": str(path)})
        out.say(
            plain(
                f"created {path}; try: caplet call --plugins-dir {plugins_dir} "
                f"--enable {name} {_module_name(name)}.hello '\"world\"'"
            )
        )


def _module_name(name: str) -> str:
    return name.replace("-", "_")


# -- lock / verify / update ---------------------------------------------------------------------


def _confirm(out: _Out, yes: bool, question: str, what: str) -> None:
    """Ask *question* unless --yes; without a terminal, --yes is required (usage error)."""
    if yes:
        return
    if not sys.stdin.isatty():
        out.err.print(f"error: {what} needs confirmation; pass --yes when stdin is not a terminal")
        raise typer.Exit(EXIT_USAGE)
    if not typer.confirm(question, default=False):
        raise typer.Exit(EXIT_REFUSED)


def _entry_json(entry: LockEntry) -> JSONValue:
    document = jsonable(entry)
    assert isinstance(document, dict)
    document["approved_at"] = entry.approved_at.isoformat()
    return document


def _print_entry(out: _Out, entry: LockEntry, declared: Sequence[str]) -> None:
    withheld = [c for c in declared if c not in entry.capabilities]
    signer = f", signed by {entry.signature.key_id}" if entry.signature else ""
    # One plain() per line: a newline inside a capability cannot start a line of its own.
    lines = [
        f"  {entry.name} {entry.version} ({entry.source.value}{signer})",
        f"    digest:       {entry.digest}",
        f"    capabilities: {', '.join(entry.capabilities) or 'none'}",
        *([f"    withheld:     {', '.join(withheld)}"] if withheld else []),
        f"    risk:         {entry.risk_level.value} ({entry.audit_provider}), "
        f"verdict {entry.verdict.value}",
    ]
    out.say(Text("\n").join(plain(line) for line in lines))


@app.command("lock")
def lock_command(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Pin only this plugin (default: every approved one).", callback=usable_text
        ),
    ] = None,
    withhold: Annotated[
        list[str] | None,
        typer.Option(
            "--withhold",
            help="A declared capability to leave out of the approved set (repeatable; needs NAME).",
        ),
    ] = None,
    yes: YesFlag = False,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Pin approved plugins in the lock file: digest, approved capabilities, audit, signer.

    Shows what is being pinned and asks first (--yes for scripts). Without
    NAME every approved plugin is pinned and entries of plugins that no
    longer exist are removed; plugins that are not approved at their current
    content are reported and make the command exit 1.
    """
    out = _Out(as_json)
    if withhold and name is None:
        _usage(out, "--withhold needs a plugin NAME: caplet lock NAME --withhold CAPABILITY")
    with _handled(out), _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=False) as host:
        manager = host.manager
        path = manager.lockfile_path
        current = read_lockfile(path, missing_ok=True)
        names = [name] if name is not None else manager.names()
        pinned: list[LockEntry] = []
        skipped: list[dict[str, JSONValue]] = []
        for plugin in names:
            try:
                pinned.append(manager.lock_entry(plugin, withhold=withhold or ()))
            except LockfileError as exc:
                if name is not None:
                    raise
                skipped.append({"name": plugin, "reason": str(exc)})
        removed = [] if name is not None else [n for n in current.names if n not in names]
        out.say(
            plain(f"Pinning in {path}", "bold") if pinned else plain(f"nothing to pin in {path}")
        )
        for entry in pinned:
            declared = manager.require_plugin(entry.name).manifest.capabilities
            _print_entry(out, entry, [c.declared for c in declared])
        for item in skipped:
            out.say(plain(f"  not pinned: {item['reason']}", "yellow", multiline=True))
        for stale in removed:
            out.say(plain(f"  removing the stale entry {stale!r} (no such plugin)", "yellow"))
        if pinned or removed:
            _confirm(out, yes, f"Write these entries to {safe_line(str(path))}?", "pinning plugins")

            def change(lock: Lockfile) -> Lockfile:
                for entry in pinned:
                    lock = lock.with_entry(entry)
                for stale in removed:
                    lock = lock.without(stale)
                return lock

            update_lockfile(path, change)
            manager.log_decision(
                name or "*", "lock", str(path), True, ", ".join(e.name for e in pinned)
            )
        out.emit(
            {
                "ok": not skipped,
                "lockfile": str(path),
                "pinned": [_entry_json(e) for e in pinned],
                "skipped": list(skipped),
                "removed": list(removed),
            }
        )
        if pinned or removed:
            out.say(Text("wrote ", style="green") + plain(f"{path}; commit it"))
        if skipped:
            raise typer.Exit(EXIT_REFUSED)


def _problem_json(problem: LockProblem | str) -> JSONValue:
    if isinstance(problem, str):
        return {"plugin": None, "kind": "error", "message": problem}
    return {"plugin": problem.plugin, "kind": problem.kind.value, "message": problem.message}


@app.command("verify")
def verify_command(
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check every plugin against the lock file; exit 1 with one line per problem.

    A problem is a plugin without an entry, a digest mismatch, a pinned
    version the manifest does not have, approved capabilities the manifest
    does not declare, a missing pinned signature,
    a stale entry, a broken plugin folder, or a missing or invalid lock file.
    """
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=False) as host:
        problems = host.manager.verify()
        path = host.manager.lockfile_path
        count = len(host.manager.names())
        out.emit(
            {
                "ok": not problems,
                "lockfile": str(path),
                "plugins": count,
                "problems": [_problem_json(p) for p in problems],
            }
        )
        for problem in problems:
            text = problem if isinstance(problem, str) else problem.message
            out.say(plain(f"✗ {text}", multiline=True))
        if problems:
            raise typer.Exit(EXIT_REFUSED)
        out.say(Text("ok", style="green") + plain(f": {count} plugin(s) match {path}"))


def _diff_lines(diff: Widening) -> list[str]:
    return (
        [f"  + {c.declared}" for c in diff.added]
        + [f"  - {c.declared}" for c in diff.removed]
        + [f"    {c.declared}" for c in diff.kept]
        + [f"  ! {line}" for line in describe_widening(diff) if not line.startswith("adds ")]
    )


@app.command("update")
def update_command(
    name: Name,
    source: Annotated[
        str,
        typer.Option(
            "--from", help="The new version: a plugin folder, a .whl, or a distribution name."
        ),
    ],
    config: Annotated[
        list[str] | None,
        typer.Argument(help="key=value configuration for the new version's health check."),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Consent without asking to what the new version widens (or to running a "
            "plugin that is not approved).",
        ),
    ] = False,
    health_timeout: Annotated[
        float, typer.Option("--health-timeout", min=0.1, help="Seconds health() may take.")
    ] = 10.0,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    lockfile: LockfileOption = None,
    locked: LockedOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Update a plugin: stage, check, diff capabilities, swap, health-check, roll back on failure.

    What widens the approval (a capability added or broadened, a plugin
    added to requires, a lower version, a higher audited risk) needs consent
    (asked, or --yes), and so does any update of a plugin that is not
    approved. The approval and the lock entry move to the new version only
    when the old one had them; a failed health check restores the old
    version with both.
    """
    out = _Out(as_json)

    def consent(diff: Widening) -> bool:
        if diff.widens:
            out.say(plain(f"{name}: the new version widens what was approved", "bold"))
            for line in _diff_lines(diff):
                # The new version's capability strings: its author's text, shown for consent.
                out.say(plain(line))
        else:
            out.say(
                plain(
                    f"{name} is not approved: the update runs the new version's health check",
                    "bold",
                )
            )
        if yes:
            return True
        if not sys.stdin.isatty():
            out.err.print(
                "the update needs consent; review it and pass --yes to consent "
                "(stdin is not a terminal)"
            )
            return False
        return typer.confirm("Consent to this update?", default=False)

    with (
        _handled(out),
        _host(plugins_dir, state_dir, out, lockfile=lockfile, locked=locked) as host,
    ):
        report = host.update(
            name, source, consent=consent, config=config or [], health_timeout_s=health_timeout
        )
        document: dict[str, JSONValue] = {
            "ok": report.ok,
            "name": name,
            "reason": report.reason,
            "old_version": report.old_version,
            "new_version": report.new_version,
            "old_digest": report.old_digest,
            "new_digest": report.new_digest,
            "rolled_back": report.rolled_back,
            "health": report.health,
            "added": [c.declared for c in report.diff.added] if report.diff else [],
            "widens": list[JSONValue](describe_widening(report.diff)) if report.diff else [],
            "removed": [c.declared for c in report.diff.removed] if report.diff else [],
        }
        out.emit(document)
        if not report.ok:
            if not as_json:
                out.err.print(plain(f"refused: {report.reason}", "bold red", multiline=True))
            raise typer.Exit(EXIT_REFUSED)
        out.say(plain(report.reason, "green", multiline=True))


# -- signatures and trusted keys ----------------------------------------------------------------


@app.command("keygen")
def keygen_command(
    prefix: Annotated[
        Path,
        typer.Argument(help="Writes PREFIX.key (private) and PREFIX.pub.", callback=usable_path),
    ],
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a minisign-compatible Ed25519 key pair for signing plugins (unencrypted, 0600)."""
    out = _Out(as_json)
    with _handled(out):
        if not prefix.name:
            raise SignatureError(
                f"PREFIX {str(prefix)!r} names no file; pass a path such as keys/publisher"
            )
        secret_path = prefix.with_name(prefix.name + ".key")
        public_path = prefix.with_name(prefix.name + ".pub")
        secret = generate_keypair()
        try:
            for path in (secret_path, public_path):
                if path.exists() and not force:
                    raise SignatureError(f"{path} exists; pass --force to overwrite it")
            atomic_write(secret_path, secret.file_text().encode("ascii"), mode=0o600)
            atomic_write(public_path, secret.public_key.file_text().encode("ascii"), mode=0o644)
        except OSError as exc:
            raise SignatureError(
                f"cannot write the key pair at {prefix} ({exc.strerror}); check that its "
                "directory exists and is writable, or choose another PREFIX"
            ) from exc
        key = secret.public_key
        out.emit(
            {
                "ok": True,
                "key_id": key.key_id_hex,
                "public_key": key.base64,
                "secret_key_file": str(secret_path),
                "public_key_file": str(public_path),
            }
        )
        out.say(
            plain(
                f"key {key.key_id_hex}: secret {secret_path} (keep it private), "
                f"public {public_path}"
            )
        )


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise SignatureError(
            f"cannot read the {what} {path} ({exc}); pass the path of a readable "
            f"minisign {what} file"
        ) from exc


@app.command("sign")
def sign_command(
    name: Name,
    key: Annotated[
        Path, typer.Option("--key", help="A minisign secret key file.", callback=usable_path)
    ],
    password_env: Annotated[
        str | None,
        typer.Option("--password-env", help="Read an encrypted key's password from this variable."),
    ] = None,
    plugins_dir: PluginsDir = _DEFAULT_PLUGINS,
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Sign a plugin's digest; writes plugin.minisig into its folder (minisign-compatible)."""
    out = _Out(as_json)
    with _handled(out), _host(plugins_dir, state_dir, out, locked=False) as host:
        info = host.manager.require_plugin(name)
        text = _read_text(key, "secret key")
        password: bytes | None = None
        if is_encrypted_secret_key(text):
            if password_env is not None:
                value = os.environ.get(password_env)
                if value is None:
                    raise SignatureError(
                        f"--password-env {password_env}: that variable is not set; set it "
                        "to the secret key's password, or omit --password-env in a terminal to be "
                        "prompted"
                    )
                password = value.encode("utf-8")
            elif sys.stdin.isatty():
                password = typer.prompt("Password", hide_input=True).encode("utf-8")
            else:
                _usage(out, f"{key} is encrypted; pass --password-env NAME")
        try:
            secret = parse_secret_key(text, password)
        except SignatureError as exc:
            raise SignatureError(f"secret key {key}: {exc}") from exc
        digest = host.manager.current_hash(name)
        signature = sign_digest(
            secret,
            digest,
            trusted_comment=f"caplet plugin {name} {info.version} {digest}",
        )
        target = info.path / SIGNATURE_FILE
        try:
            atomic_write(target, signature.encode("utf-8"), mode=0o644)
        except OSError as exc:
            raise SignatureError(
                f"cannot write {target} ({exc.strerror}); make the folder of plugin "
                f"{name!r} writable"
            ) from exc
        key_id = secret.public_key.key_id_hex
        host.manager.log_decision(name, "sign", digest, True, f"key {key_id}")
        out.emit(
            {"ok": True, "name": name, "digest": digest, "key_id": key_id, "file": str(target)}
        )
        out.say(plain(f"signed {name} {info.version} ({digest}) with key {key_id}: {target}"))


trust_app = typer.Typer(
    cls=_SuggestingGroup,
    name="trust",
    help="The publisher keys whose signatures make a plugin trusted.",
    no_args_is_help=True,
)
app.add_typer(trust_app)


def _keyring(state_dir: Path | None) -> Keyring:
    return Keyring(state_dir if state_dir is not None else default_state_dir())


def _key_json(key: PublicKey) -> JSONValue:
    return {"key_id": key.key_id_hex, "public_key": key.base64}


@trust_app.command("add")
def trust_add_command(
    key: Annotated[str, typer.Argument(help="A minisign public key file, or its base64 line.")],
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Trust a publisher key: plugins it signs become trusted (where the policy allows)."""
    out = _Out(as_json)
    with _handled(out):
        path = Path(key)
        try:
            text = path.read_text(encoding="ascii") if path.is_file() else key
            public = parse_public_key(text)
        except (OSError, UnicodeDecodeError) as exc:
            raise SignatureError(
                f"cannot read the public key {key} ({exc}); pass a readable .pub file "
                "or its base64 line"
            ) from exc
        except SignatureError as exc:
            raise SignatureError(
                f"{key!r} is not a minisign public key ({exc}); pass the .pub file or its "
                "base64 line"
            ) from exc
        added = _keyring(state_dir).add(public)
        out.emit(
            {"ok": True, "added": added, "key_id": public.key_id_hex, "public_key": public.base64}
        )
        out.say(f"{'trusted' if added else 'already trusted'}: key {public.key_id_hex}")


@trust_app.command("list")
def trust_list_command(state_dir: StateDir = None, as_json: JsonFlag = False) -> None:
    """List the trusted publisher keys."""
    out = _Out(as_json)
    with _handled(out):
        keys = _keyring(state_dir).keys()
        out.emit({"ok": True, "keys": [_key_json(k) for k in keys.values()]})
        if not keys:
            out.say("no trusted keys; add one with `caplet trust add KEY`")
        for key in keys.values():
            out.say(f"{key.key_id_hex}  {key.base64}")


@trust_app.command("remove")
def trust_remove_command(
    key_id: Annotated[str, typer.Argument(help="The key id, as `caplet trust list` shows it.")],
    state_dir: StateDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Stop trusting a publisher key (its plugins fall back to community)."""
    out = _Out(as_json)
    with _handled(out):
        removed = _keyring(state_dir).remove(key_id)
        out.emit({"ok": removed, "key_id": key_id.upper()})
        if not removed:
            out.err.print(plain(f"refused: key {key_id} is not trusted"))
            raise typer.Exit(EXIT_REFUSED)
        out.say(plain(f"removed key {key_id.upper()}"))


# -- selftest ---------------------------------------------------------------------------------


@app.command("selftest")
def selftest_command(
    case: Annotated[
        list[str] | None,
        typer.Option("--case", help="Run only this case (repeatable; see --list)."),
    ] = None,
    family: Annotated[
        list[str] | None,
        typer.Option("--family", help="Run only this attack family (repeatable)."),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            help="Also write the Markdown table to this file (between its selftest markers "
            "when it has them, e.g. docs/security.md).",
            callback=usable_path,
        ),
    ] = None,
    list_cases: Annotated[
        bool, typer.Option("--list", help="List the corpus without running it.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Attack this machine's caplet with the hostile corpus and show what stopped each attack.

    Every case is a hostile plugin run against a real host in a throw-away
    arena (nothing of yours is touched); the table shows the layer each
    attack should meet, what happened, and this machine's isolation layers.
    A missing layer is reported with the cases it leaves to other layers.
    Exits 1 when any case was not contained, 3 when the arena cannot be set up.
    """
    from caplet._errors import SelftestError
    from caplet._selftest._corpus import select

    out = _Out(as_json)
    try:
        cases = select(case or (), family or ())
    except SelftestError as exc:
        _usage(out, str(exc))
    if list_cases:
        out.emit(
            {
                "ok": True,
                "cases": [
                    {
                        "name": c.name,
                        "family": c.family.value,
                        "attack": c.attack,
                        "expected_layer": c.layer.value,
                    }
                    for c in cases
                ],
            }
        )
        for c in cases:
            out.say(Text(f"{c.name:28} {c.family.value:14} {c.layer.value:18} {c.attack}"))
        return
    from caplet._selftest._bench import run_selftest
    from caplet._selftest._report import print_report, write_markdown

    try:
        with _selftest_progress(out, len(cases)) as on_result:
            report = run_selftest(cases, on_result=on_result)
        if write is not None:
            write_markdown(write, report)
    except SelftestError as exc:
        if out.as_json:
            out.emit({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}})
        else:
            out.err.print(Text("error: ", style="bold red") + plain(str(exc), multiline=True))
        raise typer.Exit(EXIT_STATE) from exc
    out.emit(report.to_json())  # type: ignore[arg-type]
    if not out.as_json:
        print_report(out.console, report)
        if write is not None:
            out.say(plain(f"wrote the table to {write}"))
    if not report.ok:
        raise typer.Exit(EXIT_REFUSED)


@contextmanager
def _selftest_progress(out: _Out, total: int) -> Iterator[Callable[[Any], None] | None]:
    """A progress bar on stderr while the corpus runs (never in --json)."""
    if out.as_json or not out.err.is_terminal:
        yield None
        return
    with Progress(transient=True, console=out.err) as bar:
        task = bar.add_task("attacking", total=total)
        yield lambda _result: bar.advance(task)


def main() -> None:
    """Console-script entry point (``caplet``, ``python -m caplet``); exits with the code.

    The ``caplet`` logger gets the escaping handler: otherwise Python's
    last-resort handler would write its warnings, some quoting plugin text,
    to stderr as they are. Only here, not in :data:`app`: a program that
    embeds the commands keeps its own logging.
    """
    logger = logging.getLogger("caplet")
    if not any(isinstance(h, TerminalLogHandler) for h in logger.handlers):
        logger.addHandler(TerminalLogHandler(cli_console(stderr=True), debug=debug_enabled()))
    as_json = "--json" in sys.argv[1:]
    try:
        app(prog_name="caplet")
    except CapletError as exc:  # raised outside a command's _handled block: the same answer
        try:
            _fail(_Out(as_json), exc)
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except Exception as exc:
        # Anything else is a bug of caplet's (issue 13): one line, no traceback
        # unless CAPLET_DEBUG=1, exit 70 (caplet._cli._internal).
        sys.exit(report_internal_error(exc, as_json=as_json))
