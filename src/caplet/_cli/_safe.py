"""Where untrusted text meets the terminal in the CLI: rich without escapes or markup.

Two ways plugin- or model-controlled text could drive the reviewer's
terminal through rich, and the answer to each:

* **Control characters.** rich strips only BEL, BS, VT, FF and CR
  (``rich.control.strip_control_codes``); ESC, C1 controls and bidi
  overrides reach the terminal. Every boundary escapes with
  :func:`caplet._display.safe_text` / :func:`~caplet._display.safe_line`
  (:func:`plain` does both at once), and the CLI's consoles carry a render
  hook (:func:`guard`) that escapes whatever still reaches them, after
  layout: a boundary that was missed costs a misaligned column,
  never a terminal command. rich writes its own styles afterwards, from
  each segment's style, and its cursor movements are control segments
  the hook leaves alone.
* **Markup.** A ``str`` given to ``Console.print`` is rich markup, so a
  description holding ``[green]approved[/]`` would be shown styled, and
  ``[link=...]`` would emit an OSC 8 hyperlink. Untrusted text is passed
  as a :class:`~rich.text.Text` (:func:`plain`), or, inside an f-string of
  caplet's own markup, through :func:`safe_markup`. Emoji codes
  (``:warning:``) are off in the CLI's consoles for the same reason.

``--json`` documents are not escaped here: :func:`json.dumps` with its
default ``ensure_ascii`` writes every control and non-ASCII character as
``\\uXXXX``, so the data stays exact and the bytes stay inert.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from caplet._display import DISTINCT_RECORD, safe_line, safe_text
from caplet._host._plugin_log import LOGGER_NAME

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# rich is imported by the functions that draw, not with this module: a --json run
# that prints no error never draws (issue 16: `caplet scan --json` starts in 150 ms
# of CPU, and rich is a tenth of it; tests/_cli/test_app_startup.py).

__all__ = [
    "ENTRY_MARGIN",
    "MARGIN",
    "TerminalLogHandler",
    "cli_console",
    "guard",
    "plain",
    "print_block",
    "print_entries",
    "print_wrapped",
    "safe_markup",
    "show_plugin_lines",
]


#: How far every line after the first of a multi-line text is indented (:func:`plain`).
MARGIN = 2


def plain(text: str, style: str = "", *, multiline: bool = False, margin: int = MARGIN) -> Text:
    """Untrusted ``text`` as a :class:`Text`: escaped, never markup, in ``style``.

    One line by default (a newline is shown as ``\\x0a``); ``multiline``
    keeps newlines, for text that has them legitimately (errors with a
    traceback, audit reasons, guest output), and indents every line after
    the first by ``margin``: a plugin's exception message or the stderr of
    its worker quoted in an error could otherwise start a line of its own
    where caplet's start ("approved evil: risk LOW" under the error,
    attack20). ``margin=0`` only for output that is the data asked for (a
    call's result, guest output) or lines that indent themselves (the audit
    report).
    """
    from rich.text import Text

    if not multiline:
        return Text(safe_line(text), style=style)
    shown = safe_text(text)
    if margin and "\n" in shown:
        shown = _CONTINUED.sub("\n" + " " * margin, shown)
    return Text(shown, style=style)


def print_block(console: Console, text: Text, *, margin: int = MARGIN) -> None:
    """``text`` wrapped to ``console``, every line after the first at least ``margin`` in.

    rich starts a line it wraps at column 0 and drops the blanks where it
    breaks, so a plugin's exception message "boom", 300 spaces, "approved
    evil: risk LOW" was shown as a line of that text alone under the error,
    whatever the terminal's width (attack20); :func:`plain`'s indent covers
    only the line breaks the text holds. Each wrapped line is indented here.
    A terminal wraps a line longer than itself at column 0 too, so nothing is
    printed wider than ``console``.
    """
    from rich.text import Text

    indent = " " * margin
    lines = text.wrap(console, max(console.width - margin, 20))
    shown = Text()
    for index, line in enumerate(lines):
        if index:
            shown.append("\n")
            if not line.plain.startswith(indent):
                shown.append(indent)
        shown.append_text(line)
    console.print(shown, soft_wrap=True)


#: How far a wrapped line of a plugin's agent text is indented: deeper than every
#: label of caplet's own on a decision screen (2) and than the entries (4).
ENTRY_MARGIN = 6


def print_entries(console: Console, entries: Iterable[str]) -> None:
    """Entries of a plugin's agent text, four columns in, each wrapped line
    :data:`ENTRY_MARGIN` in (attack34).

    Every screen a person decides on shows that text whole (the twenty-first
    session), so a plugin chose where its words wrapped: a description of 58
    letters and then "risk: LOW (reviewed by the maintainers)" printed that
    sentence at column 0 of a line of its own under ``the agent reads``, at any
    length and as many times as it liked, a screen of caplet's own lines drawn
    by the plugin. Indented here, no wrapped line starts where caplet's do.
    """
    for entry in entries:
        print_block(console, plain(f"    {entry}"), margin=ENTRY_MARGIN)


def print_wrapped(console: Console, text: str, style: str = "") -> None:
    """One line of caplet's own that quotes what a plugin wrote (a capability, a folder,
    a program), wrapped here with every wrapped line :data:`ENTRY_MARGIN` in (steer37).

    The grant's lines of the decision screens were printed for rich (or, with
    ``soft_wrap``, the terminal) to wrap at column 0, so a capability holding blanks
    chose the line under ``it will be granted:``: ``fs.read:/srv/notes/nnn... it will be
    granted: none`` printed ``none'`` alone at the margin, the last line above the
    question. attack34 indented a plugin's agent text and attack20 its errors; this is the
    same rule for every line that quotes it.
    """
    print_block(console, plain(text, style), margin=ENTRY_MARGIN)


#: A line break with a line after it (a trailing newline is not indented).
_CONTINUED = re.compile(r"\n(?=[^\n])")


def safe_markup(text: str) -> str:
    """Untrusted ``text`` for an f-string of caplet's own markup: escaped, one line."""
    from rich.markup import escape

    return escape(safe_line(text))


