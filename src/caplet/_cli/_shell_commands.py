"""The ``caplet shell`` command language: the ``/`` commands, their options and usage.

:class:`ShellCommand` and :class:`Subcommand` are the words; the option
spellings, usage lines and help text are data; the helpers split a
command's arguments into options, the plugin NAME and ``k=v`` entries, with
a usage error (and a "did you mean") for anything else. The REPL that
dispatches them is :mod:`caplet._cli._shell`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from caplet._cli._shell_plugins import ShellUsageError
from caplet._suggest import did_you_mean

__all__ = [
    "ShellCommand",
    "Subcommand",
]


class ShellCommand(StrEnum):
    """The ``/`` commands."""

    PLUGIN = "/plugin"
    PLUGINS = "/plugins"
    SYSTEM = "/system"
    HELP = "/help"
    EXIT = "/exit"
    QUIT = "/quit"


class Subcommand(StrEnum):
    """What ``/plugin`` does (seed 000's six, in its order)."""

    LIST = "list"
    ENABLE = "enable"
    DISABLE = "disable"
    APPROVE = "approve"
    UNAPPROVE = "unapprove"
    AUDIT = "audit"


#: The options each subcommand takes, spelling -> meaning.
_OPTIONS: dict[Subcommand, dict[str, str]] = {
    Subcommand.LIST: {},
    Subcommand.ENABLE: {"-y": "yes", "--yes": "yes"},
    Subcommand.DISABLE: {},
    Subcommand.APPROVE: {"-y": "yes", "--yes": "yes"},
    Subcommand.UNAPPROVE: {},
    Subcommand.AUDIT: {"--fresh": "fresh", "-v": "verbose", "--verbose": "verbose"},
}


_USAGE: dict[Subcommand, str] = {
    Subcommand.LIST: "/plugin list",
    Subcommand.ENABLE: "/plugin enable NAME [k=v ...] [-y]",
    Subcommand.DISABLE: "/plugin disable NAME",
    Subcommand.APPROVE: "/plugin approve NAME [-y]",
    Subcommand.UNAPPROVE: "/plugin unapprove NAME",
    Subcommand.AUDIT: "/plugin audit NAME [--fresh] [-v]",
}


_HELP: tuple[tuple[str, str], ...] = (
    ("PYTHON CODE", "runs as guest code in a fresh zero-capability sandbox; it can only call"),
    ("", "enabled plugins (import host.<module>); nothing carries over between inputs"),
    ("/plugin list", "discovered plugins: version, state, approval, risk (also /plugins)"),
    (_USAGE[Subcommand.ENABLE], "audit, show the report, confirm, configure, enable"),
    ("", "(this session only; an approved plugin skips the audit)"),
    (_USAGE[Subcommand.DISABLE], "disable it (and the plugins that require it)"),
    (_USAGE[Subcommand.APPROVE], "show the audit, confirm, approve persistently"),
    (_USAGE[Subcommand.UNAPPROVE], "remove the approval"),
    (_USAGE[Subcommand.AUDIT], "show the audit of the current content (--fresh re-runs it)"),
    ("/system", "the system-message text an agent would add for the enabled plugins"),
    ("/help", "this list"),
    ("/exit, /quit", "leave (or Ctrl-D); Ctrl-C abandons the current line"),
)


def _is_entry(token: str) -> bool:
    key, sep, _ = token.partition("=")
    return bool(sep) and key.strip().isidentifier()


def _no_arguments(command: str, args: Sequence[str]) -> None:
    if args:
        raise ShellUsageError(f"{command} takes no arguments, got {' '.join(args)!r}")


def _options(sub: Subcommand, args: Sequence[str]) -> tuple[set[str], list[str]]:
    """Split ``args`` into the subcommand's options (by meaning) and the rest."""
    known = _OPTIONS[sub]
    options: set[str] = set()
    rest: list[str] = []
    for arg in args:
        if not arg.startswith("-"):
            rest.append(arg)
            continue
        meaning = known.get(arg)
        if meaning is None:
            spellings = sorted(known)
            if not spellings:
                raise ShellUsageError(f"/plugin {sub.value} takes no options, got {arg!r}")
            raise ShellUsageError(
                f"unknown option {arg!r} for /plugin {sub.value}{did_you_mean(arg, spellings)}; "
                f"usage: {_USAGE[sub]}"
            )
        options.add(meaning)
    return options, rest


def _name(
    sub: Subcommand, positional: Sequence[str], *, extra: bool = False
) -> tuple[str, list[str]]:
    """The plugin NAME (and, with ``extra``, the words after it)."""
    if not positional:
        raise ShellUsageError(f"/plugin {sub.value} needs a plugin NAME: {_USAGE[sub]}")
    if len(positional) > 1 and not extra:
        raise ShellUsageError(
            f"/plugin {sub.value} takes one plugin NAME, got {' '.join(positional)!r}: "
            f"{_USAGE[sub]}"
        )
    return positional[0], list(positional[1:])
