"""Canaries: two planted prompt injections that prove the LLM auditor was not steered.

Seed 000 ("Canary Injection"): before the plugin's source goes into the
prompt, two synthetic injections carrying fresh identifiers are planted in
it, the model is told to report *every* injection attempt, and the answer is
checked for both (:mod:`caplet._audit._canary_check`). A model that reports
them was paying attention to injected instructions instead of obeying them;
one that misses either may have been talked round by the plugin's own text.

Differences from the seed, each closing a gap:

* The seed's canaries say ``CANARY_OVERRIDE_MARKER``, and caplet's first
  ones always said "SYSTEM OVERRIDE" and "ADMIN COMMAND" in a two-line ``#``
  comment with a UUID4, in one file (issue 14): a plugin could name them.
  Now each is composed from a large pool (:mod:`._canary_text`: identifiers
  in four formats, no fixed phrase), written in one of three **forms**
  (a comment, a docstring, a string constant; one line or several), and
  when the plugin has several Python files the two go to **different files**.
* They are inserted where a new line may start at the top level of a block,
  found with :mod:`tokenize`: never inside a string, a bracketed expression
  or a backslash continuation, never before line 2 (nor before an encoding
  cookie on line 2, PEP 263). A comment may also go between the lines of a
  bracketed expression (:func:`comment_insertion_lines`, auditor24), where
  the file must still be the same program; a file with few places for a
  statement (one bracketed expression) gets comment canaries only, spread
  over it, so a plugin's shape cannot keep them to line 2 and the end.
  The original lines are kept byte for byte; a docstring or constant goes
  only where the file still parses with it
  (:func:`ast.parse`), otherwise the canary is a comment there. A comment
  canary is kept apart from the plugin's own comments by a blank line, so
  "the comment" is exactly the canary's lines.
* A line map per file turns line numbers the model reports back into
  original ones.

Randomness comes from :class:`random.SystemRandom` (the OS CSPRNG) unless a
seeded :class:`random.Random` is passed, which tests do.
"""

from __future__ import annotations

import enum
import io
import random
import re
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from caplet._audit._canary_text import CanaryText, compose_pair
from caplet._errors import AuditError
from caplet._marks import parse

__all__ = [
    "Canary",
    "CanaryForm",
    "CanaryInjection",
    "InjectedFile",
    "comment_insertion_lines",
    "inject_canaries",
    "safe_insertion_lines",
]

#: PEP 263: the encoding declaration must be on line 1 or 2.
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")

#: Names a string-constant canary is assigned to (it is never executed).
_CONSTANT_NAMES = (
    "_REVIEW_NOTE",
    "AUDIT_STATUS",
    "_COMPLIANCE_NOTE",
    "REVIEW_MEMO",
    "__review__",
    "_APPROVAL_NOTE",
    "SECURITY_NOTICE",
    "_AUDIT_TRAIL",
)

#: How many places a docstring or constant canary tries before it becomes a comment.
_STRING_TRIES = 6

#: A file with more than this many times as many places for a comment as for a statement
#: (inside brackets: a plugin written as one expression) gets comment canaries only.
_FEW_STATEMENT_PLACES = 4


class CanaryForm(enum.Enum):
    """How a canary is written into a Python file."""

    COMMENT = "comment"
    DOCSTRING = "docstring"
    CONSTANT = "constant"


@dataclass(frozen=True, slots=True)
class Canary:
    """One planted canary: its words, its form, and where it is in the file as shown.

    ``first_line``/``last_line`` are 1-based lines of the injected file
    ``file`` (the prompt shows that file with them).
    """

    text: CanaryText
    form: CanaryForm
    file: str
    first_line: int
    last_line: int
    #: The lines as planted (comment marks, quotes, a constant's name): what a
    #: model quoting the canary whole would copy.
    planted: str = ""

    @property
    def id(self) -> str:
        return self.text.id

    @property
    def phrases(self) -> tuple[str, ...]:
        return self.text.phrases


@dataclass(frozen=True, slots=True)
class InjectedFile:
    """One file with canaries planted, and how to map its lines back.

    ``line_map[i]`` is the original (1-based) line number of line ``i + 1`` of
    ``source``, or 0 for a line caplet added (a canary or a blank separator).
    """

    path: str
    source: str
    line_map: tuple[int, ...]

    def original_line(self, line: int) -> int:
        """The original line of injected ``line``; 0 for a canary line or out of range."""
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return 0

    def injected_line(self, original: int) -> int:
        """Where original line ``original`` is in :attr:`source` (0 when out of range)."""
        if original < 1:
            return 0
        for index, mapped in enumerate(self.line_map):
            if mapped == original:
                return index + 1
        return 0

    @property
    def canary_lines(self) -> tuple[int, ...]:
        """Line numbers (in :attr:`source`) that caplet added."""
        return tuple(i + 1 for i, mapped in enumerate(self.line_map) if mapped == 0)