def guard(console: Console) -> Console:
    """``console``, with the hook that escapes every text segment it renders."""
    from caplet._cli._escape_hook import EscapeHook

    console.push_render_hook(EscapeHook())
    return console


def cli_console(*, stderr: bool = False) -> Console:
    """A console for the CLI: guarded, no highlighting, no emoji codes."""
    from rich.console import Console

    return guard(Console(stderr=stderr, highlight=False, emoji=False))


#: After this many records of one message template, the rest are counted, not shown.
_REPEATS_SHOWN = 5
#: The same for records each of which is a fact of its own (``DISTINCT_RECORD``: a
#: plugin folder skipped, and why): every one an operator could act on is shown, and
#: only a directory of thousands of broken folders is cut short.
_DISTINCT_SHOWN = 200


class TerminalLogHandler(logging.Handler):
    """Log records on a console, escaped: the CLI's handler for the ``caplet`` logger.

    Without a handler, Python's last-resort handler writes warnings to
    stderr as they are, and some quote what a plugin controls (the name of a
    folder that failed to load, a worker's error); this one escapes them
    like everything else the CLI shows.

    What it shows: caplet's warnings and errors, and the plugins' ``ctx.log``
    lines (``[plugin] message``, from info up; debug too with
    ``CAPLET_DEBUG``) unless :attr:`plugin_lines` is off (``-q``, ``--json``,
    the selftest's hostile corpus). A message of caplet's that repeats is
    shown :data:`_REPEATS_SHOWN` times and then counted (one marked
    ``DISTINCT_RECORD``, such as each skipped plugin folder, up to
    :data:`_DISTINCT_SHOWN` times), and :meth:`summary` says how many were
    held back, so no run floods the terminal.
    """

    def __init__(self, console: Console | None = None, *, debug: bool = False) -> None:
        super().__init__(logging.DEBUG)
        self._console = console
        self.debug = debug
        #: Whether the plugins' ctx.log lines are shown.
        self.plugin_lines = True
        self._repeats: dict[tuple[str, object], int] = {}
        self._held = 0

    @property
    def console(self) -> Console:
        """Where records are shown: the console given, else stderr's, made at the first
        record (most runs log nothing, and need no console)."""
        if self._console is None:
            self._console = cli_console(stderr=True)
        return self._console

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == LOGGER_NAME or record.name.startswith(f"{LOGGER_NAME}."):
            floor = logging.DEBUG if self.debug else logging.INFO
            return self.plugin_lines and record.levelno >= floor
        if record.levelno < logging.WARNING:
            return False
        if not self.debug:
            key = (record.name, record.msg)
            seen = self._repeats.get(key, 0) + 1
            self._repeats[key] = seen
            shown = _DISTINCT_SHOWN if getattr(record, DISTINCT_RECORD, False) else _REPEATS_SHOWN
            if seen > shown:
                self._held += 1
                return False
        return super().filter(record)

    def summary(self) -> None:
        """Say how many repeated messages were held back (nothing when none were)."""
        if self._held:
            self.console.print(
                plain(
                    f"({self._held} more log line(s) like the ones above were not shown; "
                    "CAPLET_DEBUG=1 shows them all)"
                ),
                soft_wrap=True,
            )
            self._held = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.debug or record.exc_info is None:
                text = self.format(record)
            else:
                # A traceback is for whoever fixes caplet (CAPLET_DEBUG=1): the
                # host logs one with each failure of its own (issue 13).
                error = record.exc_info[1]
                name = type(error).__name__ if error is not None else "error"
                text = f"{record.getMessage()} ({name}; CAPLET_DEBUG=1 shows the traceback)"
            self.console.print(plain(text, multiline=True), soft_wrap=True)
        except Exception:  # pragma: no cover - logging must never raise into the caller
            self.handleError(record)


def show_plugin_lines(shown: bool) -> bool:
    """Turn the plugins' ctx.log lines on or off in every CLI log handler; the old setting."""
    before = True
    for handler in logging.getLogger("caplet").handlers:
        if isinstance(handler, TerminalLogHandler):
            before = handler.plugin_lines
            handler.plugin_lines = shown
    return before
