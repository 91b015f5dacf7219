"""Commands about this machine and caplet's state: doctor, log."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from caplet._cli._arguments import usable_text
from caplet._cli._command import EXIT_REFUSED, EXIT_STATE, Run, command
from caplet._cli._documents import JSONValue, jsonable, when
from caplet._cli._options import Common
from caplet._cli._safe import plain
from caplet._cli._table import Cell, print_table
from caplet._host._state_check import check_state
from caplet._trust._lockfile import LOCKFILE_NAME
from caplet._trust._open import store_address
from caplet._trust._store import Decision

__all__: list[str] = []


@command("doctor", common=Common.HOST_UNLOCKED)
def doctor_command(
    run: Run,
    *,
    check_state: Annotated[
        bool,
        typer.Option(
            "--check-state",
            help="Check caplet's state instead of the isolation layers: the state database "
            "(SQLite integrity, schema, every record; or the PostgreSQL store CAPLET_STORE "
            "or the policy's store names), trusted keys, interrupted updates, the lock file "
            "and leftover temporary files. Exit 3 when damaged.",
        ),
    ] = False,
) -> None:
    """Probe each isolation layer on this machine; exit 1 if strict isolation cannot run.

    With --check-state, check the state instead: exit 0 when it is healthy
    (warnings, such as a leftover temporary file, are listed with their
    fix) and 3 when it is damaged, naming the file and the fix.
    """
    if check_state:
        _doctor_state(run)
        return
    from caplet._sandbox._sandboxed import isolation_report

    out = run.out
    report = isolation_report()
    out.emit(
        {
            "ok": report.complete,
            "layers": {
                layer: {"available": not why, "reason": why, "fix": report.fixes.get(layer, "")}
                for layer, why in report.layers.items()
            },
            "details": dict(report.details),
        },
        failure="strict isolation cannot run here: missing "
        + ", ".join(layer for layer, why in report.layers.items() if why),
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


def _doctor_state(run: Run) -> None:
    """`caplet doctor --check-state`: the report of :func:`check_state`, exit 3 when damaged."""
    out = run.out
    options = run.options
    lock_path = (
        options.lockfile
        if options.lockfile is not None
        else options.plugins_dir.parent / LOCKFILE_NAME
    )
    # The store the host would use: CAPLET_STORE, else the policy file's ``store``.
    address = store_address(run.policy().policy.store)
    report = check_state(options.state_dir, lockfile=lock_path, store=address)
    out.emit(
        {
            "ok": report.ok,
            "state_dir": str(report.state_dir),
            "database": None if report.database is None else str(report.database),
            # A shared store (PostgreSQL), named without its password.
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
        },
        failure=f"the state is damaged: {len(report.damaged)} problem(s); "
        + "; ".join(problem.message for problem in report.damaged),
        kind="StoreError",
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
    if not run.as_json:
        for line in lines:
            # Not wrapped: the paths and `rm`/`mv` commands stay whole for copying.
            out.console.print(line, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(EXIT_STATE)


class DecisionFilter(StrEnum):
    """Which decisions `caplet log --decision` shows."""

    allowed = "allowed"
    denied = "denied"


@command("log", common=Common.DIRS)
def log_command(
    run: Run,
    *,
    name: Annotated[
        str | None,
        typer.Argument(help="Only this plugin's decisions (default: all).", callback=usable_text),
    ] = None,
    plugin: Annotated[
        str | None,
        typer.Option(
            "--plugin", help="Only this plugin's decisions (as NAME).", callback=usable_text
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only decisions since WHEN: a duration back from now (30m, 12h, 7d) or a "
            "local date or time (2026-05-01, 2026-05-01T14:30).",
        ),
    ] = None,
    decision: Annotated[
        DecisionFilter | None,
        typer.Option("--decision", help="Only allowed or only denied decisions."),
    ] = None,
    action: Annotated[
        str | None,
        typer.Option(
            "--action", help="Only decisions of this action (http, call, enable, seccomp ...)."
        ),
    ] = None,
    limit: Annotated[
        int,
        # max: SQLite's INTEGER range (a larger one raised OverflowError, issue 13).
        typer.Option("--limit", "-n", min=0, max=2**63 - 1, help="How many entries, newest first."),
    ] = 50,
) -> None:
    """Show the decision log, newest first: approvals, enables, refusals, trips, quarantines.

    Refusals are recorded at a bounded rate per plugin (the rest in one
    summary row, "N more denials of ..."), and old rows are deleted after
    the policy's retention (log.retention_days, log.max_rows).
    """
    if name is not None and plugin is not None and name != plugin:
        run.usage(f"NAME {name!r} and --plugin {plugin!r} name different plugins; give one")
    who = name if name is not None else plugin
    start = None if since is None else _since(run, since)
    host = run.host(plugins=False)
    decisions = host.manager.store.decisions(
        who,
        limit,
        since=start,
        allowed=None if decision is None else decision is DecisionFilter.allowed,
        action=action,
    )
    if who is not None and not decisions and host.get_plugin(who) is None:
        # Nothing logged and nothing discovered: most likely a typo.
        host.manager.require_plugin(who)
    run.out.emit(
        {
            "ok": True,
            "plugin": who,
            "since": None if start is None else when(start),
            "decision": None if decision is None else decision.value,
            "action": action,
            "decisions": [_decision_json(d) for d in decisions],
        }
    )
    if not run.as_json:
        _print_decisions(run.out.console, decisions, who)


_DURATION = re.compile(r"(\d{1,9})\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def _since(run: Run, text: str) -> float:
    """``--since``: a duration back from now, or a local date or time (a usage error else)."""
    match = _DURATION.fullmatch(text.strip())
    if match:
        return time.time() - int(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        run.usage(
            f"--since {text!r}: expected a duration back from now (30m, 12h, 7d) or a local "
            "date or time (2026-05-01, 2026-05-01T14:30)"
        )


def _decision_json(decision: Decision) -> JSONValue:
    document = jsonable(decision)
    assert isinstance(document, dict)
    document["time"] = when(decision.at)
    return document


def _print_decisions(console: Console, decisions: Sequence[Decision], name: str | None) -> None:
    title = f"Decision log of {name}" if name else "Decision log"
    if not decisions:
        console.print(plain(f"{title}: no entries"))
        return
    rows: list[list[Cell]] = [
        [
            when(decision.at),
            # Escaped Text, not markup: targets and details quote plugin-controlled strings.
            plain(decision.plugin),
            plain(decision.action),
            plain(decision.target),
            Text("allowed", style="green") if decision.allowed else Text("denied", style="red"),
            plain(decision.detail, multiline=True, margin=0),  # a table places its lines
        ]
        for decision in decisions
    ]
    print_table(
        console,
        plain(f"{title} (newest first)"),
        ("time", "plugin", "action", "target", "decision", "detail"),
        rows,
    )