@dataclass(frozen=True, slots=True)
class CanaryInjection:
    """Both canaries, and every file they were planted in (one or two)."""

    canaries: tuple[Canary, Canary]
    files: tuple[InjectedFile, ...]

    def file(self, path: str) -> InjectedFile | None:
        """The injected version of ``path``; None when no canary went there."""
        for injected in self.files:
            if injected.path == path:
                return injected
        return None

    @property
    def ids(self) -> tuple[str, str]:
        return (self.canaries[0].id, self.canaries[1].id)


def _split_lines(source: str) -> list[str]:
    """Lines as :mod:`tokenize` numbers them: split on ``\\n`` only, ends kept."""
    return io.StringIO(source).readlines()


def safe_insertion_lines(source: str) -> tuple[int, ...]:
    """Line numbers ``L`` (2 .. n+1) before which a whole line may be inserted.

    ``L`` is safe when line ``L - 1`` ends a logical line (a ``NEWLINE``
    token) or is a blank or comment line outside brackets (an ``NL`` token at
    bracket depth 0): then line ``L`` cannot be inside a string, a bracketed
    expression or a backslash continuation, and a comment there changes no
    token of the program. ``n + 1`` means "after the last line"; it is
    offered only when the source ends with a newline. When the source does
    not parse or tokenize (it is not valid Python), only the end is offered.
    """
    return _places(source)[0]


def comment_insertion_lines(source: str) -> tuple[int, ...]:
    """Line numbers ``L`` (2 .. n+1) before which a whole ``#`` comment line may be inserted.

    The places of :func:`safe_insertion_lines`, and also every line inside
    brackets whose previous line ends there (an ``NL`` token at any depth): a
    comment line is legal between the lines of a bracketed expression, and
    changes no token of it (auditor24: a plugin written as one bracketed
    expression, ``create_functions = lambda config: {...}`` over hundreds of
    lines, left a canary only line 2 and the end, so its payload sat where no
    canary could be). Never inside a string (a triple-quoted string or an
    f-string is one token, so no ``NL`` ends a line inside it) or after a
    backslash continuation (which has no ``NL``). :func:`_plant` still checks
    that the program is the same with the comment there.
    """
    return _places(source)[1]


