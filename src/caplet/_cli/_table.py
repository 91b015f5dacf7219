"""Tables that never split a word: a table when every column's longest word fits, a list
otherwise (issue 15).

rich folds a word that is longer than its column ("discove/red"), which
happens whenever the terminal (or the 80 columns assumed for a pipe) is
narrower than the table wants. :func:`print_table` measures the longest
word of every column first: when the columns fit side by side with those
widths as their minimum, it prints a rich table (rich then wraps at spaces
only); when they do not, it prints one block per row instead, ``column:
value`` lines under the row's first cell, written without wrapping (the
terminal wraps a long line; nothing is cut or split by caplet).
:func:`print_line` does the same for one line of text outside a table (a
scan report's finding, the source line it quotes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Cell", "print_line", "print_table"]

#: What a cell may hold: caplet's own text, or untrusted text already escaped (``plain``).
Cell = Text | str

#: Per column, rich's default box and padding take 3 characters (" │ "), plus one border.
_COLUMN_OVERHEAD = 3


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _longest_word(cell: Cell) -> int:
    words = _text(cell).plain.split()
    return max((len(word) for word in words), default=1)


def print_line(console: Console, text: Text) -> None:
    """``text`` wrapped at spaces when every word fits the console, else as one line.

    rich folds a word longer than the line ("an_extra/ordinarily"); such a
    line is written whole instead, for the terminal to wrap.
    """
    longest = max((cell_len(word) for word in text.plain.split()), default=0)
    console.print(text, soft_wrap=longest > console.width)


def _longest_line(cell: Cell) -> int:
    return max((len(line) for line in _text(cell).plain.split("\n")), default=1)


def fitted_widths(
    columns: Sequence[str], rows: Sequence[Sequence[Cell]], available: int
) -> list[int] | None:
    """Column widths that fit ``available`` characters with no word split, or None.

    Each column starts at its longest line; while the table is too wide, the
    widest column that is still wider than its longest word gives up one
    character (so long descriptions wrap first, short columns stay whole).
    """
    least = [
        max([_longest_word(name), *(_longest_word(row[i]) for row in rows)])
        for i, name in enumerate(columns)
    ]
    widths = [
        max([len(name), *(_longest_line(row[i]) for row in rows)]) for i, name in enumerate(columns)
    ]
    room = available - _COLUMN_OVERHEAD * len(columns) - 1
    if sum(least) > room:
        return None
    excess = sum(widths) - room
    while excess > 0:
        index = max(
            (i for i in range(len(widths)) if widths[i] > least[i]), key=lambda i: widths[i]
        )
        widths[index] -= 1
        excess -= 1
    return widths


def print_table(
    console: Console,
    title: Text | str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
) -> None:
    """``rows`` under ``columns`` as a table when no word has to be split, else as a list."""
    widths = fitted_widths(columns, rows, console.width)
    if widths is not None:
        # rich.table on first use: `caplet scan --json` prints no table (issue 16's start-up).
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for name, width in zip(columns, widths, strict=True):
            table.add_column(name, width=width)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    console.print(_text(title), soft_wrap=True)
    for row in rows:
        heading = _text(row[0]).copy()
        heading.stylize("bold")
        console.print(Text("- ") + heading, soft_wrap=True)
        for name, cell in zip(columns[1:], row[1:], strict=True):
            for index, line in enumerate(_text(cell).split("\n")):
                label = f"    {name}: " if index == 0 else " " * (len(name) + 6)
                console.print(Text(label, style="dim") + line, soft_wrap=True)
