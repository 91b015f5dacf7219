"""Commands that run plugin code: call, exec, shell, emit."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from caplet._cli._command import EXIT_REFUSED, Common, ConsentFlag, Name, Run, command
from caplet._cli._enabling import enable_plugin, looks_like_entry
from caplet._cli._render import (
    JSONValue,
    hook_results_json,
    jsonable,
    print_hook_results,
)
from caplet._cli._safe import plain
from caplet._display import safe_text
from caplet._errors import GuestError, HookError
from caplet._host._guest_result import GuestResult
from caplet._host._hooks import ErrorPolicy
from caplet._suggest import did_you_mean

__all__: list[str] = []


class _CallUsageError(Exception):
    """Internal: a malformed `caplet call` or `caplet exec` command line."""


def _split_call_tokens(tokens: Sequence[str], enable: bool) -> tuple[list[str], str, list[str]]:
    """``[k=v ...] MODULE.FUNCTION [JSON ...]`` -> (config entries, target, JSON args)."""
    entries: list[str] = []
    index = 0
    while index < len(tokens) and looks_like_entry(tokens[index]):
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


@command("call")
def call_command(
    run: Run,
    *,
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
    yes: ConsentFlag = False,
) -> None:
    """Call MODULE.FUNCTION of a plugin in its worker and print the result.

    Enablement is per process, so `--enable` is how a one-off command line
    enables and calls: caplet call --enable hello greet.say '"world"'.
    Enabling a plugin that is not approved needs consent (asked on a
    terminal, or --yes). Put `--` before JSON arguments that start with a
    dash (negative numbers).
    """
    out = run.out
    try:
        entries, target, raw_args = _split_call_tokens(tokens or [], enable)
        args = [_parse_json_arg(raw) for raw in raw_args]
    except _CallUsageError as exc:
        run.usage(str(exc))
    host = run.host()
    if enable:
        enable_plugin(run, host, name, entries, yes=yes)
    result = host.call(name, target, *args)
    out.emit({"ok": True, "plugin": name, "function": target, "result": jsonable(result)})
    if not run.as_json:
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


# -- exec ------------------------------------------------------------------------------------------


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
        while index < len(tokens) - 1 and looks_like_entry(tokens[index]):
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


@command("exec", context_settings={"ignore_unknown_options": True})
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
        plugins, code = _split_exec_tokens(tokens or [])
    except _CallUsageError as exc:
        run.usage(str(exc))
    if code == "-":
        code = sys.stdin.read()
    host = run.host()
    for name, entries in plugins:
        enable_plugin(run, host, name, entries, yes=yes)
    try:
        result = host.exec(code, timeout=timeout)
    except GuestError as exc:
        run.usage(str(exc))
    run.out.emit(_guest_json(result))
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


@command("shell", common=Common.HOST & ~Common.JSON)
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


@command("emit")
def emit_command(
    run: Run,
    *,
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
    yes: ConsentFlag = False,
) -> None:
    """Emit EVENT to the enabled plugins subscribed to it and show each one's result.

    Enablement is per process, so name the plugins to enable with --enable:
    caplet emit content:afterSave --payload '{"id": 1}' --enable search.
    Exits 1 when any subscribed plugin failed.
    """
    out = run.out
    try:
        value: object = json.loads(payload)
    except json.JSONDecodeError as exc:
        run.usage(f"--payload {payload!r} is not JSON ({exc.msg}); e.g. --payload '{{\"id\": 1}}'")
    host = run.host()
    policy = ErrorPolicy.ABORT if abort else ErrorPolicy.CONTINUE
    try:
        host.define_hook(event, error_policy=policy)
    except HookError as exc:
        run.usage(str(exc))
    for name in enable or ():
        enable_plugin(run, host, name, [], yes=yes)
    results = host.emit(event, value)
    waiting = [
        info.name
        for info in host.list_plugins()
        if not info.enabled and info.manifest.hook(event) is not None
    ]
    out.emit({**hook_results_json(results), "subscribed_not_enabled": list(waiting)})
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
