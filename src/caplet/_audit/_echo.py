"""The tokens an answer must copy from its prompt: both ends (auditor24), the checkpoints.

A server that cuts a long prompt silently (Ollama's default ``num_ctx`` keeps the end,
llama.cpp's context shift keeps the head and the tail) shows the model part of the
plugin, and the model judges that part honestly. auditor24 printed a token on the
user message's first and last lines, which the answer copies: a lost head or tail
cannot be copied. A lost *middle* was left to the server's count of the tokens it read
(:mod:`caplet._audit._prompt_read`), and attack26 cut one past it: a data file of one
long line (tens of thousands of tokens, two "words") pushed the payload file out of a
4,096-token window, both ends survived, LOW, approve.

So the files are interleaved with *checkpoints* (auditor27): a line
``<<<CHECKPOINT <nonce> <token>>>>`` with a fresh random token before the first file
(after the manifest and the findings), after every file, and inside a long file about
every :data:`SPACING` characters, which the answer copies into ``checkpoints``. A cut
is one contiguous span of the prompt, so it is seen whenever it holds a checkpoint:
a lost file always holds the one after it, and a lost span inside files holds one
when it is longer than the spacing. Which checkpoints the answer does not
echo says where the model went blind: the finding names the files between the
nearest echoed checkpoints around them.

Where a plugin's text cannot forge or shift one: a checkpoint is a line of its own
between file lines, and every file line starts with its number and ``| `` (a piece
of a long line with ``+ ``), so no file text is a checkpoint line; the delimiter
nonce and the token are random per audit, so a plugin can name a token, never know
one (naming a wrong one makes its own audit fail). The plugin does choose its sizes,
and could arrange a cut that falls between two checkpoints; the inner checkpoints
stand on a grid over all the files that starts at a random phase, so such a span
(shorter than :data:`SPACING`) is hit with a chance of about its length over the
spacing, wherever it is, and a span longer than the spacing and a line is hit always
(a checkpoint stands at the first line end past its grid point, and a line is shown
in pieces of at most the spacing).

The cost is the model's: it copies every token. A token is 8 hex digits (a guess is
one in four billion, and a plugin gets one guess per audit), a few output tokens
each; at most :data:`MOST` checkpoints keep that to a couple of hundred output tokens
for any plugin (a small local model is slow per output token, and every copy is a
chance of a mistyped token, which fails the audit closed). A plugin with more places
than that gets :data:`MOST` of them spread evenly over its text, so no stretch of it
goes longer than its share without one.
"""

from __future__ import annotations

import bisect
import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from caplet._findings import Finding, Severity

__all__ = [
    "MOST",
    "RULE_PROMPT_CUT",
    "SPACING",
    "Checkpoint",
    "Placed",
    "cut_finding",
    "missed_checkpoints",
    "place_checkpoints",
    "unechoed_ends",
]

RULE_PROMPT_CUT: Final = "CPL-AUDIT-011"

#: Characters of a file between its inner checkpoints (about 4,000 tokens of code):
#: a long line is shown in pieces this long, so every stretch has a place for one.
SPACING: Final = 16_384
#: Checkpoints in one prompt at most (module docstring: the model copies each).
MOST: Final = 32
#: What the part of the prompt before the first file holds.
_HEAD: Final = "the manifest and the scanner's findings"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint line of the prompt.

    ``before`` names what stands between the previous checkpoint (or the prompt's
    head) and this one: the manifest, files as ``#<number> <path>``.
    """

    token: str
    before: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Placed:
    """The files section with its checkpoint lines, and the checkpoints in order (the
    last one follows the last file)."""

    text: str
    checkpoints: tuple[Checkpoint, ...]


def _token(rng: random.Random | None) -> str:
    return secrets.token_hex(4) if rng is None else f"{rng.getrandbits(32):08x}"


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a checkpoint may go: after line ``line`` of block ``block``, at ``offset``."""

    offset: int
    block: int
    line: int
    inside: bool


def _places(blocks: Sequence[Sequence[str]], rng: random.Random | None) -> list[_Place]:
    """Every place for a checkpoint: before the first block, after each block, and the
    first line end inside a block past each point of a grid :data:`SPACING` apart that
    starts at a random phase (never after a block's header or last line: its end is a
    place). The grid runs over the whole section, not file by file, so a short file is
    no blind spot: any span is hit as likely as its length says (module docstring)."""
    places = [_Place(0, -1, -1, inside=False)]
    target = (rng or random.SystemRandom()).randrange(SPACING)
    offset = 0
    for number, lines in enumerate(blocks):
        last = len(lines) - 1
        for index, line in enumerate(lines):
            offset += len(line) + 1
            if index == last:
                places.append(_Place(offset, number, index, inside=False))
            elif 1 <= index < last - 1 and offset >= target:
                places.append(_Place(offset, number, index, inside=True))
            else:
                continue
            while target <= offset:
                target += SPACING
        offset += 1  # the blank line between blocks
    return places


