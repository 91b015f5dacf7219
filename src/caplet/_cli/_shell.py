"""``caplet shell``: a REPL where Python runs as guest code and ``/plugin`` manages plugins.

Plain input is guest code (:meth:`PluginHost.exec`): its stdout, stderr,
the value of its final expression and, when it fails, its own traceback are
shown. Lines starting with ``/`` are commands: ``/plugin list|enable|
disable|approve|unapprove|audit`` (``/plugins`` is the same command; bare
``/plugin`` lists), ``/system``, ``/help``, ``/exit`` and ``/quit``. An
unknown command, subcommand, option or plugin name gets a "did you mean"
suggestion.

The flows are seed 000's, on caplet's host:

* ``/plugin enable NAME [k=v ...]`` re-discovers the plugins directory
  (a folder dropped in since start is found), then takes the **approved
  fast path** when the plugin is approved at its current content hash, its
  stored risk is below HIGH and within the policy, its verdict is not reject,
  the latest cached audit agrees and its tier is not untrusted (in locked
  mode, a lock entry is the approval). Otherwise it says why the fast path
  does not apply and runs the **full flow**: audit (the cached one for this
  content, or a fresh static scan, deep when ``CAPLET_LLM_*`` configures a
  model) → show the report → confirm (y/N) → configure (inline ``k=v``
  first, then the prompter for what must be asked) → enable. Enabling does
  not approve (seed line 193): for a plugin that is not approved, the
  report shown is the host's consent request (why consent is needed, what
  changed since an earlier approval, the audit, the capabilities it will
  get, the composition lint) and the confirmation is the consent (issue
  14), for this process only and for exactly the content shown; the host's
  danger and risk gates still apply; ``/plugin approve`` is the separate,
  persistent decision. A plugin that is already enabled is reconfigured
  without asking again while its content and grants stay the same.
* ``/plugin approve NAME`` shows the cached audit of the current content
  (or runs one), the capabilities, and asks; ``/plugin audit NAME`` shows
  the cached audit (a content change is a new hash, so "after source
  changes" needs no flag) and ``--fresh`` re-runs it.
* Refusals print the host's reason and the shell carries on.

Choices where the issue is silent:

* **Each input runs in a fresh zero-capability guest**: the pool's workers
  are one-use, so nothing (variables, imports) carries over between inputs.
  The banner and ``/help`` say so; a multi-line block (``codeop`` decides
  when it is complete, as in the Python REPL, with a ``...`` prompt) is one
  input.
* **Confirmations** are read through the same input function, and never
  recorded in the history. When stdin is not a terminal (a script or a
  pipe) nothing is asked: ``-y``/``--yes`` answers yes, as ``caplet
  approve --yes`` does, and without it the command is refused; required
  configuration must be passed inline (the CLI's ``NoInputPrompter``).
* **Output of guest code is shown with control characters escaped**
  (``\\x1b``, ``\\r``, bidirectional overrides; :func:`caplet._display.safe_text`):
  the snippet may be an LLM's or an attacker's, and escape sequences could
  rewrite the screen, retitle the terminal or on some terminals write the
  clipboard. Newlines and tabs pass. Everything else the shell says that
  quotes a plugin (versions, reasons, errors, the system message) is
  escaped the same way, and never read as markup.
* **History** holds commands and code lines, never confirmation or
  configuration answers, and never a ``/plugin enable`` line that sets a
  secret config field (nor one naming a plugin that does not exist, whose
  fields cannot be checked): the shell says it was not saved.
* **Errors never end the session**: only :class:`CapletError` is caught,
  printed, and the REPL continues; Ctrl-C abandons the line (or the command
  being run; the host kills a worker interrupted mid-call) and continues;
  Ctrl-D, ``/exit`` and ``/quit`` leave. When stdin is not a terminal, a
  block still open at the end of input runs, and :class:`SessionSummary`
  counts the inputs that failed (the CLI exits 1 on any).
"""

from __future__ import annotations