def _places(source: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """:func:`safe_insertion_lines` and :func:`comment_insertion_lines`, from one parse and
    one pass of ``tokenize``."""
    lines = _split_lines(source)
    count = len(lines)
    if count == 0:
        return (1,), (1,)
    ends = _line_ends(source) if _parses(source) else None
    if ends is None:
        # tokenize reads on past what does not parse, and retries an unclosed quote at each
        # quote of the line: a line of 8,000 "\\'" took it 3.9 s, the 800 KB the prompt
        # budget reads hours (attack25). The parser (C, linear) says first whether there is
        # a program to read; when there is none, or tokenize fails, after the last line is
        # the only place certainly outside every construct we could misjudge.
        return (count + 1,), (count + 1,)
    outside, inside = ends
    # Never before line 2 when line 2 holds the encoding cookie (PEP 263
    # only honours it on line 1 or 2), and never before line 1 ("line 0").
    first = 3 if count >= 2 and _COOKIE.match(lines[1]) else 2
    positions = [after + 1 for after in sorted(outside) if first <= after + 1 <= count]
    if lines[-1].endswith("\n") or not positions:
        # Without a final newline "after the last line" needs one added;
        # that is only done when there is no other place.
        positions.append(count + 1)
    within = {after + 1 for after in inside if first <= after + 1 <= count}
    return tuple(positions), tuple(sorted(set(positions) | within))


def _line_ends(source: str) -> tuple[set[int], set[int]] | None:
    """The lines that end outside brackets (a ``NEWLINE``, or an ``NL`` at depth 0) and
    those that end inside them (an ``NL`` at a depth above 0); ``None`` when ``tokenize``
    refuses the source."""
    outside: set[int] = set()
    inside: set[int] = set()
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(0, depth - 1)
            elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                outside.add(token.start[0])
            elif token.type == tokenize.NL:
                inside.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return None
    return outside, inside


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _is_comment_only(line: str) -> bool:
    return line.lstrip().startswith("#")


def _parses(source: str) -> bool:
    try:
        parse(source)  # a long run of marks refused (attack23): not parsed
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True


def _comment_indent(lines: Sequence[str], position: int) -> str:
    """The indentation of the line a comment goes before (or of the last line at the end)."""
    following = lines[position - 1] if position <= len(lines) else ""
    if not following.strip() and position > 1:
        following = lines[position - 2]
    return _indent_of(following)


def _statement_indent(lines: Sequence[str], position: int) -> str:
    """The indentation of the statement a docstring or constant goes before ("" at the end)."""
    for line in lines[position - 1 :]:
        if line.strip() and not _is_comment_only(line):
            return _indent_of(line)
    return ""


def _render(
    text: CanaryText, form: CanaryForm, indent: str, newline: str, rng: random.Random
) -> list[str]:
    """The canary's lines; it only ever breaks between sentences."""
    segments = text.segments
    one_line = len(segments) == 1 or rng.random() < 0.4
    if form is CanaryForm.COMMENT:
        if one_line:
            return [f"{indent}# {text.text}{newline}"]
        return [f"{indent}# {segment}{newline}" for segment in segments]
    if form is CanaryForm.DOCSTRING:
        if one_line:
            return [f'{indent}"""{text.text}"""{newline}']
        return [
            f'{indent}"""{newline}',
            *(f"{indent}{segment}{newline}" for segment in segments),
            f'{indent}"""{newline}',
        ]
    if form is CanaryForm.CONSTANT:
        name = rng.choice(_CONSTANT_NAMES)
        if one_line:
            return [f'{indent}{name} = "{text.text}"{newline}']
        last = len(segments) - 1
        return [
            f"{indent}{name} = ({newline}",
            *(
                f'{indent}    "{segment}{" " if k < last else ""}"{newline}'
                for k, segment in enumerate(segments)
            ),
            f"{indent}){newline}",
        ]
    raise AssertionError(form)  # pragma: no cover - every form is handled above


@dataclass(slots=True)
class _Block:
    """A canary ready to be inserted before line ``position``."""

    position: int
    text: CanaryText
    form: CanaryForm
    lines: list[str]
    blank_before: bool = False
    blank_after: bool = False


def _assemble(
    lines: Sequence[str], blocks: Sequence[_Block], newline: str
) -> tuple[str, tuple[int, ...], list[tuple[int, int]]]:
    """The injected source, its line map, and each block's (first, last) line."""
    out: list[str] = []
    line_map: list[int] = []
    spans: list[tuple[int, int]] = [(0, 0)] * len(blocks)
    order = sorted(range(len(blocks)), key=lambda k: blocks[k].position)
    for number in range(1, len(lines) + 2):
        here = [k for k in order if blocks[k].position == number]
        for index, k in enumerate(here):
            block = blocks[k]
            if block.blank_before or index > 0:
                # A blank line keeps a comment canary apart from a neighbouring
                # comment (and two canaries at one place apart from each other).
                out.append(newline)
                line_map.append(0)
            start = len(out) + 1
            out.extend(block.lines)
            line_map.extend(0 for _ in block.lines)
            spans[k] = (start, len(out))
            if block.blank_after:
                out.append(newline)
                line_map.append(0)
        if number <= len(lines):
            out.append(lines[number - 1])
            line_map.append(number)
    return "".join(out), tuple(line_map), spans


def _plant(
    path: str, source: str, texts: Sequence[CanaryText], rng: random.Random
) -> tuple[InjectedFile, list[Canary]]:
    """Plant ``texts`` (one or two canaries) in one file's ``source``."""
    lines = _split_lines(source)
    positions = list(safe_insertion_lines(source))
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    if lines and not lines[-1].endswith("\n") and positions[-1] == len(lines) + 1:
        # Only "after the last line" is left: the last line needs its newline.
        lines[-1] += newline
        source = "".join(lines)
    original_parses = _parses(source)
    # A comment may also go between the lines of a bracketed expression (auditor24),
    # where the program it joins must stay the same program.
    program = _program(source) if original_parses else None
    commentable = comment_insertion_lines(source) if program is not None else tuple(positions)
    blocks: list[_Block] = []
    taken: set[int] = set()
    for text in texts:
        free = [p for p in positions if p not in taken] or positions
        form = rng.choice(list(CanaryForm)) if original_parses else CanaryForm.COMMENT
        if len(positions) * _FEW_STATEMENT_PLACES < len(commentable):
            # Few places for a statement (one bracketed expression): a docstring or a
            # constant could only go there, so a comment goes anywhere instead.
            form = CanaryForm.COMMENT
        block: _Block | None = None
        if form is not CanaryForm.COMMENT:
            for position in rng.sample(free, min(_STRING_TRIES, len(free))):
                indent = _statement_indent(lines, position)
                candidate = _Block(position, text, form, _render(text, form, indent, newline, rng))
                if _parses(_assemble(lines, [*blocks, candidate], newline)[0]):
                    block = candidate
                    break
        if block is None:
            block = _comment_block(
                lines,
                blocks,
                text,
                newline=newline,
                rng=rng,
                places=(positions, commentable),
                taken=taken,
                program=program,
            )
        taken.add(block.position)
        blocks.append(block)
    injected, line_map, spans = _assemble(lines, blocks, newline)
    canaries = [
        Canary(
            text=b.text,
            form=b.form,
            file=path,
            first_line=first,
            last_line=last,
            planted="".join(b.lines),
        )
        for b, (first, last) in zip(blocks, spans, strict=True)
    ]
    return InjectedFile(path=path, source=injected, line_map=line_map), canaries


def _program(source: str) -> str:
    """The program ``source`` parses to, without positions: what a comment must not change.

    Parsed through :func:`caplet._marks.parse`, as every parse of plugin text is."""
    import ast  # as _marks does: ast loads at the first parse, not at import

    return ast.dump(parse(source))


def _comment_block(
    lines: Sequence[str],
    blocks: Sequence[_Block],
    text: CanaryText,
    *,
    newline: str,
    rng: random.Random,
    places: tuple[Sequence[int], Sequence[int]],
    taken: set[int],
    program: str | None,
) -> _Block:
    """A comment canary at a random free place of ``places`` (the safe ones, and those
    :func:`comment_insertion_lines` adds inside brackets).

    A place inside brackets is taken only when the file with the comment there
    parses to the same program (the tokenizer's word checked by the parser's),
    and at most :data:`_STRING_TRIES` of them are tried; a safe place needs no
    check, and one is always left.
    """
    safe, commentable = places
    free = [p for p in commentable if p not in taken] or list(commentable)
    before_it = program
    if program is not None and blocks:
        before_it = _program(_assemble(lines, blocks, newline)[0])
    tries = 0
    for position in rng.sample(free, len(free)):
        inside = position not in safe
        if inside and (before_it is None or tries >= _STRING_TRIES):
            continue
        candidate = _comment_at(lines, position, text, newline, rng)
        if not inside:
            return candidate
        tries += 1
        if _keeps(lines, [*blocks, candidate], newline, before_it or ""):
            return candidate
    left = [p for p in safe if p not in taken] or list(safe)
    return _comment_at(lines, rng.choice(left), text, newline, rng)


def _comment_at(
    lines: Sequence[str], position: int, text: CanaryText, newline: str, rng: random.Random
) -> _Block:
    before = lines[position - 2] if position >= 2 else ""
    after = lines[position - 1] if position <= len(lines) else ""
    return _Block(
        position,
        text,
        CanaryForm.COMMENT,
        _render(text, CanaryForm.COMMENT, _comment_indent(lines, position), newline, rng),
        blank_before=_is_comment_only(before),
        blank_after=_is_comment_only(after),
    )


def _keeps(lines: Sequence[str], blocks: Sequence[_Block], newline: str, program: str) -> bool:
    try:
        return _program(_assemble(lines, blocks, newline)[0]) == program
    except (SyntaxError, ValueError, RecursionError):
        return False


def inject_canaries(
    sources: Mapping[str, str], *, rng: random.Random | None = None
) -> CanaryInjection:
    """Plant two fresh canaries in the Python files ``sources`` (path -> text).

    With two files or more, the canaries go to two different files chosen at
    random; with one, both go there at different places. Each canary's
    wording, identifier format and form are drawn independently (module
    docstring). ``rng`` defaults to :class:`random.SystemRandom`.
    """
    if not sources:
        raise AuditError("cannot plant canaries: the plugin has no Python source file")
    rng = rng if rng is not None else random.SystemRandom()
    first, second = compose_pair(rng)
    paths = sorted(sources)
    targets = rng.sample(paths, 2) if len(paths) >= 2 else [paths[0], paths[0]]
    planned: dict[str, list[CanaryText]] = {}
    for path, text in zip(targets, (first, second), strict=True):
        planned.setdefault(path, []).append(text)
    files: list[InjectedFile] = []
    by_id: dict[str, Canary] = {}
    for path, texts in planned.items():
        injected, canaries = _plant(path, sources[path], texts, rng)
        files.append(injected)
        by_id.update((c.id, c) for c in canaries)
    return CanaryInjection(canaries=(by_id[first.id], by_id[second.id]), files=tuple(files))
