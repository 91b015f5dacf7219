"""Commands of a team's lock file: lock, verify, update."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.text import Text

from caplet._cli._arguments import usable_text
from caplet._cli._command import EXIT_REFUSED, Out, Run, command, usage
from caplet._cli._documents import JSONValue, jsonable
from caplet._cli._options import Common, Name, YesFlag
from caplet._cli._safe import ENTRY_MARGIN, plain, print_block
from caplet._display import safe_line
from caplet._errors import LockfileError
from caplet._host._consent import Widening, describe_widening
from caplet._host._locked import LockProblem
from caplet._trust._lockfile import LockEntry, Lockfile, read_lockfile, update_lockfile

__all__: list[str] = []


def _confirm(out: Out, yes: bool, question: str, what: str) -> None:
    """Ask *question* unless --yes; with --json or without a terminal, --yes is required
    (a usage error in the one error shape)."""
    if yes:
        return
    if out.as_json or not sys.stdin.isatty():
        usage(
            out,
            f"{what} needs confirmation; pass --yes (with --json, or when stdin is not a terminal)",
        )
    if not typer.confirm(question, default=False):
        raise typer.Exit(EXIT_REFUSED)


def _entry_json(entry: LockEntry) -> JSONValue:
    document = jsonable(entry)
    assert isinstance(document, dict)
    document["approved_at"] = entry.approved_at.isoformat()
    return document


def _print_entry(out: Out, entry: LockEntry, declared: Sequence[str]) -> None:
    withheld = [c for c in declared if c not in entry.capabilities]
    signer = f", signed by {entry.signature.key_id}" if entry.signature else ""
    # One plain() per line: a newline inside a capability cannot start a line of its own.
    lines = [
        f"  {entry.name} {entry.version} ({entry.source.value}{signer})",
        f"    digest:       {entry.digest}",
        f"    capabilities: {', '.join(entry.capabilities) or 'none'}",
        *([f"    withheld:     {', '.join(withheld)}"] if withheld else []),
        f"    risk:         {entry.risk_level.value} ({entry.review or entry.audit_provider}), "
        f"verdict {entry.verdict.value}",
    ]
    out.say(Text("\n").join(plain(line) for line in lines))


@command("lock", common=Common.HOST_UNLOCKED)
def lock_command(
    run: Run,
    *,
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
) -> None:
    """Pin approved plugins in the lock file: digest, approved capabilities, audit, signer.

    Shows what is being pinned and asks first (--yes for scripts). Without
    NAME every approved plugin is pinned and entries of plugins that no
    longer exist are removed; plugins that are not approved at their current
    content are reported and make the command exit 1.
    """
    out = run.out
    if withhold and name is None:
        run.usage("--withhold needs a plugin NAME: caplet lock NAME --withhold CAPABILITY")
    manager = run.host(locked=False).manager
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
    out.say(plain(f"Pinning in {path}", "bold") if pinned else plain(f"nothing to pin in {path}"))
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
        },
        failure=f"{len(skipped)} plugin(s) not pinned: "
        + "; ".join(str(item["reason"]) for item in skipped),
    )
    if pinned or removed:
        out.say(Text("wrote ", style="green") + plain(f"{path}; commit it"))
    if skipped:
        raise typer.Exit(EXIT_REFUSED)


def _problem_json(problem: LockProblem | str) -> JSONValue:
    if isinstance(problem, str):
        return {"plugin": None, "kind": "error", "message": problem}
    return {"plugin": problem.plugin, "kind": problem.kind.value, "message": problem.message}


@command("verify", common=Common.HOST_UNLOCKED)
def verify_command(run: Run) -> None:
    """Check every plugin against the lock file; exit 1 with one line per problem.

    A problem is a plugin without an entry, a digest mismatch, a pinned
    version the manifest does not have, approved capabilities the manifest
    does not declare, a missing pinned signature,
    a stale entry, a broken plugin folder, or a missing or invalid lock file.
    """
    out = run.out
    manager = run.host(locked=False).manager
    problems = manager.verify()
    path = manager.lockfile_path
    count = len(manager.names())
    out.emit(
        {
            "ok": not problems,
            "lockfile": str(path),
            "plugins": count,
            "problems": [_problem_json(p) for p in problems],
        },
        failure=f"{len(problems)} problem(s) against {path}: "
        + "; ".join(p if isinstance(p, str) else p.message for p in problems),
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
        + [
            f"  ! {line}"
            for line in describe_widening(diff, whole=True)
            if not line.startswith("adds ")
        ]
    )


@command("update")
def update_command(
    run: Run,
    *,
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
) -> None:
    """Update a plugin: stage, check, diff capabilities, swap, health-check, roll back on failure.

    What widens the approval (a capability added or broadened, a plugin
    added to requires, a lower version, a higher audited risk) needs consent
    (asked, or --yes), and so does any update of a plugin that is not
    approved. The approval and the lock entry move to the new version only
    when the old one had them; a failed health check restores the old
    version with both.
    """
    out = run.out

    def consent(diff: Widening) -> bool:
        if diff.widens:
            out.say(plain(f"{name}: the new version widens what was approved", "bold"))
            for line in _diff_lines(diff):
                # The new version's capability strings and agent text: its author's, shown
                # for consent, whole; a wrapped line never starts where caplet's do.
                if not out.as_json:
                    print_block(out.console, plain(line), margin=ENTRY_MARGIN)
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

    report = run.host().update(
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
        if not run.as_json:
            out.err.print(plain(f"refused: {report.reason}", "bold red", multiline=True))
        raise typer.Exit(EXIT_REFUSED)
    out.say(plain(report.reason, "green", multiline=True))
