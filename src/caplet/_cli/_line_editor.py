"""Line editing for ``caplet shell`` on a terminal: GNU readline, history file, Tab completion.

The standard library's :mod:`readline` is used rather than prompt_toolkit:
it is what the Python REPL uses (the same keys, the user's ``~/.inputrc``),
it costs no dependency, and the shell needs nothing it lacks. It is only
imported when stdin is a terminal; scripts and pipes never load it.

Choices:

* **History is explicit.** Automatic history is turned off, and the shell
  adds only the lines it chooses (commands and code, never a confirmation
  answer, never a configuration answer, never a line holding a secret
  value), so nothing typed at a prompt ends up on disk by accident.
* **The history file** (``shell.history`` in caplet's state directory, mode
  0600, at most :data:`HISTORY_LENGTH` lines) is read at start and written
  once on exit, atomically (written beside the target, then renamed over
  it), so a crash mid-write never leaves a torn or empty history. Two
  shells running at once: the last one to exit wins, as in the Python REPL.
  History is a convenience, so a file that cannot be read or written is a
  warning, never an error.
* **Completion** delegates to the shell (:class:`Completer`): words are
  split on whitespace only, because plugin names contain ``-`` and
  commands start with ``/``, which readline's default delimiters would cut.
"""

from __future__ import annotations

import contextlib
import os
import readline
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Protocol

from caplet._atomic import atomic_write
from caplet._errors import CapletError

__all__ = ["HISTORY_FILE", "HISTORY_LENGTH", "Completer", "ReadlineEditor"]

#: The history file's name inside caplet's state directory.
HISTORY_FILE = "shell.history"
#: How many lines the history keeps (in memory and on disk).
HISTORY_LENGTH = 1000


class Completer(Protocol):
    """Completions for the word being typed: ``line`` is the whole line so far and
    ``begin`` the index where ``word`` starts in it."""

    def __call__(self, line: str, begin: int, word: str) -> list[str]: ...


class ReadlineEditor:
    """GNU readline for one shell session: ``with ReadlineEditor(...) as editor:``.

    Entering loads the history file and installs the completer; leaving
    writes the history and restores readline's previous completer and
    automatic history.
    ``warn`` receives a message when the history cannot be read or written.
    """

    def __init__(
        self,
        history_file: Path,
        *,
        warn: Callable[[str], None],
        completer: Completer | None = None,
        length: int = HISTORY_LENGTH,
    ) -> None:
        self.history_file = history_file
        #: Settable after construction: the shell that completes needs the editor first.
        self.completer = completer
        self._warn = warn
        self._length = length
        self._matches: list[str] = []
        self._previous_completer = readline.get_completer()
        self._previous_delims = readline.get_completer_delims()

    # -- the shell's input seam ---------------------------------------------------------------

    def read_line(self, prompt: str) -> str:
        """One line from the terminal, edited with readline; EOFError on Ctrl-D."""
        return input(prompt)

    def remember(self, line: str) -> None:
        """Add ``line`` to the history (the shell decides which lines belong there)."""
        if line.strip():
            readline.add_history(line)

    # -- lifetime ---------------------------------------------------------------------------

    def __enter__(self) -> ReadlineEditor:
        self._previous_completer = readline.get_completer()
        self._previous_delims = readline.get_completer_delims()
        readline.set_auto_history(False)
        readline.set_history_length(self._length)
        readline.clear_history()
        if self.history_file.exists():
            try:
                readline.read_history_file(self.history_file)
            except OSError as exc:
                self._warn(
                    f"cannot read the shell history {self.history_file} ({exc.strerror}); "
                    "starting with an empty history"
                )
        readline.set_completer_delims(" \t\n")
        readline.set_completer(self._complete)
        # libedit (macOS) spells the binding differently from GNU readline.
        if "libedit" in (readline.__doc__ or ""):
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._save()
        readline.set_completer(self._previous_completer)
        readline.set_completer_delims(self._previous_delims)
        readline.set_auto_history(True)

    def _save(self) -> None:
        """Write the history atomically: readline writes a private temporary file (in
        its own format, GNU or libedit), which then replaces the history file."""
        directory = self.history_file.parent
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, name = tempfile.mkstemp(prefix=".shell-history.", suffix=".tmp", dir=directory)
            os.close(fd)
            temp = Path(name)
            try:
                readline.write_history_file(temp)
                data = temp.read_bytes()
            finally:
                with contextlib.suppress(OSError):
                    temp.unlink()
            atomic_write(self.history_file, data, mode=0o600)
        except OSError as exc:
            self._warn(
                f"cannot write the shell history {self.history_file} "
                f"({exc.strerror or exc}); this session's history is lost"
            )

    def _complete(self, text: str, state: int) -> str | None:
        """readline's completer protocol: called with state 0, 1, 2 ... until None."""
        if state == 0:
            self._matches = []
            if self.completer is None:
                return None
            try:
                self._matches = self.completer(
                    readline.get_line_buffer(), readline.get_begidx(), text
                )
            except CapletError:
                # The state database could not answer: no completions, no crash
                # (readline would swallow the exception and beep anyway).
                self._matches = []
        return self._matches[state] if state < len(self._matches) else None
