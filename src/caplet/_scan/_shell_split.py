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

The split is memoised, but each call site still reads its command's text (its
program word lowered, its path's name, its indicators: C-speed work, a few passes
of the text a site), so one long constant run at many sites still cost the sites
times the length: a 1.3 MB plugin 103 s (attack25, left open). So
every text read, memoised or not, also counts against :data:`SHELL_READ_BUDGET`,
characters read by all the call sites of a file together; past it, the same
refusal. Real files read a few hundred KB at most (a thousand sites of a long
command).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Final

__all__ = ["SHELL_READ_BUDGET", "SHELL_TEXT_BUDGET", "ShellSplitter", "ShellTextError"]

#: The characters of shell text one file's commands may have split, in all (about a
#: second of :func:`shlex.split`).
SHELL_TEXT_BUDGET: Final = 1 << 20
#: The characters of shell text one file's call sites may read, in all, the same text
#: counted at each site (a few tenths of a second of the rules' passes).
SHELL_READ_BUDGET: Final = 32 << 20


class ShellTextError(Exception):
    """A file's commands hold more shell text than :data:`SHELL_TEXT_BUDGET` to split, or
    its call sites read more than :data:`SHELL_READ_BUDGET`."""

    def __init__(self, budget: int, *, read: bool = False) -> None:
        what = (
            "characters of shell text read by its call sites (one long command run at many of them)"
            if read
            else "characters of shell text to split"
        )
        super().__init__(
            f"its commands hold more than {budget} {what} (no real file holds a fraction "
            "of that): not checked; shorten the commands or ship the script as a file of "
            "its own"
        )
        self.budget = budget


#: A reader of shell text: its words, split by the splitter given.
Reader = Callable[["ShellSplitter", str], list[str]]


class ShellSplitter:
    """The words of one file's shell texts, each split once, within a budget."""

    __slots__ = ("_budget", "_left", "_read", "_read_budget", "_reads_left", "_words")

    def __init__(
        self, budget: int = SHELL_TEXT_BUDGET, read_budget: int = SHELL_READ_BUDGET
    ) -> None:
        self._budget = budget
        self._left = budget
        self._read_budget = read_budget
        self._reads_left = read_budget
        self._words: dict[str, tuple[str, ...]] = {}
        self._read: dict[tuple[Reader, str], tuple[str, ...]] = {}

    def count_read(self, text: str) -> None:
        """Count ``text`` against the file's read budget: a call site reads it (split or
        not); :class:`ShellTextError` past it."""
        self._reads_left -= len(text)
        if self._reads_left < 0:
            raise ShellTextError(self._read_budget, read=True)

    def read(self, text: str, reader: Reader) -> list[str]:
        """``reader(self, text)``, once a file for each reader and text: a reader of shell
        text that rewrites it before it splits it (by :meth:`split`, within the budget)."""
        self.count_read(text)
        words = self._read.get((reader, text))
        if words is None:
            words = self._read[reader, text] = tuple(reader(self, text))
        return list(words)

    def split(self, text: str) -> list[str]:
        """``shlex.split(text)``, or ``text.split()`` when shlex refuses it (an unclosed
        quote, a last backslash); :class:`ShellTextError` past the file's budgets."""
        self.count_read(text)
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