def _spread(places: list[_Place]) -> list[_Place]:
    """At most :data:`MOST` places, evenly over the text: the first place at or past
    each share of it, the last place (after the last file) always."""
    if len(places) <= MOST:
        return places
    total = places[-1].offset
    offsets = [place.offset for place in places]
    chosen = {len(places) - 1}
    for share in range(MOST - 1):
        chosen.add(bisect.bisect_left(offsets, share * total // (MOST - 1)))
    return [places[index] for index in sorted(chosen)]


def _spanned(labels: Sequence[str], first: _Place | None, last: _Place) -> tuple[str, ...]:
    """The labels of the text between two places (``first`` None: the prompt's head)."""
    if first is None:
        return (_HEAD, *labels[: last.block + 1])
    start = first.block if first.inside else first.block + 1
    return tuple(labels[start : last.block + 1])


def place_checkpoints(
    blocks: Sequence[Sequence[str]],
    labels: Sequence[str],
    nonce: str,
    rng: random.Random | None = None,
) -> Placed:
    """The files section: ``blocks`` (each file's lines, its delimiters included, named
    by ``labels``) with checkpoint lines placed between and inside them (module
    docstring), blocks separated by a blank line as the prompt's sections are."""
    chosen = _spread(_places(blocks, rng))
    at: dict[tuple[int, int], str] = {}
    checkpoints: list[Checkpoint] = []
    previous: _Place | None = None
    for place in chosen:
        token = _token(rng)
        at[place.block, place.line] = f"<<<CHECKPOINT {nonce} {token}>>>"
        checkpoints.append(Checkpoint(token=token, before=_spanned(labels, previous, place)))
        previous = place
    out: list[str] = []
    if (-1, -1) in at:
        out.append(at[-1, -1])
    for number, lines in enumerate(blocks):
        if out:
            out.append("")
        for index, line in enumerate(lines):
            out.append(line)
            if (number, index) in at:
                out.append(at[number, index])
    return Placed(text="\n".join(out), checkpoints=tuple(checkpoints))


def unechoed_ends(start: str, end: str, echo: tuple[str, str]) -> list[str]:
    """Which ends of the prompt the model did not echo: ``"first"``, ``"last"``, both or none.

    An echo holding the token counts (a model may copy the whole line); the comparison
    ignores case, as models retype hex.
    """
    said = (start.lower(), end.lower())
    ends = ("first", "last")
    return [name for name, token, copy in zip(ends, echo, said, strict=True) if token not in copy]


def missed_checkpoints(echoed: Sequence[str], checkpoints: Sequence[Checkpoint]) -> list[int]:
    """The indexes of the checkpoints whose token no echoed text holds (case ignored)."""
    said = "\n".join(echoed).lower()
    return [index for index, point in enumerate(checkpoints) if point.token not in said]


def _unseen(missed: Sequence[int], checkpoints: Sequence[Checkpoint]) -> str:
    """What the model may not have been shown: for each missed checkpoint, what stands
    between the echoed checkpoints around it (a cut is one span holding the missed one)."""
    lost: dict[str, None] = {}
    for index in missed:
        lost.update(dict.fromkeys(checkpoints[index].before))
        following = index + 1
        while following < len(checkpoints) and following in missed:
            following += 1
        if following < len(checkpoints):  # past the last: only the closing sentence
            lost.update(dict.fromkeys(checkpoints[following].before))
    names = list(lost)
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return ", ".join(names[:10]) + more


def cut_finding(
    ends: Sequence[str],
    missed: Sequence[int],
    checkpoints: Sequence[Checkpoint],
) -> Finding:
    """The leading danger finding of an answer that did not echo ``ends`` of the prompt
    or the ``missed`` checkpoints: the model was shown part of the plugin (CPL-AUDIT-011)."""
    said: list[str] = []
    if ends:
        lines = " and ".join(ends)
        said.append(
            f"did not echo the token caplet printed on the prompt's {lines} "
            f"line{'s' if len(ends) > 1 else ''}"
        )
    if missed:
        said.append(
            f"did not echo {len(missed)} of the {len(checkpoints)} checkpoint tokens caplet "
            f"printed between the plugin's files, around {_unseen(missed, checkpoints)}"
        )
    return Finding(
        rule_id=RULE_PROMPT_CUT,
        severity=Severity.DANGER,
        message=(
            f"AUDIT INCOMPLETE: the model {'; and it '.join(said)}; so it may have been "
            "shown only part of the plugin (a server that cuts a long prompt silently: "
            "Ollama's default num_ctx, llama.cpp's context shift); its assessment is not "
            "trusted: raise the server's context window (Ollama: num_ctx, llama.cpp: -c) "
            "above the prompt's size and audit again (--fresh), or review the plugin manually"
        ),
    )
