"""The command framework of the ``caplet`` CLI: shared options, output, errors, exit codes.

A command is a function whose first parameter is a :class:`Run` and whose
other parameters are its own typer arguments and options; :func:`command`
registers it with the options it shares with the other commands
(``--plugins-dir``, ``--state-dir``, ``--lockfile``, ``--locked``,
``--json`` ..., chosen by :class:`Common`), so a new command is a few lines::

    @command("release")
    def release_command(run: Run, name: Name) -> None:
        \"\"\"Lift a plugin's quarantine.\"\"\"
        run.finish(run.host().release(name), name)

The :class:`Run` holds the shared options' values, the two output streams
(:class:`Out`) and the :class:`PluginHost`, opened on first use and closed
when the command ends. A :class:`CapletError` escaping the command is shown
once, in the one error shape (``{"ok": false, "error": {"type", "message"}}``
on stdout with ``--json``, a line on stderr otherwise), with the exit code
of its kind (:func:`exit_code`).
"""

from __future__ import annotations

import enum
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.text import Text
from typer.core import TyperGroup

from caplet._cli._arguments import usable_path, usable_text
from caplet._cli._prompt import NoInputPrompter, RichPrompter
from caplet._cli._render import JSONValue
from caplet._cli._safe import cli_console, plain
from caplet._config._prompt import Prompter
from caplet._errors import (
    AuditConfigError,
    CapletError,
    LockfileWriteError,
    PluginNotFoundError,
    ProviderAuthError,
    StoreError,
    UpdateError,
    WorkerStartError,
)
from caplet._host._host import PluginHost
from caplet._host._loading import LoadingRules
from caplet._host._records import Outcome
from caplet._suggest import closest

__all__ = [
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_STATE",
    "EXIT_USAGE",
    "Common",
    "Name",
    "Out",
    "Run",
    "app",
    "command",
    "exit_code",
    "fail",
    "usage",
]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_STATE = 3


class SuggestingGroup(TyperGroup):
    """Unknown subcommands get caplet's own suggestion (edit distance <= 3, ties to the first)."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            suggestion = closest(name, self.list_commands(ctx))
            hint = f" Did you mean {suggestion!r}?" if suggestion else ""
            ctx.fail(f"No such command {name!r}.{hint} Run `caplet --help` for the list.")
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=SuggestingGroup,
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


# -- output ---------------------------------------------------------------------------------------


class Out:
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


def exit_code(exc: CapletError) -> int:
    """The documented exit code of an error (README, "Exit codes")."""
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
    return EXIT_REFUSED


def fail(out: Out, exc: CapletError, code: int | None = None) -> NoReturn:
    """Show ``exc`` in the one error shape and exit with its code."""
    if out.as_json:
        out.emit({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}})
    else:
        # The message may quote plugin text, a worker's stderr or a traceback: kept
        # multi-line, escaped, never markup.
        out.err.print(Text("error: ", style="bold red") + plain(str(exc), multiline=True))
    raise typer.Exit(exit_code(exc) if code is None else code)


def usage(out: Out, message: str) -> NoReturn:
    """A usage error (exit 2), in the one error shape."""
    if out.as_json:
        out.emit({"ok": False, "error": {"type": "UsageError", "message": message}})
    else:
        out.err.print(Text("usage error: ", style="bold red") + plain(message, multiline=True))
    raise typer.Exit(EXIT_USAGE)


# -- the shared options --------------------------------------------------------------------------


class Common(enum.Flag):
    """Which shared options a command takes."""

    PLUGINS_DIR = enum.auto()
    STATE_DIR = enum.auto()
    LOCKFILE = enum.auto()
    LOCKED = enum.auto()
    JSON = enum.auto()
    NONE = 0
    #: A command that opens a host on the plugins directory.
    HOST = PLUGINS_DIR | STATE_DIR | LOCKFILE | LOCKED | JSON
    #: The same, where the command decides locked mode itself (lock, verify).
    HOST_UNLOCKED = PLUGINS_DIR | STATE_DIR | LOCKFILE | JSON
    #: The plugins and state directories only.
    DIRS = PLUGINS_DIR | STATE_DIR | JSON


_DEFAULT_PLUGINS = Path("plugins")

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

#: Each shared option: its flag, its parameter (name, annotation, default).
_SHARED: tuple[tuple[Common, str, object, object], ...] = (
    (Common.PLUGINS_DIR, "plugins_dir", PluginsDir, _DEFAULT_PLUGINS),
    (Common.STATE_DIR, "state_dir", StateDir, None),
    (Common.LOCKFILE, "lockfile", LockfileOption, None),
    (Common.LOCKED, "locked", LockedOption, None),
    (Common.JSON, "as_json", JsonFlag, False),
)


@dataclass(frozen=True, slots=True)
class Options:
    """The shared options' values (those a command does not take keep their defaults)."""

    plugins_dir: Path = _DEFAULT_PLUGINS
    state_dir: Path | None = None
    lockfile: Path | None = None
    locked: bool | None = None
    as_json: bool = False


