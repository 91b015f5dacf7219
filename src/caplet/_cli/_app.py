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

import logging
import sys
from typing import Annotated

import typer

# The command modules (_cmd_*) register their commands on `app` when imported,
# which happens when a command is looked up (caplet._cli._command.COMMAND_MODULES):
# a command's start-up pays only for its own dependencies (issue 16).
from caplet._cli._command import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STATE,
    EXIT_USAGE,
    Out,
    app,
    fail,
)
from caplet._cli._internal import EXIT_INTERNAL, debug_enabled, report_internal_error
from caplet._cli._safe import TerminalLogHandler
from caplet._errors import CapletError
from caplet._host._plugin_log import LOGGER_NAME as PLUGIN_LOGGER
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


def main() -> None:
    """Console-script entry point (``caplet``, ``python -m caplet``); exits with the code.

    The ``caplet`` logger gets the escaping handler: otherwise Python's
    last-resort handler would write its warnings, some quoting plugin text,
    to stderr as they are. Only here, not in :data:`app`: a program that
    embeds the commands keeps its own logging.
    """
    logger = logging.getLogger("caplet")
    handler = next((h for h in logger.handlers if isinstance(h, TerminalLogHandler)), None)
    if handler is None:
        handler = TerminalLogHandler(debug=debug_enabled())
        logger.addHandler(handler)
    # The plugins' ctx.log lines from info up (debug with CAPLET_DEBUG): a person
    # running a plugin sees what it says, as `[plugin] message` on stderr.
    logging.getLogger(PLUGIN_LOGGER).setLevel(logging.DEBUG if handler.debug else logging.INFO)
    as_json = "--json" in sys.argv[1:]
    try:
        app(prog_name="caplet")
    except CapletError as exc:  # raised outside a command's _handled block: the same answer
        try:
            fail(Out(as_json), exc)
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except Exception as exc:
        # Anything else is a bug of caplet's (issue 13): one line, no traceback
        # unless CAPLET_DEBUG=1, exit 70 (caplet._cli._internal).
        sys.exit(report_internal_error(exc, as_json=as_json))
    finally:
        handler.summary()
