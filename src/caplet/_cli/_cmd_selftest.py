"""``caplet selftest``: the hostile corpus against this machine's caplet."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from caplet._cli._arguments import usable_path
from caplet._cli._command import EXIT_REFUSED, EXIT_STATE, Out, Run, command, fail
from caplet._cli._options import Common
from caplet._cli._safe import plain, show_plugin_lines

__all__: list[str] = []


@command("selftest", common=Common.JSON)
def selftest_command(
    run: Run,
    *,
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

    out = run.out
    try:
        cases = select(case or (), family or ())
    except SelftestError as exc:
        run.usage(str(exc))
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

    # The corpus's plugins are hostile: what they log is part of the attack (a
    # log flood), never something to show.
    shown = show_plugin_lines(False)
    try:
        with _selftest_progress(out, len(cases)) as on_result:
            report = run_selftest(cases, on_result=on_result)
        if write is not None:
            write_markdown(write, report)
    except SelftestError as exc:
        fail(out, exc, EXIT_STATE)
    finally:
        show_plugin_lines(shown)
    out.emit(
        report.to_json(),  # type: ignore[arg-type]
        failure="a case of the hostile corpus was not contained (see results)",
    )
    if not run.as_json:
        print_report(out.console, report)
        if write is not None:
            out.say(plain(f"wrote the table to {write}"))
    if not report.ok:
        raise typer.Exit(EXIT_REFUSED)


@contextmanager
def _selftest_progress(out: Out, total: int) -> Iterator[Callable[[Any], None] | None]:
    """A progress bar on stderr while the corpus runs, whenever stderr is a terminal."""
    from rich.progress import Progress

    if not out.err_is_terminal():
        yield None
        return
    with Progress(transient=True, console=out.err) as bar:
        task = bar.add_task("attacking", total=total)
        yield lambda _result: bar.advance(task)