class Run:
    """One command's run: its shared options, its output, and its host (opened on first use)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.out = Out(options.as_json)
        self._host: PluginHost | None = None

    @property
    def as_json(self) -> bool:
        return self.options.as_json

    def host(self, *, locked: bool | None = None) -> PluginHost:
        """The command's :class:`PluginHost` on ``--plugins-dir`` (opened once).

        ``locked`` overrides ``--locked`` (lock, verify and sign never run locked).
        """
        if self._host is None:
            options = self.options
            out = self.out
            prompter: Prompter = RichPrompter(out.err) if sys.stdin.isatty() else NoInputPrompter()
            host = PluginHost(
                options.plugins_dir,
                state_dir=options.state_dir,
                prompter=prompter,
                lockfile=options.lockfile,
                loading=LoadingRules.from_environment(
                    os.environ, locked=options.locked if locked is None else locked
                ),
            )
            self._host = host
            for broken in host.manager.broken_plugins():
                out.err.print(
                    Text("warning: ", style="yellow")
                    + plain(
                        f"skipped plugin {broken.directory.name}: {broken.error}", multiline=True
                    )
                )
        return self._host

    def close(self) -> None:
        if self._host is not None:
            host, self._host = self._host, None
            host.close()

    def usage(self, message: str) -> NoReturn:
        usage(self.out, message)

    def refused(self, outcome: Outcome, document: dict[str, JSONValue]) -> NoReturn:
        """Exit 1 with the reason of a refused outcome (and the document with --json)."""
        document.update({"ok": False, "reason": outcome.reason})
        self.out.emit(document)
        if not self.as_json:
            self.out.err.print(
                Text("refused: ", style="bold red") + plain(outcome.reason, multiline=True)
            )
        raise typer.Exit(EXIT_REFUSED)

    def finish(self, outcome: Outcome, name: str, *, report: bool = True) -> None:
        """Exit 1 with the reason when refused; otherwise emit the success document."""
        if not outcome:
            self.refused(outcome, {"name": name})
        if report:
            self.out.emit({"ok": True, "name": name, "also_affected": list(outcome.affected)})
            self.out.say(plain(outcome.reason, multiline=True))


Handler = Callable[..., None]


def command(
    name: str,
    *,
    group: typer.Typer | None = None,
    common: Common = Common.HOST,
    **settings: Any,
) -> Callable[[Handler], Handler]:
    """Register ``handler(run, **own)`` as command ``name`` with the ``common`` options.

    The typer signature is the handler's own parameters (after ``run``)
    followed by the shared ones; the wrapper takes the shared values out,
    builds the :class:`Run`, and turns a :class:`CapletError` into the one
    error shape and its exit code, after closing the host.
    """
    target = group if group is not None else app

    def register(handler: Handler) -> Handler:
        hints = typing.get_type_hints(handler, include_extras=True)
        own = list(inspect.signature(handler).parameters.values())[1:]
        parameters = [
            p.replace(annotation=hints[p.name], kind=inspect.Parameter.KEYWORD_ONLY) for p in own
        ]
        shared = [(flag, key) for flag, key, _, _ in _SHARED if flag in common]
        for flag, key, annotation, default in _SHARED:
            if flag in common:
                parameters.append(
                    inspect.Parameter(
                        key, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
                    )
                )

        def run_command(**values: Any) -> None:
            options = Options(**{key: values.pop(key) for _, key in shared})
            run = Run(options)
            try:
                try:
                    handler(run, **values)
                finally:
                    run.close()
            except CapletError as exc:
                fail(run.out, exc)

        run_command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run_command.__annotations__ = {p.name: p.annotation for p in parameters}
        run_command.__doc__ = handler.__doc__
        run_command.__name__ = handler.__name__
        run_command.__qualname__ = handler.__qualname__
        run_command.__module__ = handler.__module__
        target.command(name, **settings)(run_command)
        return handler

    return register
