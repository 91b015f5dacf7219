"""One file's shell commands split into words: once for each text, within a budget (attack25).

The rules read a command's words (its program, its switches, what it sends) by
:func:`shlex.split`, Python code at about a microsecond a character, and several
rules ask for each call site. A file that runs one long constant at many call
sites (``L = "ab" * 8000`` and ``os.system(L)`` 1,000 times, 29 KB) split it
6,000 times: 44 s, the time growing as the square of the file. Now each text is
split once a file (the same text, a dictionary hit), and the texts split for the
first time count against :data:`SHELL_TEXT_BUDGET`: computed commands that differ
at each call site (``os.system(L + "1")``, ``os.system(L + "2")``, ...) cannot
each be split anew. Past the budget the file is too complex to check
(:class:`ShellTextError`, CPL-SCAN-002 from the file pass): the safe answer.
No real file comes near it; a command passed to a shell is at most 128 KiB on
Linux (``MAX_ARG_STRLEN``) and real ones are a few dozen characters.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Final

__all__ = ["SHELL_TEXT_BUDGET", "ShellSplitter", "ShellTextError"]

#: The characters of shell text one file's commands may have split, in all (about a
#: second of :func:`shlex.split`).
SHELL_TEXT_BUDGET: Final = 1 << 20


class ShellTextError(Exception):
    """A file's commands hold more shell text than :data:`SHELL_TEXT_BUDGET` to split."""

    def __init__(self, budget: int) -> None:
        super().__init__(
            f"its commands hold more than {budget} characters of shell text to split (no "
            "real file holds a fraction of that): not checked; shorten the commands or "
            "ship the script as a file of its own"
        )
        self.budget = budget


#: A reader of shell text: its words, split by the splitter given.
Reader = Callable[["ShellSplitter", str], list[str]]


class ShellSplitter:
    """The words of one file's shell texts, each split once, within a budget."""

    __slots__ = ("_budget", "_left", "_read", "_words")

    def __init__(self, budget: int = SHELL_TEXT_BUDGET) -> None:
        self._budget = budget
        self._left = budget
        self._words: dict[str, tuple[str, ...]] = {}
        self._read: dict[tuple[Reader, str], tuple[str, ...]] = {}

    def read(self, text: str, reader: Reader) -> list[str]:
        """``reader(self, text)``, once a file for each reader and text: a reader of shell
        text that rewrites it before it splits it (by :meth:`split`, within the budget)."""
        words = self._read.get((reader, text))
        if words is None:
            words = self._read[reader, text] = tuple(reader(self, text))
        return list(words)

    def split(self, text: str) -> list[str]:
        """``shlex.split(text)``, or ``text.split()`` when shlex refuses it (an unclosed
        quote, a last backslash); :class:`ShellTextError` past the file's budget."""
        words = self._words.get(text)
        if words is None:
            self._left -= len(text)
            if self._left < 0:
                raise ShellTextError(self._budget)
            try:
                words = tuple(shlex.split(text))
            except ValueError:
                words = tuple(text.split())
            self._words[text] = words
        return list(words)