import codeop
import re
import shlex
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Protocol, TextIO, assert_never

from rich.console import Console
from rich.text import Text

from caplet._cli._render import print_plugins
from caplet._cli._safe import plain
from caplet._cli._shell_commands import (
    _HELP,
    _OPTIONS,
    _USAGE,
    ShellCommand,
    Subcommand,
    _is_entry,
    _name,
    _no_arguments,
    _options,
)
from caplet._cli._shell_plugins import PluginFlows, ShellUsageError
from caplet._config._prompt import Prompter
from caplet._display import safe_line, safe_text
from caplet._errors import CapletError
from caplet._host._guest_result import GuestResult
from caplet._host._host import PluginHost
from caplet._suggest import closest
from caplet._version import __version__

__all__ = [
    "CONTINUATION_PROMPT",
    "PROMPT",
    "History",
    "ReadLine",
    "SessionSummary",
    "Shell",
    "stdin_reader",
]

PROMPT = "caplet> "
#: As wide as :data:`PROMPT`, so an indented block lines up with its first line.
CONTINUATION_PROMPT = "    ... "


class ReadLine(Protocol):
    """Reads one line without its newline; raises EOFError at the end of input and
    KeyboardInterrupt on Ctrl-C (the contract of the builtin ``input``)."""

    def __call__(self, prompt: str, /) -> str: ...


