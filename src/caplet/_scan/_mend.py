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

Before a line is given up, a PEP 701 f-string on it (Python 3.12: a string
inside a replacement field may reuse the f-string's own quote,
``f"{"ma"}{"in"}"``, ``f"{d["k"]}"``) is rewritten with the inner strings in
the other quote, which every Python 3 parses to the same tree: a name built
that way is the payload's, and must be read (issue 16, computed names).
"""

from __future__ import annotations

import ast

from caplet._marks import parse

__all__ = ["MAX_MENDS", "mend", "requoted"]

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
        requote = requoted(original)
        if requote is not None:
            lines[lineno - 1] = requote
            try:
                return parse("\n".join(lines), filename=file), tuple(mended)
            except SyntaxError as exc:
                if exc.lineno != lineno:
                    lineno = exc.lineno  # this line reads now: the parser stops further on
                    continue
            except (ValueError, RecursionError, MemoryError):
                return None
        indent = original[: len(original) - len(original.lstrip())]
        # a line that opens a block keeps it open; any other line becomes a no-op
        lines[lineno - 1] = indent + ("if 1:" if original.rstrip().endswith(":") else "pass")
        mended.append(lineno)
        try:
            return parse("\n".join(lines), filename=file), tuple(mended)
        except SyntaxError as exc:
            lineno = exc.lineno
        except (ValueError, RecursionError, MemoryError):
            return None
    return None


_PREFIX = frozenset("rRbBuUfF")


def _literal_end(line: str, start: int, quote: str) -> int | None:
    """The index after the string literal whose opening ``quote`` is at ``start``
    (one line, single quotes only: a triple-quoted string is left alone)."""
    if line.startswith(quote * 3, start):
        return None
    at = start + 1
    while at < len(line):
        if line[at] == "\\":
            at += 2
            continue
        if line[at] == quote:
            return at + 1
        at += 1
    return None


def requoted(line: str) -> str | None:
    """``line`` with every string inside an f-string's replacement field that reuses
    the f-string's quote rewritten in the other quote (``f"{"ex"}"`` becomes
    ``f"{'ex'}"``); ``None`` when there is none, or when one cannot be rewritten (it
    holds the other quote or a backslash, or is itself triple-quoted)."""
    out: list[str] = []
    at = 0
    changed = False
    while at < len(line):
        char = line[at]
        if char == "#":
            out.append(line[at:])
            break
        if char not in "'\"":
            out.append(char)
            at += 1
            continue
        prefix = ""
        back = len(out)
        while back and out[back - 1] in _PREFIX and len(prefix) < 2:
            back -= 1
            prefix = out[back] + prefix
        if back and (out[back - 1].isalnum() or out[back - 1] == "_"):
            prefix = ""  # the end of a name (elif"x"), not a string prefix
        end = _literal_end(line, at, char)
        if end is None:
            return None
        if "f" not in prefix.lower():
            out.append(line[at:end])
            at = end
            continue
        # an f-string: copy it, rewriting the strings inside its fields that reuse its quote
        other = "'" if char == '"' else '"'
        out.append(char)
        at += 1
        depth = 0
        while at < len(line):
            c = line[at]
            if depth == 0:
                if c == char:
                    break
                if c == "\\":
                    out.append(line[at : at + 2])
                    at += 2
                    continue
                if line.startswith("{{", at) or line.startswith("}}", at):
                    out.append(line[at : at + 2])
                    at += 2
                    continue
                depth += c == "{"
                out.append(c)
                at += 1
                continue
            if c in "{[(":
                depth += c == "{"
            elif c == "}":
                depth -= 1
            elif c in "'\"":
                inner = _literal_end(line, at, c)
                if inner is None:
                    return None
                body = line[at + 1 : inner - 1]
                if c == char:
                    if other in body or "\\" in body:
                        return None
                    out.append(other + body + other)
                    changed = True
                else:
                    out.append(line[at:inner])
                at = inner
                continue
            out.append(c)
            at += 1
        out.append(line[at : at + 1])
        at += 1
    return "".join(out) if changed else None
