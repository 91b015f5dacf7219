"""The package-mode prefilter: which files need the AST pass at all.

``ast.parse`` runs at about 4 MB/s and the rule visitor halves that, while
one google-re2 ``Set`` over a file's text runs at hundreds of MB/s. When a
plain package (no manifest) is scanned, only *threats* and chains can be
danger (capabilities are merely observed), and every threat rule needs a
specific token to be present in the text: ``exec``/``eval``/``compile``
called or passed as a name, an indicator string from
:mod:`caplet._scan._indicators`, ``dup2``/``pty``/``urlretrieve``, or a
pair: ``environ`` and a network module, ``getattr``/``__import__`` and a
name concatenated from literals, ``builtins`` and ``getattr``/``exec``. A file whose text has
none of them cannot produce a threat finding, so it is not parsed.

Soundness: the patterns over-approximate the rules (they also match in
comments and strings, which only costs a parse). Python normalises
identifiers with NFKC (PEP 3131), so fullwidth ``exec`` is ``exec``: text with
non-ASCII characters is matched after NFKC normalisation too. Plugins are
never prefiltered (every file of a plugin gets the full AST pass, because
there undeclared *capabilities* are danger too).

Why a skipped file cannot match a rule, rule by rule: a data-flow threat
needs a source of a kind it follows and a sink, each an API the resolver
names from the text's own imports and attributes; their triggers are built
from the very tables the rules read (:mod:`caplet._scan._triggers`), each API
matched in every spelling the resolver accepts, so a file with no such
spelling has no such call. Names computed at run time reach an API only
through a lookup (``getattr``, ``__import__``, a namespace indexed), which has
its own pairs below; text rules that need no AST (long lines, Trojan Source,
text aimed at the auditor) run on skipped files too. What no pattern here
sees is a *literal* the data flow computes from pieces (a program name, an
environment key or a path reversed, sliced or concatenated), a known gap
written down in docs/architecture.md (``_triggers``). tests/_scan/test_triggers.py holds
the argument to the code: every entry of those tables, as written and
imported under an alias, and every rule's worked example, gives the same
danger findings prefiltered and not.
"""

from __future__ import annotations

import enum
import threading
import unicodedata
from bisect import bisect_left
from collections.abc import Collection
from typing import Any, Final, Literal

import re2

from caplet._marks import stream_safe
from caplet._reading import reads_differently
from caplet._scan._aliases import follow, note_binding
from caplet._scan._glue_patterns import GLUE_FORMS, GLUES
from caplet._scan._indicators import AUDITOR_PATTERN
from caplet._scan._prefilter_patterns import (
    ALIASING_PAIRS,
    COMMAND_WORDS,
    DEFERRED,
    LOCAL_PAIRS,
    PAIRS,
    PREFILTER_PATTERNS,
)
from caplet._scan._prefilter_sets import BLIND, MAX_MEM, Sets, newlines, utf8

__all__ = [
    "BLIND",
    "FOCUS_FROM",
    "MAX_LARGE_FOCUS",
    "PREFILTER_PATTERNS",
    "Need",
    "Prefilter",
    "prefilter",
]


class Need(enum.Enum):
    """What :meth:`Prefilter.check` found a file needs (or a set of focus lines)."""

    NOTHING = "nothing"
    FULL = "full"


#: More focus lines than this and the whole file is visited anyway.
_MAX_FOCUS_LINES = 64
#: A file this large (characters) that needs the AST is still only visited around
#: its hits: the statements holding any pattern's match or a sink token below.
_FOCUS_FROM = 12_000
#: ... unless it has more hit lines than this.
_MAX_LARGE_FOCUS = 400
#: Both, for the glued literals' widening of a large file's focus (_glued_strings).
FOCUS_FROM: Final = _FOCUS_FROM
MAX_LARGE_FOCUS: Final = _MAX_LARGE_FOCUS
#: Tokens of sinks that only widen the focus of a file that needs the AST anyway
#: (a send or a write may sit in a statement with no threat token).
_FOCUS_ONLY: Final = (
    r"\.(?:post|put|patch|send|sendall|sendto|sendmail|send_message|request|urlopen|connect|"
    r"write|write_bytes|write_text|recv|startfile|chmod)\s*\(|__file__",
)