class History(Protocol):
    """Where the lines worth recalling go (readline's history, in the CLI)."""

    def remember(self, line: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """How a session went: how many inputs (commands and snippets) ran, how many failed."""

    inputs: int
    failures: int


#: The dotted name being typed at the end of a word of code (``print(host.gr`` -> ``host.gr``).
_DOTTED_TAIL = re.compile(r"[A-Za-z_][\w.]*$")

#: One level of indentation, inserted by Tab at the start of a line of code.
_INDENT = "    "


def stdin_reader(stream: TextIO) -> ReadLine:
    """A :class:`ReadLine` over a non-terminal stream: no prompt is written (a script's
    output must not fill with prompts), EOFError at its end."""

    def read(prompt: str, /) -> str:
        line = stream.readline()
        if not line:
            raise EOFError
        return line.removesuffix("\n").removesuffix("\r")

    return read


class Shell:
    """The REPL over one :class:`PluginHost`.

    ``read_line`` reads input (and confirmation answers), ``console`` gets
    results and ``err`` (default: ``console``) errors, refusals and the
    guest's stderr. ``prompter`` asks for configuration during an enable
    (default: the host's). ``interactive`` says a person is typing: it
    turns on the banner, prompts and confirmations. ``history`` receives
    the lines worth recalling. ``timeout`` is each snippet's deadline in
    seconds (default: the policy's).
    """

    def __init__(
        self,
        host: PluginHost,
        read_line: ReadLine,
        console: Console,
        *,
        err: Console | None = None,
        prompter: Prompter | None = None,
        interactive: bool = True,
        history: History | None = None,
        timeout: float | None = None,
    ) -> None:
        self.host = host
        self._read = read_line
        self.console = console
        self.err = err if err is not None else console
        self.prompter = prompter
        self.interactive = interactive
        self.history = history
        self.timeout = timeout
        self._flows = PluginFlows(host, console, self.err, prompter=prompter, confirm=self._confirm)
        self._done = False
        self._inputs = 0
        self._failures = 0

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> SessionSummary:
        """Read and run inputs until Ctrl-D (end of input), ``/exit`` or ``/quit``."""
        if self.interactive:
            self.print_banner()
        buffer: list[str] = []
        pending: deque[str] = deque()
        while not self._done:
            try:
                if pending:
                    line = pending.popleft()
                else:
                    # A terminal that passes a pasted block through as one
                    # "line" still gets it line by line, as typed.
                    first, *rest = self._read(CONTINUATION_PROMPT if buffer else PROMPT).split("\n")
                    line = first
                    pending.extend(rest)
            except KeyboardInterrupt:
                self._interrupted()
                buffer.clear()
                pending.clear()
                continue
            except EOFError:
                if buffer and not self.interactive:
                    self._count(self._run_code("\n".join(buffer)))
                if self.interactive:
                    self.console.print()
                break
            try:
                self._feed(line, buffer)
            except KeyboardInterrupt:
                self._interrupted()
                self._count(ok=False)
                buffer.clear()
                pending.clear()
        return SessionSummary(inputs=self._inputs, failures=self._failures)

    def _feed(self, line: str, buffer: list[str]) -> None:
        """One line: a command, the start or continuation of a block, or a whole snippet."""
        if not buffer:
            stripped = line.strip()
            if not stripped:
                return
            if stripped.startswith("/"):
                self._remember(stripped)
                self._count(self.command(stripped))
                return
        buffer.append(line)
        self._remember(line)
        source = "\n".join(buffer)
        if _incomplete(source):
            return
        buffer.clear()
        self._count(self._run_code(source))

    def _count(self, ok: bool) -> None:
        self._inputs += 1
        if not ok:
            self._failures += 1

    def _interrupted(self) -> None:
        if self.interactive:
            self.err.print()
        self.err.print(Text("KeyboardInterrupt", style="red"))

    def _remember(self, line: str) -> None:
        if self.history is None:
            return
        secret = self._secret_in(line)
        if secret:
            self._say(f"(not saved in the history: {secret})", "dim")
            return
        self.history.remember(line)

    def _secret_in(self, line: str) -> str:
        """Why ``line`` must stay out of the history ("" when it may go in)."""
        try:
            words = shlex.split(line)
        except ValueError:
            return ""
        if len(words) < 4 or words[0] not in (ShellCommand.PLUGIN, ShellCommand.PLUGINS):
            return ""
        if words[1] != Subcommand.ENABLE.value:
            return ""
        keys = [w.partition("=")[0].strip() for w in words[3:] if _is_entry(w)]
        if not keys:
            return ""
        try:
            info = self.host.get_plugin(words[2])
        except CapletError:
            info = None
        if info is None:
            return f"it sets config of an unknown plugin {words[2]!r}, which may be secret"
        secret = sorted({f.name for f in info.manifest.config if f.secret} & set(keys))
        return f"it sets the secret field(s) {', '.join(secret)}" if secret else ""

    # -- guest code ---------------------------------------------------------------------------

    def _run_code(self, code: str) -> bool:
        try:
            result = self.host.exec(code, timeout=self.timeout)
        except CapletError as exc:
            self._error(f"error: {exc}")
            return False
        self.show_result(result)
        return result.ok

    def show_result(self, result: GuestResult) -> None:
        """What a snippet printed, its value, and its error, as the Python REPL shows them."""
        _write(self.console, result.stdout)
        _write(self.err, result.stderr)
        if result.value_repr is not None:
            _write(self.console, result.value_repr + "\n")
        if result.error is not None:
            _write(self.err, result.error)
        if result.truncated:
            self.err.print(
                Text(
                    "[caplet: output over the policy's limit was dropped "
                    "(Policy.guest.max_output_kb)]",
                    style="yellow",
                ),
                soft_wrap=True,
            )

    # -- commands -----------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run one ``/`` command line; False when it failed or was refused."""
        try:
            try:
                words = shlex.split(line)
            except ValueError as exc:
                raise ShellUsageError(
                    f"cannot read {line!r} ({exc}); quote a value holding spaces: key='a b'"
                ) from exc
            return self._dispatch(words[0], words[1:])
        except ShellUsageError as exc:
            self._error(str(exc))
            return False
        except CapletError as exc:
            self._error(f"error: {exc}")
            return False

    def _dispatch(self, word: str, args: list[str]) -> bool:
        try:
            command = ShellCommand(word)
        except ValueError:
            names = [c.value for c in ShellCommand]
            suggestion = closest(word, names)
            hint = f"; did you mean {suggestion!r}?" if suggestion else ""
            raise ShellUsageError(
                f"unknown command {word!r}{hint} (/help lists the commands)"
            ) from None
        match command:
            case ShellCommand.PLUGIN | ShellCommand.PLUGINS:
                return self._plugin(args)
            case ShellCommand.SYSTEM:
                _no_arguments(word, args)
                return self._system()
            case ShellCommand.HELP:
                self.print_help()
                return True
            case ShellCommand.EXIT | ShellCommand.QUIT:
                _no_arguments(word, args)
                self._done = True
                return True
            case _:
                assert_never(command)

    def _plugin(self, args: list[str]) -> bool:
        if not args:
            return self._list()
        word, rest = args[0], args[1:]
        try:
            sub = Subcommand(word)
        except ValueError:
            suggestion = closest(word, [s.value for s in Subcommand])
            hint = (
                f"; did you mean {suggestion!r}?"
                if suggestion
                else f"; expected one of: {', '.join(s.value for s in Subcommand)}"
            )
            raise ShellUsageError(f"unknown subcommand {word!r}{hint}") from None
        options, positional = _options(sub, rest)
        match sub:
            case Subcommand.LIST:
                _no_arguments("/plugin list", positional)
                return self._list()
            case Subcommand.ENABLE:
                name, entries = _name(sub, positional, extra=True)
                bad = [e for e in entries if not _is_entry(e)]
                if bad:
                    raise ShellUsageError(
                        f"expected key=value configuration after the plugin name, got {bad[0]!r} "
                        f"(usage: {_USAGE[sub]})"
                    )
                return self._flows.enable(name, entries, yes="yes" in options)
            case Subcommand.DISABLE:
                return self._flows.disable(_name(sub, positional)[0])
            case Subcommand.APPROVE:
                return self._flows.approve(_name(sub, positional)[0], yes="yes" in options)
            case Subcommand.UNAPPROVE:
                return self._flows.unapprove(_name(sub, positional)[0])
            case Subcommand.AUDIT:
                return self._flows.audit_command(
                    _name(sub, positional)[0],
                    fresh="fresh" in options,
                    verbose="verbose" in options,
                )
            case _:
                assert_never(sub)

    # -- /plugin list, /system, /help ---------------------------------------------------------

    def _list(self) -> bool:
        # The seed re-discovers on every list: a folder dropped in is found.
        self.host.discover()
        plugins = self.host.list_plugins()
        print_plugins(self.console, plugins, self.host.manager.broken_plugins())
        for info in plugins:
            if info.inert_reason:
                self._say(info.inert_reason, "red")
            if info.quarantine is not None:
                self._say(
                    f"{info.name} is quarantined: {info.quarantine.reason} (release it with "
                    f"`caplet release {info.name}` after fixing the cause)",
                    "red",
                )
        return True

    def _system(self) -> bool:
        text = self.host.get_system_message_additions()
        if not text:
            self._say("no plugin is enabled: the system message has no additions")
        else:
            # The enabled plugins' hints: their authors' text.
            self.console.print(plain(text, multiline=True, margin=0), soft_wrap=True)
        return True

    def print_banner(self) -> None:
        count = len(self.host.manager.names())
        self._say(
            f"caplet shell {__version__}: {count} plugin(s) in {self.host.manager.plugins_dir}, "
            f"isolation: {self.host.isolation}",
            "bold",
        )
        self._say(
            "Python you type runs as guest code, each input in a fresh sandbox with no "
            "capability but calling enabled plugins (import host.<module>); nothing carries "
            "over from one input to the next. /help lists the commands; /exit or Ctrl-D leaves."
        )

    def print_help(self) -> None:
        width = max(len(usage) for usage, _ in _HELP)
        for usage, text in _HELP:
            self.console.print(Text(f"  {usage:<{width}}  {text}"), soft_wrap=True)

    def _confirm(self, question: str, *, yes: bool) -> bool:
        if yes:
            return True
        if not self.interactive:
            self._error(
                f"{question} needs an answer and stdin is not a terminal; "
                "add -y to the command to answer yes"
            )
            return False
        try:
            # The prompt goes to the terminal as it is (readline): escaped here.
            answer = self._read(f"{safe_line(question)} [y/N] ")
        except EOFError:
            return False
        return answer.strip().lower() in {"y", "yes"}

    # Messages quote plugin versions, reasons and errors: escaped, never markup.

    def _say(self, message: str, style: str = "") -> None:
        self.console.print(plain(message, style, multiline=True), soft_wrap=True)

    def _error(self, message: str) -> None:
        self.err.print(plain(message, "red", multiline=True), soft_wrap=True)

    def _refused(self, reason: str) -> bool:
        self.err.print(plain(f"refused: {reason}", "bold red", multiline=True), soft_wrap=True)
        return False

    # -- completion ---------------------------------------------------------------------------

    def complete(self, line: str, begin: int, word: str) -> list[str]:
        """Tab completions for ``word``, which starts at index ``begin`` of ``line``.

        Commands, subcommands, plugin names, options and config keys
        (``key=``) after ``/``; ``host.<module>.<function>`` of the enabled
        plugins in code; an indent at the start of a line of code.
        """
        before = line[:begin].split()
        if not line.lstrip().startswith("/"):
            return self._complete_code(before, word)
        if not before:
            return [f"{c.value} " for c in ShellCommand if c.value.startswith(word)]
        if before[0] not in (ShellCommand.PLUGIN.value, ShellCommand.PLUGINS.value):
            return []
        if len(before) == 1:
            return [f"{s.value} " for s in Subcommand if s.value.startswith(word)]
        try:
            sub = Subcommand(before[1])
        except ValueError:
            return []
        if word.startswith("-"):
            return sorted(f"{o} " for o in _OPTIONS[sub] if o.startswith(word))
        if sub is Subcommand.LIST:
            return []
        plugins = self.host.list_plugins()
        if len(before) == 2:
            if sub is Subcommand.DISABLE:
                plugins = [p for p in plugins if p.enabled]
            elif sub is Subcommand.UNAPPROVE:
                plugins = [p for p in plugins if p.approval is not None]
            return [f"{p.name} " for p in plugins if p.name.startswith(word)]
        if sub is not Subcommand.ENABLE:
            return []
        target = next((p for p in plugins if p.name == before[2]), None)
        if target is None:
            return []
        given = {w.partition("=")[0] for w in before[3:]}
        return [
            f"{f.name}="
            for f in target.manifest.config
            if f.name.startswith(word) and f.name not in given
        ]

    def _complete_code(self, before: list[str], word: str) -> list[str]:
        if not word and not before:
            return [_INDENT]
        match = _DOTTED_TAIL.search(word)
        if match is None or not match.group().startswith("host."[: len(match.group())]):
            return []
        head, tail = word[: match.start()], match.group()
        names: list[str] = []
        for info in self.host.manager.get_enabled_plugins():
            for module in info.manifest.modules:
                names.append(f"host.{module.name}")
                names.extend(f"host.{module.name}.{f}" for f in module.function_names)
        return [head + n for n in sorted(set(names)) if n.startswith(tail)]


def _incomplete(source: str) -> bool:
    """True when ``source`` is the start of a statement, as the Python REPL decides it.

    Anything else (complete, or a syntax error) goes to the guest, which
    reports errors with its own traceback. Compiling here runs nothing.
    """
    with warnings.catch_warnings():
        # A SyntaxWarning is the guest's to show, not the host's.
        warnings.simplefilter("ignore")
        try:
            return codeop.compile_command(source, "<guest>", "single") is None
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            return False


def _write(console: Console, text: str) -> None:
    """Untrusted output, escaped, ending with a newline so the next prompt starts a line."""
    if not text:
        return
    if not text.endswith("\n"):
        text += "\n"
    console.out(safe_text(text), end="", highlight=False)
