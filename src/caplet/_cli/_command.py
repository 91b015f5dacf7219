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

import functools
import importlib
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn

import typer
import typer.main
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from caplet._cli._click import ClickException
from caplet._cli._coercion import quick_coercion
from caplet._cli._options import (
    SHARED,
    Common,
    Options,
)
from caplet._cli._safe import cli_console, plain, print_block, show_plugin_lines
from caplet._errors import (
    AuditConfigError,
    CapletError,
    ConfigError,
    LockfileWriteError,
    PluginNotFoundError,
    PolicyError,
    ProviderAuthError,
    StoreError,
    UpdateError,
    WorkerStartError,
)
from caplet._suggest import closest

if TYPE_CHECKING:
    from rich.console import Console

    # The host, the policy and the prompts are imported when a command opens a host
    # (Run.host), not with the CLI: `caplet scan PATH` never does, and its start-up
    # is budgeted (issue 16: 150 ms of CPU; tests/_cli/test_app_startup.py).
    from caplet._cli._documents import JSONValue
    from caplet._config._prompt import Prompter
    from caplet._host._host import PluginHost
    from caplet._host._policy_file import EffectivePolicy
    from caplet._host._records import Outcome

__all__ = [
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_STATE",
    "EXIT_USAGE",
    "REFUSED",
    "Out",
    "Run",
    "app",
    "command",
    "exit_code",
    "fail",
    "usage",
]

#: The error type of a document that is not ok without an exception: a refusal, a
#: failed check, findings at the threshold (exit 1). The other types are UsageError
#: (exit 2), InternalError (exit 70) and caplet's public exception names.
REFUSED = "Refused"

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_STATE = 3