class _Seen:
    """What one check of a text found, kept for the passes that read the same text
    again (:meth:`Prefilter.completes`, :meth:`Prefilter.glue_marks`,
    :meth:`Prefilter.located`): matching or folding it again cost as much as the
    first time (issue 16)."""

    __slots__ = ("encoded", "folded", "late_asked", "located", "matched", "text")

    def __init__(self, text: str, encoded: bytes, matched: list[int], late_asked: bool) -> None:
        self.text = text
        self.encoded = encoded
        self.matched = frozenset(matched)
        #: whether the deferred sides were looked for
        self.late_asked = late_asked
        #: ``None`` until asked; ``True``: the text is its own NFKC folding; else its
        #: folding's UTF-8 and what the two sets found in it
        self.folded: Literal[True] | tuple[bytes, frozenset[int]] | None = None
        #: what :meth:`Prefilter.hit_lines` located around the sets' answer with the large
        #: files' limit, aliases followed (``False``: not asked)
        self.located: frozenset[int] | Literal[False] | None = False


class Prefilter:
    """Every pattern in two RE2 sets (:class:`~caplet._scan._prefilter_sets.Sets`); a check is
    two C-level matches.

    Except the deferred sides of conjunctions (``DEFERRED``): they are a third
    set, asked only in a file whose two sets found every other side of one of
    their conjunctions (:meth:`_match`). Each kept DFA positions alive across
    much of the text (inside every identifier, after every ``for`` or ``=``,
    through a ``def``'s parameters), so the pairs' set built most of its states
    for them on a first pass over new text: 0.3 of the stdlib's 0.8 s of
    prefilter (issue 16).

    Hits of the exec and name-building patterns only matter at the call
    itself, so for them the check returns the lines to visit (the AST pass
    then visits only the statements holding them, see the scanner's
    ``_focus``), with the uses of whatever such a line binds (a namespace
    bound on one line is looked up on another); any other hit (an
    indicator, a chain half) needs the whole file, because chains combine
    what different statements do.
    """

    def __init__(self) -> None:
        patterns = list(PREFILTER_PATTERNS)
        # Each conjunction's patterns' indices (the first one's hits are the focus lines).
        self._pairs: list[tuple[int, ...]] = []
        for together in PAIRS:
            self._pairs.append(tuple(range(len(patterns), len(patterns) + len(together))))
            patterns.extend(together)
        self._solo = len(PREFILTER_PATTERNS)
        # Not a threat token: whether text addressed to the auditor may be
        # there (CPL-AUD-001), answered by the same match.
        self._auditor = len(patterns)
        # A command's words join the solo patterns' set (they were solo patterns; in the
        # pairs' set they made its first pass over the stdlib a tenth slower, issue 16).
        numbered = [*enumerate(patterns), (self._auditor, AUDITOR_PATTERN)]
        light = {i for i, p in numbered if i < self._solo or p in COMMAND_WORDS}
        # Not threat tokens either: where _glued_strings may find literals added or joined
        # (:meth:`glue_marks`), numbered past every other index. Not its junctions: in this
        # set their pattern cost more on a first pass over the stdlib than it saved
        # (its DFA's states, issue 16).
        first_mark = len(patterns) + 1 + len(_FOCUS_ONLY)
        self._glue_marks = [first_mark + k for k in range(len(GLUES))]
        numbered += [(i, re2.escape(glue)) for i, glue in zip(self._glue_marks, GLUES, strict=True)]
        light.update(self._glue_marks)
        # The other glue spellings (recall10, :meth:`form_marks`), numbered past those.
        first_form = first_mark + len(GLUES)
        self._form_marks = frozenset(first_form + k for k in range(len(GLUE_FORMS)))
        numbered += [(first_form + k, form) for k, form in enumerate(GLUE_FORMS)]
        light.update(self._form_marks)
        # The deferred sides (see _defer) are in a third set, asked only where the other
        # sides of one of their conjunctions hit, so what the sets answer is exact
        # wherever a conjunction can hold.
        self._deferred, self._gates = _defer(patterns, self._pairs, light | {self._auditor})
        # Each conjunction by its first side, each gate by its least index: one holds only
        # where that index was found, so a check asks those alone (asking every one of
        # them of every file was a tenth of the check's own time, issue 16).
        self._pair_of = {sides[0]: sides for sides in self._pairs}
        self._gates_by_key: dict[int, list[frozenset[int]]] = {}
        for gate in self._gates:
            self._gates_by_key.setdefault(min(gate), []).append(gate)
        self._set: Any = Sets(
            [
                [n for n in numbered if n[0] in light],
                [n for n in numbered if n[0] not in light and n[1] not in self._deferred],
            ],
            # the solo patterns' set as two and the pairs' as three: fewer DFA states built
            # on a first pass (Sets). With 81 solo and 94 pair patterns (speed33; 57 and 57
            # when speed16 chose one and two) a first pass over the stdlib cost 1.2 s
            # of CPU instead of 1.7-1.9, over 30 benign packages 3.9-4.1 s instead of 4.2-4.7
            split=(2, 3),
        )
        self._late: Any = Sets([[(i, p) for p, owners in self._deferred.items() for i in owners]])
        #: Each side's conjunctions (:meth:`completes`).
        self._sides: dict[int, list[tuple[int, ...]]] = {}
        for sides in self._pairs:
            for index in sides:
                self._sides.setdefault(index, []).append(sides)
        # Indices whose hits are local to one call: their match positions
        # become focus lines. Everything else means "visit the whole file".
        # exec passed as a value (``run = exec``) is not focused: the call
        # through the alias is on another line.
        self._focused = {self._pairs[i][0] for i in LOCAL_PAIRS}
        # Hits whose line may bind what a later line looks up or calls: followed.
        self._aliasing = {self._pairs[i][0] for i in ALIASING_PAIRS}
        self._locators: dict[int, Any] = {i: re2.compile(patterns[i]) for i in self._focused}
        self._patterns = [*patterns, *_FOCUS_ONLY]
        self._focus_only = range(len(patterns), len(self._patterns))
        self._all_locator: Any = None
        #: This thread's last :meth:`check_text`: its text, what the sets found in it,
        #: whether the deferred sides were looked for and its UTF-8 (:meth:`completes`
        #: and :meth:`glue_marks` read it again).
        self._last = threading.local()

    def engine_answers(self, probe: str) -> bool:
        """Whether each compiled set finds something in ``probe`` (written to hit all)."""
        answers = getattr(self._set, "each_answers", None)
        if answers is None:  # a stand-in set (tests): asked as one
            return bool(self._set.Match(utf8(probe)))
        late = getattr(self._late, "each_answers", None)
        return bool(answers(utf8(probe))) and (late is None or bool(late(utf8(probe))))

    def check_text(self, text: str) -> tuple[Need | frozenset[int], bool]:
        """:meth:`check`, and whether text addressed to an auditor may be in ``text``.

        One match answers both (a Set reports every pattern it saw); the
        answer is computed per call, so concurrent threads do not mix them up.
        """
        encoded = utf8(text)
        matched, unasked = self._match(encoded)
        seen = self._remember(text, encoded, matched, unasked)
        if BLIND in matched:
            return Need.FULL, True
        # the set read the bytes; text a model reads differently (a zero-width space
        # inside "ignore", a sentence in tag characters) is asked again as read (attack20)
        auditor = self._auditor in matched or reads_differently(text, encoded)
        return self._answer(seen, matched, unasked), auditor

    def check(self, text: str) -> Need | frozenset[int]:
        """Nothing, the whole file, or the 1-based lines the AST pass must visit.

        A large file that needs the whole AST is still visited only around
        its hits (the statements holding them, whole functions and class
        members; every module-level binding is collected): the rest of a
        large library holds no threat token, and its visit was most of the
        scanner's time.
        """
        encoded = utf8(text)
        matched, unasked = self._match(encoded)
        seen = self._remember(text, encoded, matched, unasked)
        return self._answer(seen, matched, unasked)

    def _remember(
        self, text: str, encoded: bytes, matched: list[int], unasked: frozenset[str]
    ) -> _Seen:
        """Keep what the sets found in ``text`` (:class:`_Seen`) for this thread's
        passes that read it again (its last four texts: a file, its logical lines,
        its glued lines, its escaped lines; with three the file's record was gone when
        the escaped lines asked ``completes`` of it, and the file was matched again)."""
        seen = _Seen(text, encoded, matched, not unasked)
        last: list[_Seen] = getattr(self._last, "found", [])
        self._last.found = [seen, *last[:3]]
        return seen

    def _seen(self, text: str) -> _Seen | None:
        """This thread's record of its last check of this very ``text``, if any."""
        found: list[_Seen] = getattr(self._last, "found", [])
        for seen in found:
            if seen.text is text:
                return seen
        return None

    def glue_marks(self, text: str) -> tuple[bytes, tuple[str, ...]] | None:
        """For :mod:`caplet._scan._glued_strings`: the UTF-8 of ``text`` and which of
        :data:`GLUES` are in it (in their order), as this thread's last check of this
        very text found them (the same match as its threat tokens: most files have
        none, and searching for each was a sixth of the prefilter, issue 16); ``None``
        when there is no such check or a set could not answer (then search them all)."""
        seen = self._seen(text)
        if seen is None or BLIND in seen.matched:
            return None
        matched = seen.matched
        glues = tuple(g for g, i in zip(GLUES, self._glue_marks, strict=True) if i in matched)
        return seen.encoded, glues

    def form_marks(self, text: str) -> tuple[bytes, bool] | None:
        """For :mod:`caplet._scan._glued_forms`: the UTF-8 of ``text`` and whether any of
        :data:`GLUE_FORMS` is in it, as this thread's last check of this very text found
        (recall10); ``None`` when there is no such check or a set could not answer (then
        search the text)."""
        seen = self._seen(text)
        if seen is None or BLIND in seen.matched:
            return None
        return seen.encoded, not self._form_marks.isdisjoint(seen.matched)

    def _recalled(self, text: str) -> tuple[set[int] | None, bool]:
        """What the sets found in ``text`` and its NFKC folding (:meth:`_remember`, else
        matched again; ``None``: a set could not answer), and whether the deferred sides
        were looked for too."""
        seen = self._seen(text)
        if seen is None:
            return self._found(text, self._set), False
        folded = True if text.isascii() else self._folded(seen)
        if folded is True:
            return set(seen.matched), seen.late_asked
        found = folded[1]
        return (None if BLIND in found else set(found | seen.matched)), False

    def _folded(self, seen: _Seen) -> Literal[True] | tuple[bytes, frozenset[int]]:
        """``True`` if ``seen``'s text (not ASCII) is its own NFKC folding, else the
        folding's UTF-8 and what the two sets find in it (with :data:`BLIND` if one
        could not answer), remembered."""
        if seen.folded is None:
            # runs of marks bounded first: NFKC sorts each in quadratic time (attack23)
            safe = stream_safe(seen.text, seen.encoded)
            if safe is seen.text and unicodedata.is_normalized("NFKC", safe):
                seen.folded = True
            else:
                folding = utf8(unicodedata.normalize("NFKC", safe))
                seen.folded = folding, frozenset(self._set.Match(folding) or ())
        return seen.folded

    def _match(self, data: bytes) -> tuple[list[int], frozenset[str]]:
        """The indices of every pattern found in ``data`` wherever a conjunction may hold,
        and the deferred patterns not looked for (none of their conjunctions can hold).

        The two sets answer first; where they found every other side of a conjunction
        with a deferred side, the third set (of every deferred side) answers too, so
        a conjunction holds in the answer exactly when each of its sides is in
        ``data``, as if the two sets held every pattern. A deferred pattern not looked
        for is absent from the answer but may be in ``data`` (:meth:`hit_lines`
        locates it anyway).
        """
        return self._late_too(data, list(self._set.Match(data) or ()))

    def _late_too(self, data: bytes, found: list[int]) -> tuple[list[int], frozenset[str]]:
        """:meth:`_match`, given what the two sets found in ``data``."""
        if BLIND in found or not self._gates:
            return found, frozenset()
        present = set(found)
        if not any(
            gate <= present
            for key in present.intersection(self._gates_by_key)
            for gate in self._gates_by_key[key]
        ):
            return found, frozenset(self._deferred)
        late = self._late.Match(data)
        if BLIND in late:
            return [BLIND], frozenset()
        return found + late, frozenset()

    def _answer(
        self, seen: _Seen, matched: list[int], unasked: frozenset[str]
    ) -> Need | frozenset[int]:
        text, encoded = seen.text, seen.encoded
        if BLIND in matched:
            return Need.FULL  # not located around hits either: the set saw none
        need = self._check(encoded, matched, focus=True)
        if need is not Need.FULL and not text.isascii():
            # identifiers Python folds (fullwidth, mathematical letters) may hide a hit
            # beside others seen as written: then the focus lines are not enough either.
            # Most text outside ASCII folds to itself, which the quick check answers at
            # half the cost of folding it (issue 16).
            folded = self._folded(seen)
            if folded is not True:
                normalised = folded[0]
                found = self._late_too(normalised, list(folded[1]))[0]
                if self._check(normalised, found, focus=False) is not Need.NOTHING:
                    return Need.FULL  # line numbers of the normalised text are not the file's
            if need is Need.NOTHING:
                return need
        if need is Need.FULL and len(text) > _FOCUS_FROM:
            lines = self.hit_lines(text, _MAX_LARGE_FOCUS, matched, encoded, unasked)
            seen.located = lines
            return Need.FULL if lines is None else lines
        return need

    def _check(self, encoded: bytes, matched: list[int], *, focus: bool) -> Need | frozenset[int]:
        if not matched:
            return Need.NOTHING
        if BLIND in matched:
            return Need.FULL
        found = set(matched)
        relevant = {i for i in found if i < self._solo}
        for first in found.intersection(self._pair_of):
            if found.issuperset(self._pair_of[first]):
                relevant.add(first)
        if not relevant:
            return Need.NOTHING
        if not focus or not relevant <= self._focused:
            return Need.FULL
        lines: set[int] = set()
        bound: set[bytes] = set()
        seen: set[int] = set()
        for index in relevant:
            # Located in the UTF-8 bytes, not the str: google-re2's wrapper turns
            # every byte offset of a str match back into a character offset by
            # scanning from the last one, which cost more than the matching
            # (issue 16). A newline is one byte in UTF-8, so lines count the same.
            for match in self._locators[index].finditer(encoded):
                # the last byte: the first may be the newline before the name
                lines.add(encoded.count(b"\n", 0, match.end() - 1) + 1)
                if len(lines) > _MAX_FOCUS_LINES:
                    return Need.FULL
                if index in self._aliasing and not note_binding(
                    encoded, match.start(), bound, seen
                ):
                    return Need.FULL
        if not follow(encoded, bound, lines, _MAX_FOCUS_LINES):
            return Need.FULL
        return frozenset(lines)

    def completes(self, text: str, glued: str) -> bool:
        """Whether a conjunction holds in ``text`` and ``glued`` (lines of it with their
        literals glued) together but in neither alone: a side only the glue makes, the
        others elsewhere in the file (``requests.post('http:' '//10.0.0.1', ...)``
        beside a credential parameter: CPL-THR-026, attack7), which neither the file as
        written nor its glued lines alone show. ``True`` too when a set could not
        answer. The deferred sides are looked for only where the other sides of one of
        their conjunctions are in the two together; the text as written and NFKC-folded.
        What the sets found in either is this thread's last check of it when there is
        one (matching the file again cost a third of the prefilter's time again)."""
        found, late_found_asked = self._recalled(text)
        made, late_made_asked = self._recalled(glued)
        if found is None or made is None or BLIND in found or BLIND in made:
            return True
        if any(gate <= found | made for gate in self._gates):
            late_found = set() if late_found_asked else self._late_found(text)
            late_made = set() if late_made_asked else self._late_found(glued)
            if late_found is None or late_made is None:
                return True
            found |= late_found
            made |= late_made
        together = found | made
        # only a conjunction with a side the file as written lacks can newly hold
        return any(
            together.issuperset(pair) and not made.issuperset(pair)
            for index in made - found
            for pair in self._sides.get(index, ())
        )

    def _late_found(self, text: str) -> set[int] | None:
        """:meth:`_found` of the deferred sides' set, reading the NFKC folding this thread's
        last check of this very ``text`` remembered (:meth:`_recalled` has just made it):
        folding the text again was a third of the stdlib's ``completes`` (speed33)."""
        seen = self._seen(text)
        if seen is None or text.isascii():
            return self._found(text, self._late)
        folded = self._folded(seen)
        found: set[int] = set()
        for each in (seen.encoded,) if folded is True else (seen.encoded, folded[0]):
            answer = self._late.Match(each) or ()
            if BLIND in answer:
                return None
            found.update(answer)
        return found

    @staticmethod
    def _found(text: str, sets: Any) -> set[int] | None:
        """The indices ``sets`` find in ``text`` or its NFKC folding; ``None`` when a
        set could not answer."""
        found: set[int] = set()
        texts = [text]
        if not text.isascii():
            safe = stream_safe(text)  # runs of marks bounded first (attack23)
            if safe is not text or not unicodedata.is_normalized("NFKC", safe):
                texts.append(unicodedata.normalize("NFKC", safe))
        for each in texts:
            answer = sets.Match(utf8(each)) or ()
            if BLIND in answer:
                return None
            found.update(answer)
        return found

    def located(self, text: str, limit: int, *, aliases: bool = True) -> frozenset[int] | None:
        """:meth:`hit_lines` of the patterns the sets find in ``text`` (``None``: past
        ``limit`` lines, or a set that could not answer); ``aliases``: with the uses of
        what the hit lines bind. What the sets found is this thread's last check of this
        very text when there is one (the glued and escaped lines are checked just before
        they are located: matching them again cost as much as the check)."""
        seen = self._seen(text)
        matched: Collection[int]
        if seen is None:
            encoded = utf8(text)
            matched, unasked = self._match(encoded)
        elif limit == _MAX_LARGE_FOCUS and aliases and seen.located is not False:
            # located by the check of this very text (the same sets' answer, so the same
            # lines): a large file visited around its hits whose glued lines hit too
            return seen.located
        else:
            # the check's own answer (_remember): the deferred sides were looked for, or
            # none of them was
            encoded, matched = seen.encoded, seen.matched
            unasked = frozenset() if seen.late_asked else frozenset(self._deferred)
        if BLIND in matched:
            return None
        return self.hit_lines(text, limit, matched, encoded, unasked, aliases=aliases)

    def hit_lines(
        self,
        text: str,
        limit: int,
        matched: Collection[int] | None = None,
        encoded: bytes | None = None,
        unasked: Collection[str] | None = None,
        *,
        aliases: bool = True,
    ) -> frozenset[int] | None:
        """The lines any pattern (or sink token) matches, ``None`` past ``limit`` lines
        (with ``aliases``, the uses of what hit lines of a lookup bind too).

        With ``matched`` (the answer of :meth:`_match` for ``text``, whose UTF-8 is
        ``encoded``, and ``unasked`` its deferred patterns not searched: by default
        every deferred pattern ``matched`` lacks), only the patterns found and those
        not searched are located, one at a
        time: a pattern the set did not find has no line to add. Each is
        located on its own, so no match of one can hide a match of another:
        the lines are those of one alternation of them all, or more. Without
        ``matched``, one pass of the alternation of every pattern. Matching
        runs over the UTF-8 bytes (see :meth:`_check`); a match's line is looked up
        among the text's newlines, found once (:func:`newlines`).
        """
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return None  # lone surrogates: RE2 cannot take the text as it is
        data = encoded if encoded is not None else utf8(text)
        if matched is None:
            if self._all_locator is None:
                # One alternation of every pattern: its DFA needs more than RE2's
                # default 8 MiB on large files (kubernetes: "DFA out of memory" on
                # stderr for every file, and the slow NFA instead), and more than the
                # sets' 64 MiB once blind15's decoders joined it (google-cloud-dataform's
                # generated modules: 7x slower); RE2 takes the memory only as it needs it.
                options = re2.Options()
                options.max_mem = 2 * MAX_MEM
                self._all_locator = re2.compile(
                    "|".join(f"(?:{p})" for p in self._patterns), options
                )
            located = [(self._all_locator, False)]
        else:
            # A pattern several pairs share (a network module, a process call, a payload)
            # has the same lines for each: located once, its lines' bindings followed if
            # any of them asks (issue 16: a third of the locating on the benign corpus).
            wanted: dict[str, tuple[int, bool]] = {}
            if unasked is None:
                unasked = [p for p, owners in self._deferred.items() if owners[0] not in matched]
            maybe = {i for p in unasked for i in self._deferred[p]}
            for i in sorted(
                {i for i in matched if i < self._auditor} | maybe | set(self._focus_only)
            ):
                first, aliasing = wanted.get(self._patterns[i], (i, False))
                wanted[self._patterns[i]] = (first, aliasing or i in self._aliasing)
            located = [(self._locator(i), aliasing and aliases) for i, aliasing in wanted.values()]
        lines: set[int] = set()
        bound: set[bytes] = set()
        seen: set[int] = set()
        offsets: list[int] | None = None  # the newlines' (at the first match)
        for locator, aliasing in located:
            for match in locator.finditer(data):
                # the last byte: the first may be the newline before the name (one
                # span asked of each match: each of the wrapper's accessors costs a call)
                start, end = match.span()
                if offsets is None:
                    offsets = newlines(data)
                lines.add(bisect_left(offsets, max(start, end - 1)) + 1)
                if len(lines) > limit:
                    return None
                if aliasing and not note_binding(data, start, bound, seen):
                    return None
        return frozenset(lines) if follow(data, bound, lines, limit, offsets) else None

    def _locator(self, index: int) -> Any:
        """The compiled pattern ``index`` of :attr:`_patterns` (compiled on first use)."""
        found = self._locators.get(index)
        if found is None:
            found = self._locators[index] = re2.compile(self._patterns[index])
        return found


def _defer(
    patterns: list[str], pairs: list[tuple[int, ...]], kept: set[int]
) -> tuple[dict[str, list[int]], list[frozenset[int]]]:
    """The deferred patterns (:data:`DEFERRED`) with the indices each answers for, and
    for each conjunction with a deferred side the indices of its other sides (its
    gate: where the sets found them all, the deferred sides are looked for). A
    pattern is deferred only if every index it answers for is a side of a
    conjunction (not a solo pattern, a command's words or the auditor's): those
    are read only through the conjunctions."""
    owners: dict[str, list[int]] = {}
    for index, pattern in enumerate(patterns):
        owners.setdefault(pattern, []).append(index)
    deferred = {
        p: owners[p] for p in sorted(DEFERRED) if p in owners and not kept.intersection(owners[p])
    }
    gates: list[frozenset[int]] = []
    for together in pairs:
        gate = frozenset(i for i in together if patterns[i] not in deferred)
        if len(gate) < len(together) and gate not in gates:
            gates.append(gate)
    return deferred, gates


_CACHE: list[Prefilter] = []


def prefilter() -> Prefilter:
    """The process-wide compiled prefilter."""
    if not _CACHE:
        _CACHE.append(Prefilter())
    return _CACHE[0]
