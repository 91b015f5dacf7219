"""Source that does not parse, mended line by line so that the rest of it is still read.

A file the scanner's interpreter cannot parse is not harmless: it may be
valid on the interpreter that installs it (syntax newer than the scanner's,
PEP 701 f-strings, PEP 695 aliases) or a Python 2 file beside valid code,
and a payload one bad line away from the top of a file must not pass
unread (issue 16: the safe answer wins when a check cannot be made). So the
line the parser stops at is replaced by a statement that holds its block
(``pass``, or ``if 1:`` for a line that opens one) and the parse is tried
again, a bounded number of times. The file keeps its line numbers; the
lines replaced are reported with the syntax error (CPL-SCAN-003), and are
not scanned as code.
"""

from __future__ import annotations

import ast

__all__ = ["MAX_MENDS", "mend"]

#: Lines replaced at most before the file is read as text only.
MAX_MENDS = 32


def mend(text: str, file: str, error: SyntaxError) -> tuple[ast.Module, tuple[int, ...]] | None:
    """The syntax tree of ``text`` with the lines the parser stops at replaced, and
    those lines; ``None`` when that takes more than :data:`MAX_MENDS` lines, or when
    the parser stops where no line can be replaced (the end of the file)."""
    lines = text.split("\n")
    mended: list[int] = []
    lineno = error.lineno
    for _ in range(MAX_MENDS):
        if not lineno or lineno > len(lines) or lineno in mended:
            return None
        original = lines[lineno - 1]
        indent = original[: len(original) - len(original.lstrip())]
        # a line that opens a block keeps it open; any other line becomes a no-op
        lines[lineno - 1] = indent + ("if 1:" if original.rstrip().endswith(":") else "pass")
        mended.append(lineno)
        try:
            return ast.parse("\n".join(lines), filename=file), tuple(mended)
        except SyntaxError as exc:
            lineno = exc.lineno
        except (ValueError, RecursionError, MemoryError):
            return None
    return None