class _PlainArgument(TyperArgument):
    """A positional argument shown by its metavar alone (no ``<list[str]>``, no braces)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if getattr(self, "grammar", False):
            return name  # the metavar is the whole grammar, brackets included
        name = name if self.required else f"[{name}]"
        return f"{name}..." if self.nargs != 1 else name


def plain_metavars(params: Sequence[object]) -> None:
    """Help in plain words: ``NAME``, ``PATH``, ``TEXT``, nothing after a flag.

    typer writes Python's types (``<bool>``, ``<list[str]>``, ``{name}``);
    a person reads the words click and man pages use. An argument that
    names its own metavar is shown as it wrote it (its grammar).
    """
    for param in params:
        if isinstance(param, TyperArgument):
            if not isinstance(param, _PlainArgument):
                param.__class__ = _PlainArgument
                param.grammar = param.metavar is not None  # type: ignore[attr-defined]
            if param.metavar is None:
                param.metavar = (param.name or "value").upper()
        elif isinstance(param, TyperOption) and param.metavar is None:
            if param.is_flag or param.count:
                param.metavar = ""
            elif param.type_descriptor.is_choice and param.type_descriptor.choices:
                param.metavar = "|".join(
                    str(getattr(c, "value", c)) for c in param.type_descriptor.choices
                )
            else:
                bare = param.bare_type().removeprefix("list[").removesuffix("]")
                param.metavar = _TYPE_WORDS.get(bare, bare.upper())


_TYPE_WORDS = {"str": "TEXT", "Path": "PATH", "int": "INTEGER", "float": "NUMBER"}


class PlainCommand(TyperCommand):
    """A command whose help uses plain metavars (:func:`plain_metavars`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        plain_metavars(params)
        quick_coercion(params)
        return params


class SuggestingGroup(TyperGroup):
    """Unknown subcommands get caplet's own suggestion (edit distance <= 3, ties to the first);
    a usage error of a ``--json`` command line is the one JSON error shape on stdout."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        plain_metavars(params)
        quick_coercion(params)
        return params

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            suggestion = closest(name, self.list_commands(ctx))
            hint = f" Did you mean {suggestion!r}?" if suggestion else ""
            ctx.fail(f"No such command {name!r}.{hint} Run `caplet --help` for the list.")
        return super().resolve_command(ctx, args)

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """click's main, with its usage errors in the one error shape under ``--json``.

        click writes a usage error (a missing argument, an unknown option, a
        bad choice) as text on stderr; a program that asked for ``--json``
        gets ``{"ok": false, "error": {"type": "UsageError", ...}}`` on
        stdout as well, as for every other error (exit 2 either way).
        """
        argv = list(sys.argv[1:] if args is None else args)
        as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else EXIT_OK
        except ClickException as exc:
            if as_json:
                Out(True).emit(
                    {"ok": False, "error": {"type": "UsageError", "message": exc.format_message()}}
                )
            exc.show()
            code = exc.exit_code
        except typer.Abort:
            sys.stderr.write("Aborted.\n")
            code = EXIT_REFUSED
        if standalone_mode:
            sys.exit(code)
        return code


#: Every command and command group of ``caplet``, in the order ``caplet --help`` lists
#: them, and the module of caplet._cli that registers it. A module is imported when one
#: of its commands is looked up (run, completed, or listed by --help), so a command
#: pays only for its own dependencies: ``caplet scan PATH`` does not import the host,
#: the sandbox or pydantic (issue 16). tests/_cli/test_command.py checks this table
#: against what the modules register.
COMMAND_MODULES: Final[dict[str, str]] = {
    "list": "_cmd_plugins",
    "info": "_cmd_plugins",
    "approve": "_cmd_plugins",
    "unapprove": "_cmd_plugins",
    "enable": "_cmd_plugins",
    "disable": "_cmd_plugins",
    "release": "_cmd_plugins",
    "demo": "_cmd_plugins",
    "new": "_cmd_plugins",
    "scan": "_cmd_scan",
    "audit": "_cmd_scan",
    "call": "_cmd_run",
    "exec": "_cmd_run",
    "shell": "_cmd_run",
    "emit": "_cmd_run",
    "mcp": "_cmd_mcp",
    "stats": "_cmd_stats",
    "lock": "_cmd_lock",
    "verify": "_cmd_lock",
    "update": "_cmd_lock",
    "doctor": "_cmd_state",
    "log": "_cmd_state",
    "keygen": "_cmd_trust",
    "sign": "_cmd_trust",
    "trust": "_cmd_trust",
    "selftest": "_cmd_selftest",
    "policy": "_cmd_policy",
}


def load_commands(name: str | None = None) -> None:
    """Import the module registering command ``name`` on :data:`app` (every module
    when ``name`` is None); a name of no command imports nothing."""
    modules = COMMAND_MODULES.values() if name is None else [COMMAND_MODULES.get(name)]
    for module in dict.fromkeys(modules):
        if module is not None:
            importlib.import_module(f"caplet._cli.{module}")


class LazyGroup(SuggestingGroup):
    """The root group: lists :data:`COMMAND_MODULES` and builds a command from its
    module on first lookup (typer builds a group from the commands registered when
    it is called, so the ones registered since are added here)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMAND_MODULES)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in COMMAND_MODULES:
            load_commands(cmd_name)
            for name, built in typer.main.get_group(app).commands.items():
                self.commands.setdefault(name, built)
            found = super().get_command(ctx, cmd_name)
        return found


