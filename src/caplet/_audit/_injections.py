"""The injection attempts an auditor model reports, located in the plugin's files.

The auditor reports an injection attempt with a quote of it; the quote is
the plugin's own when it is found in the plugin's files, and then it is a
danger finding at its place (:mod:`caplet._audit._deep`). A model reads
text differently from a byte comparison: tag characters as the ASCII they
encode, zero-width characters not at all, a comment block as one sentence.
Split from :mod:`caplet._audit._deep` (attack18 grew it past 600 lines).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from typing import Final

from caplet._audit._canary import CanaryInjection
from caplet._audit._canary_check import cut_canary_quotes, foreign_words
from caplet._audit._model import InjectionAttempt
from caplet._audit._prompt import PluginFile, text_lines
from caplet._findings import Finding, Severity
from caplet._reading import as_read, escapes_as_read, name_as_read

__all__ = [
    "MIN_EXCERPT",
    "RULE_INJECTION",
    "Readable",
    "locate",
    "located_injections",
    "readable_files",
]

RULE_INJECTION: Final = "CPL-AUDIT-004"

#: A reported injection excerpt must have this many characters to be located.
MIN_EXCERPT: Final = 8
#: A report keeping fewer words of its own than this, once the canary quote is
#: cut, was a report of the canary.
_MIN_OWN_WORDS: Final = 3


def _bare(line: str) -> str:
    """A line without comment marks, quotes and spacing, as a model reads it (:func:`as_read`).

    The scanner's CPL-AUD-001 reads text by the same rule (attack20).
    """
    return " ".join(as_read(line).strip().strip("#").strip().strip("\"'").split())


def _needles(excerpt: str) -> list[str]:
    """The substantial lines of an excerpt, without comment marks, quotes and spacing."""
    return [needle for raw in excerpt.splitlines() if len(needle := _bare(raw)) >= MIN_EXCERPT]


@dataclasses.dataclass(frozen=True, slots=True)
class Readable:
    """One file's lines as read (:func:`_bare`), joined, and where each starts in the join."""

    path: str
    lines: tuple[str, ...]
    joined: str
    starts: tuple[int, ...]


def _name(file: PluginFile) -> PluginFile:
    """A file's path as text to search: as written, and with ``_ - . /`` read as blanks,
    as a model reads ``ignore_previous_instructions``."""
    return PluginFile(path=file.path, text=f"{file.path}\n{name_as_read(file.path)}", size=0)


def readable_files(files: Iterable[PluginFile]) -> tuple[Readable, ...]:
    """The text files prepared once for every quote :func:`locate` looks for."""
    found = []
    for file in files:
        if file.text is None:
            continue
        lines = tuple(_bare(line) for line in text_lines(file.text))
        starts = tuple(itertools.accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
        found.append(Readable(file.path, lines, " ".join(lines), starts))
    return tuple(found)


def locate(excerpt: str, files: Sequence[Readable]) -> tuple[str, int] | None:
    """Where the first substantial line of ``excerpt`` found in the original files is.

    Each line of a file is compared as read (:func:`_bare`), and so are its
    lines joined: a model quotes a comment block or a docstring spread over
    several lines as one sentence (attack18), located at the line it starts on.
    """
    for needle in _needles(excerpt):
        for file in files:
            for number, line in enumerate(file.lines, start=1):
                if needle in line:
                    return file.path, number
            found = file.joined.find(needle)
            if found != -1:
                return file.path, bisect.bisect_right(file.starts, found)
    return None


def _injection_finding(attempt: InjectionAttempt, where: tuple[str, int] | None) -> Finding:
    quoted = " ".join(attempt.excerpt.split())[:200] or attempt.reason
    if where is not None:
        file, line = where
        return Finding(
            rule_id=RULE_INJECTION,
            severity=Severity.DANGER,
            message=(
                f"prompt injection aimed at the auditor: {quoted!r}; a plugin that "
                "tries to steer its review must not be trusted, remove the text"
            ),
            file=file,
            line=line,
            excerpt=attempt.excerpt,
        )
    return Finding(
        rule_id=RULE_INJECTION,
        severity=Severity.WARNING,
        message=(
            f"the auditor reported an injection attempt caplet could not find "
            f"verbatim in the plugin: {quoted!r}; check it by hand"
        ),
        excerpt=attempt.excerpt,
    )


def located_injections(
    attempts: Sequence[InjectionAttempt],
    files: Sequence[PluginFile],
    injection: CanaryInjection,
    manifest_text: PluginFile | None = None,
) -> tuple[tuple[InjectionAttempt, ...], tuple[Finding, ...]]:
    """Turn reported injections into findings.

    Text found in the original files is the plugin's own: a danger finding
    at its place (shown without any canary quote it came with). Otherwise
    the canary quotes are cut: what keeps words of its own is a warning to
    check by hand (or danger, when the rest is found in the plugin); what
    keeps none was a report of a canary.
    """
    canaries = injection.canaries

    readable = readable_files(files)
    parsed_manifest = readable_files(() if manifest_text is None else (manifest_text,))
    names = readable_files(_name(file) for file in files)
    # Escapes a model reads as the letters they stand for (``\u0049gnore`` in a JSON
    # help text), on the same lines (steer22).
    unescaped = readable_files(
        dataclasses.replace(file, text=escapes_as_read(file.text))
        for file in files
        if file.text is not None and escapes_as_read(file.text) != file.text
    )

    def find(excerpt: str) -> tuple[str, int] | None:
        where = locate(excerpt, readable) or locate(excerpt, unescaped)
        if where is None:
            # In the manifest as parsed (decoded escapes), not on a line of its file.
            parsed = locate(excerpt, parsed_manifest)
            where = None if parsed is None else (parsed[0], 0)
        if where is None:
            # In a file's name (or a folder's, part of it): the prompt lists every name,
            # and a name is the plugin's text as its lines are (steer22).
            named = locate(excerpt, names)
            where = None if named is None else (named[0], 0)
        return where

    located: list[InjectionAttempt] = []
    findings: list[Finding] = []
    for attempt in attempts:
        where = find(attempt.excerpt)
        cut = dataclasses.replace(
            attempt,
            excerpt=cut_canary_quotes(attempt.excerpt, canaries),
            reason=cut_canary_quotes(attempt.reason, canaries),
        )
        if where is None and cut.excerpt != attempt.excerpt:
            if len(foreign_words(cut.excerpt, canaries)) < _MIN_OWN_WORDS:
                continue  # a report of a canary: nothing of the plugin's in it
            where = find(cut.excerpt)
        if where is not None:
            cut = dataclasses.replace(cut, file=where[0], line=where[1])
        located.append(cut)
        findings.append(_injection_finding(cut, where))
    return tuple(located), tuple(findings)
