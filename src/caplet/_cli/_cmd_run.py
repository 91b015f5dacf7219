"""Commands that run plugin code: call, exec, shell, emit."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from caplet._cli._command import EXIT_REFUSED, Run, command
from caplet._cli._documents import JSONValue, hook_results_json, jsonable
from caplet._cli._enabling import (
    EnableGroup,
    EnableUsageError,
    enable_all,
    looks_like_entry,
    split_enable_groups,
)
from caplet._cli._json_input import JsonInputError, parse_json
from caplet._cli._options import Common, ConsentFlag
from caplet._cli._render import print_hook_results
from caplet._cli._safe import plain
from caplet._display import safe_text
from caplet._errors import GuestError, HookError
from caplet._host._guest_result import GuestResult
from caplet._host._hook_model import ErrorPolicy
from caplet._suggest import did_you_mean

__all__: list[str] = []


def _split_call(tokens: Sequence[str]) -> tuple[list[EnableGroup], str, str, list[object]]:
    """``[--enable NAME [k=v ...]]... [NAME] MODULE.FUNCTION [JSON ...]`` ->
    (groups, plugin, target, arguments).

    NAME may be left out after ``--enable``: the plugin called is then the
    last one enabled (``caplet call --enable hello greet.say '"world"'``).
    A plugin name never holds a dot and a target always does, so the two
    cannot be mistaken for each other.
    """
    own, kept = _own_enable(tokens)
    groups, rest = split_enable_groups(kept)
    if rest and "." not in rest[0] and not looks_like_entry(rest[0]):
        name = rest.pop(0)
    elif groups:
        name = groups[-1][0]
    else:
        raise EnableUsageError(
            "missing the plugin NAME: caplet call NAME MODULE.FUNCTION [ARG ...], or "
            "caplet call --enable NAME [k=v ...] MODULE.FUNCTION [ARG ...]"
        )
    entries = []
    while rest and looks_like_entry(rest[0]):
        entries.append(rest.pop(0))
    if entries:
        raise EnableUsageError(
            f"configuration entries ({', '.join(entries)}) need --enable: "
            f"caplet call --enable {name} k=v MODULE.FUNCTION ARGS"
        )
    if own is not None:
        groups.append((name, own))
    if not rest:
        raise EnableUsageError("missing MODULE.FUNCTION (for example: greet.say)")
    target = rest[0]
    if "." not in target:
        raise EnableUsageError(f"{target!r} is not MODULE.FUNCTION (for example: greet.say)")
    arguments = []
    for number, raw in enumerate(rest[1:], start=1):
        if raw.startswith("--") and len(raw) > 2:
            raise EnableUsageError(
                f"unknown option {raw!r} after {target}; options go before MODULE.FUNCTION "
                "(put -- before a JSON argument that starts with a dash)"
            )
        try:
            arguments.append(parse_json(raw, f"argument {number}"))
        except JsonInputError as exc:
            raise EnableUsageError(str(exc)) from None
    return groups, name, target, arguments


def _own_enable(tokens: Sequence[str]) -> tuple[list[str] | None, list[str]]:
    """A bare ``--enable`` (followed by ``k=v``, the target or nothing) enables the plugin
    called, as it always did (``caplet call hello --enable greeting=Hi greet.say``):
    (its entries, or None without one; the other tokens)."""
    own: list[str] | None = None
    kept: list[str] = []
    index = 0
    while index < len(tokens):
        word = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if word == "--enable" and (
            following is None or looks_like_entry(following) or "." in following
        ):
            own = own if own is not None else []
            index += 1
            while index < len(tokens) and looks_like_entry(tokens[index]):
                own.append(tokens[index])
                index += 1
            continue
        kept.append(word)
        index += 1
    return own, kept


@command("call", common=Common.RUNS, context_settings={"ignore_unknown_options": True})
def call_command(
    run: Run,
    *,
    tokens: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[--enable NAME [k=v ...]]... [NAME] MODULE.FUNCTION [ARG ...]",
            help="The plugins to enable first (each with its configuration), the plugin "
            "(default: the last enabled), the function, and its arguments, each one JSON value.",
        ),
    ] = None,
    yes: ConsentFlag = False,
) -> None:
    """Call MODULE.FUNCTION of a plugin in its worker and print the result.

    Enablement is per process, so `--enable` is how a one-off command line
    enables and calls: caplet call --enable hello greet.say '"world"'.
    A plugin's requirements are enabled first (configure them with their own
    --enable NAME k=v). Enabling a plugin that is not approved needs consent
    (asked on a terminal, or --yes). Put `--` before JSON arguments that
    start with a dash (negative numbers).
    """
    out = run.out
    try:
        groups, name, target, args = _split_call(tokens or [])
    except EnableUsageError as exc:
        run.usage(str(exc))
    host = run.host()
    enable_all(run, host, groups, yes=yes)
    result = host.call(name, target, *args)
    out.emit({"ok": True, "plugin": name, "function": target, "result": jsonable(result)})
    if not run.as_json:
        text = result if isinstance(result, str) else json.dumps(jsonable(result), indent=2)
        # the data asked for, as the plugin returned it
        out.console.print(plain(text, multiline=True, margin=0))


# -- exec ------------------------------------------------------------------------------------------


def _split_exec(tokens: Sequence[str]) -> tuple[list[EnableGroup], str]:
    """``[--enable NAME [k=v ...]]... CODE`` -> (groups, CODE); the last token is the code."""
    groups, rest = split_enable_groups(tokens, keep_last=True)
    if not rest:
        raise EnableUsageError("missing CODE (Python source, or - to read it from stdin)")
    if len(rest) > 1:
        unknown = [t for t in rest if t.startswith("--")]
        if unknown:
            raise EnableUsageError(
                f"unknown option {unknown[0]!r}; options are --enable NAME [k=v ...], --timeout "
                "SECONDS and --json (put -- before code that starts with a dash)"
            )
        raise EnableUsageError(
            f"expected one CODE argument, got {len(rest)}: quote the snippet as one argument, "
            "or pass - and send it on stdin"
        )
    return groups, rest[0]


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


@command("exec", common=Common.RUNS, context_settings={"ignore_unknown_options": True})
def exec_command(
    run: Run,
    *,
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
    yes: ConsentFlag = False,
) -> None:
    """Run Python CODE as guest code in a zero-capability sandbox and print what it did.

    The snippet can only call the enabled plugins' declared functions
    (import host.<module>); enable them for this process with --enable:
    caplet exec --enable fs-read root=/srv/notes 'import host.fsread as f; f.read_file("a.md")'.
    Prints the snippet's stdout, its stderr (to stderr) and the value of its
    last expression. Exits 1 when the snippet raised, timed out or crashed
    its sandbox, 3 when no sandbox could be started.
    """
    try:
        groups, code = _split_exec(tokens or [])
    except EnableUsageError as exc:
        run.usage(str(exc))
    if code == "-":
        code = sys.stdin.read()
    host = run.host()
    enable_all(run, host, groups, yes=yes)
    try:
        result = host.exec(code, timeout=timeout)
    except GuestError as exc:
        run.usage(str(exc))
    run.out.emit(
        _guest_json(result),
        failure=f"the snippet ended {result.status.value}: {result.error_type or 'see error'}",
    )
    if not run.as_json:
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


# -- shell -----------------------------------------------------------------------------------------


@command("shell", common=Common.RUNS & ~Common.JSON)
def shell_command(
    run: Run,
    *,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Seconds each snippet may run (default: the policy's)."),
    ] = None,
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

    out = run.out
    host = run.host()
    if not sys.stdin.isatty():
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
    shell = Shell(host, editor.read_line, out.console, err=out.err, history=editor, timeout=timeout)
    editor.completer = shell.complete
    with editor:
        shell.run()


# -- emit ------------------------------------------------------------------------------------------


@command("emit", common=Common.RUNS, context_settings={"ignore_unknown_options": True})
def emit_command(
    run: Run,
    *,
    tokens: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="EVENT [--enable NAME [k=v ...]]...",
            help="The event (e.g. content:afterSave), and the plugins to enable first, each with "
            "its configuration.",
        ),
    ] = None,
    payload: Annotated[
        str, typer.Option("--payload", help="The payload: one JSON value (default: null).")
    ] = "null",
    abort: Annotated[
        bool, typer.Option("--abort", help="Stop at the first plugin that fails (error policy).")
    ] = False,
    yes: ConsentFlag = False,
) -> None:
    """Emit EVENT to the enabled plugins subscribed to it and show each one's result.

    Enablement is per process, so name the plugins to enable with --enable
    (requirements are enabled first):
    caplet emit content:afterSave --payload '{"id": 1}' --enable search index=main.
    Exits 1 when any subscribed plugin failed.
    """
    out = run.out
    try:
        groups, rest = split_enable_groups(tokens or [])
        if len(rest) != 1:
            raise EnableUsageError(
                "expected one EVENT (e.g. content:afterSave)"
                + (f", got {len(rest)}: {', '.join(map(repr, rest))}" if rest else "")
            )
        value = parse_json(payload, "--payload")
    except (EnableUsageError, JsonInputError) as exc:
        run.usage(str(exc))
    event = rest[0]
    host = run.host()
    policy = ErrorPolicy.ABORT if abort else ErrorPolicy.CONTINUE
    try:
        host.define_hook(event, error_policy=policy)
    except HookError as exc:
        run.usage(str(exc))
    enable_all(run, host, groups, yes=yes)
    results = host.emit(event, value)
    waiting = [
        info.name
        for info in host.list_plugins()
        if not info.enabled and info.manifest.hook(event) is not None
    ]
    failed = [call.plugin for call in results.calls if not call.ok]
    out.emit(
        {**hook_results_json(results), "subscribed_not_enabled": list(waiting)},
        failure=f"{event}: {len(failed)} subscriber(s) failed: {', '.join(failed)}",
    )
    if not run.as_json:
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