app = typer.Typer(
    cls=LazyGroup,
    name="caplet",
    context_settings={"help_option_names": ["-h", "--help"]},
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


#: The environment variables by which rich takes a stream for a terminal, or not,
#: whatever its ``isatty`` says (rich.console.Console: ``FORCE_TERMINAL`` when it is
#: made, ``TTY_COMPATIBLE`` and ``FORCE_COLOR`` in ``is_terminal``).
_TERMINAL_VARIABLES: Final = frozenset({"FORCE_TERMINAL", "TTY_COMPATIBLE", "FORCE_COLOR"})


class Out:
    """Where a command writes: stdout for results, stderr for people-facing noise."""

    def __init__(self, as_json: bool, *, red_team: bool = False) -> None:
        self.as_json = as_json
        #: ``--red-team``: every JSON document says so (``"red_team": true``).
        self.red_team = red_team

    # Made at first use: a --json run that prints no error never imports rich (issue 16's
    # start-up budget; tests/_cli/test_app_startup.py).
    @functools.cached_property
    def console(self) -> Console:
        """stdout, for results."""
        return cli_console()

    @functools.cached_property
    def err(self) -> Console:
        """stderr, for people-facing noise."""
        return cli_console(stderr=True)

    def err_is_terminal(self) -> bool:
        """Whether stderr is a terminal as rich sees it (progress bars are drawn there).

        Asked of rich only when it may be one: a stderr that is no tty, with none of
        the variables rich lets override that (:data:`_TERMINAL_VARIABLES`), is not,
        and a scan piped into a file or CI log never imports rich for the question.
        """
        try:
            tty = sys.stderr.isatty()
        except (AttributeError, ValueError):  # no stderr, or a closed one
            tty = False
        if not tty and _TERMINAL_VARIABLES.isdisjoint(os.environ):
            return False
        return self.err.is_terminal

    def emit(self, document: JSONValue, *, failure: str = "", kind: str = REFUSED) -> None:
        """Write ``document`` (with --json). A document that is not ok always carries the
        one error shape: ``failure`` (else its ``reason``) as the message of an
        ``error`` of type ``kind`` (``Refused``: a refusal or a result below the bar)."""
        if not self.as_json:
            return
        if isinstance(document, dict) and document.get("ok") is False and "error" not in document:
            reason = document.get("reason")
            message = failure or (reason if isinstance(reason, str) else "") or "refused"
            document = {**document, "error": {"type": kind, "message": message}}
        if self.red_team and isinstance(document, dict):
            # A result measured with the static gate off must never pass for a gated one.
            document = {**document, "red_team": True}
        # ensure_ascii (the default) writes control characters as \uXXXX: exact and inert.
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")

    def say(self, *parts: Any) -> None:
        if not self.as_json:
            self.console.print(*parts)


def exit_code(exc: CapletError) -> int:
    """The documented exit code of an error (README, "Exit codes")."""
    if isinstance(exc, PluginNotFoundError | PolicyError | ConfigError):
        # A policy or configuration value is the operator's input, as an argument is.
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


def public_type(exc: CapletError) -> str:
    """The name of the first class of ``exc`` in caplet's public error tree (a private
    subclass such as the store's ``_CorruptError`` is shown as ``StoreError``)."""
    for cls in type(exc).__mro__:
        if cls.__module__ == CapletError.__module__ and not cls.__name__.startswith("_"):
            return cls.__name__
    return CapletError.__name__


def fail(out: Out, exc: CapletError, code: int | None = None) -> NoReturn:
    """Show ``exc`` in the one error shape and exit with its code."""
    if out.as_json:
        out.emit({"ok": False, "error": {"type": public_type(exc), "message": str(exc)}})
    else:
        # The message may quote plugin text, a worker's stderr or a traceback: kept
        # multi-line, escaped, never markup.
        print_block(out.err, plain("error: ", "bold red") + plain(str(exc), multiline=True))
    raise typer.Exit(exit_code(exc) if code is None else code)


def usage(out: Out, message: str) -> NoReturn:
    """A usage error (exit 2), in the one error shape."""
    if out.as_json:
        out.emit({"ok": False, "error": {"type": "UsageError", "message": message}})
    else:
        print_block(out.err, plain("usage error: ", "bold red") + plain(message, multiline=True))
    raise typer.Exit(EXIT_USAGE)


# -- the shared options --------------------------------------------------------------------------


class Run:
    """One command's run: its shared options, its output, and its host (opened on first use)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.out = Out(options.as_json, red_team=options.red_team)
        self._host: PluginHost | None = None
        # The plugins' ctx.log lines go to stderr as `[plugin] message`, unless -q
        # hides them or the run is for a program (--json: no log flood on stderr).
        self._plugin_lines = show_plugin_lines(not (options.quiet or options.as_json))

    @property
    def as_json(self) -> bool:
        return self.options.as_json

    def host(
        self, *, locked: bool | None = None, plugins: bool = True, prompts: bool = True
    ) -> PluginHost:
        """The command's :class:`PluginHost` on ``--plugins-dir`` (opened once).

        ``locked`` overrides ``--locked`` (lock, verify and sign never run locked).
        With ``plugins`` (a command about plugins), a plugins directory that
        does not exist is a usage error when it leaves nothing to work on,
        and a warning when installed plugins were found all the same. Without
        ``prompts`` nothing is ever asked, even on a terminal (``caplet mcp``).
        """
        if self._host is None:
            from caplet._cli._prompt import NoInputPrompter, RichPrompter
            from caplet._host._host import PluginHost
            from caplet._host._loading import LoadingRules

            options = self.options
            out = self.out
            prompter: Prompter = (
                RichPrompter(out.err) if prompts and sys.stdin.isatty() else NoInputPrompter()
            )
            host = PluginHost(
                options.plugins_dir,
                state_dir=options.state_dir,
                policy=self.policy(),
                prompter=prompter,
                lockfile=options.lockfile,
                loading=LoadingRules.from_environment(
                    os.environ, locked=options.locked if locked is None else locked
                ),
                # The host logs its banner (stderr, through the `caplet` logger), labels
                # its isolation and every call in the decision log, and refuses locked mode.
                red_team=options.red_team,
            )
            self._host = host
            # A skipped plugin folder is logged by discovery (the `caplet` logger's
            # handler shows it on stderr): printing it here too showed it twice.
            directory = options.plugins_dir
            if plugins and not directory.is_dir():
                where = (
                    f"no plugins directory {str(directory)!r}"
                    if not directory.exists()
                    else f"{str(directory)!r} is not a directory"
                )
                fix = (
                    "pass --plugins-dir (or set CAPLET_PLUGINS_DIR) to the folder holding one "
                    "folder per plugin, or create one with `caplet new NAME`"
                )
                if not host.manager.names():
                    self.usage(f"{where}; {fix}")
                out.err.print(
                    plain(f"warning: {where}; only installed plugins are listed", "yellow")
                )
        return self._host

    def policy(self) -> EffectivePolicy:
        """The effective policy: the policy file, then the policy flags."""
        from caplet._host._policy_file import load_policy

        options = self.options
        return load_policy(options.plugins_dir, file=options.policy, overrides=options.overrides)

    def close(self) -> None:
        try:
            if self._host is not None:
                host, self._host = self._host, None
                host.close()
        finally:
            show_plugin_lines(self._plugin_lines)

    def usage(self, message: str) -> NoReturn:
        usage(self.out, message)

    def refused(self, outcome: Outcome, document: dict[str, JSONValue]) -> NoReturn:
        """Exit 1 with the reason of a refused outcome (and the document with --json)."""
        document.update({"ok": False, "reason": outcome.reason})
        self.out.emit(document)
        if not self.as_json:
            print_block(
                self.out.err, plain("refused: ", "bold red") + plain(outcome.reason, multiline=True)
            )
        raise typer.Exit(EXIT_REFUSED)

    def finish(self, outcome: Outcome, name: str, *, report: bool = True) -> None:
        """Exit 1 with the reason when refused; otherwise emit the success document."""
        if not outcome:
            self.refused(outcome, {"name": name})
        if report:
            self.out.emit({"ok": True, "name": name, "also_affected": list(outcome.affected)})
            if not self.as_json:
                print_block(self.out.console, plain(outcome.reason, multiline=True))


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
        shared = [(flag, key) for flag, key, _, _ in SHARED if flag in common]
        for flag, key, annotation, default in SHARED:
            if flag in common:
                parameters.append(
                    inspect.Parameter(
                        key, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
                    )
                )

        def run_command(**values: Any) -> None:
            given = {key: values.pop(key) for _, key in shared}
            try:
                options = Options.from_values(dict(given))
            except typer.BadParameter as exc:
                usage(Out(bool(given.get("as_json"))), exc.format_message())
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
        target.command(name, cls=PlainCommand, **settings)(run_command)
        return handler

    return register
