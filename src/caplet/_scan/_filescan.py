"""One file's findings, with the context every rule needs, and the text-level rules.

A :class:`FileScan` is created per scanned file. The AST rules
(:mod:`caplet._scan._visitor`) and the data-flow sinks report into it
through :meth:`FileScan.emit`, which records correlation tags and lets
:mod:`caplet._scan._verdict` decide each finding's severity for the scan
mode. The rules that need no AST live here too: very long lines, Trojan
Source controls, encoded blobs and indicator strings in text that does not
parse, and the indicator rules over the file's string constants.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from collections.abc import Callable, Collection
from typing import Final

import re2

from caplet._findings import Finding
from caplet._reading import as_read, file_index
from caplet._scan._correlate import Tag, correlate
from caplet._scan._grants import Grants
from caplet._scan._indicators import (
    AUDITOR_PATTERN,
    BIDI_CONTROLS,
    IndicatorKind,
    indicator_set,
)
from caplet._scan._model import ScanMode
from caplet._scan._rules import (
    BLOB_MIN_DISTINCT,
    BLOB_MIN_LENGTH,
    LONG_LINE,
    SENSITIVE_PATH_MARKERS,
    SENSITIVE_PATH_PREFIXES,
    RuleKind,
    rule,
)
from caplet._scan._syntax import shorten
from caplet._scan._verdict import judge

__all__ = ["FileScan", "Nested", "auditor_hit", "entropy", "is_blob", "sensitive_path"]

_EXCERPT_LENGTH = 120
#: Rule ids whose findings record a correlation tag.
_RULE_TAGS = {
    "CPL-FS-002": Tag.READ,
    "CPL-PROC-001": Tag.PROCESS,
    "CPL-FS-001": Tag.WRITE,
    "CPL-FS-003": Tag.WRITE,
}
_INDICATOR_RULES = {
    IndicatorKind.CREDENTIAL_STORE: "CPL-THR-005",
    IndicatorKind.MINER: "CPL-THR-010",
    IndicatorKind.REVERSE_SHELL: "CPL-THR-008",
    IndicatorKind.NETWORK_PIPE: "CPL-THR-017",
}
_INDICATOR_TAGS = {
    IndicatorKind.EXFIL_ENDPOINT: Tag.EXFIL_ENDPOINT,
    IndicatorKind.CREDENTIAL_FILE: Tag.CREDENTIAL_FILE,
    IndicatorKind.PERSISTENCE: Tag.PERSISTENCE,
    IndicatorKind.DOWNLOAD_EXEC: Tag.DOWNLOAD_EXEC,
    IndicatorKind.CLIPBOARD: Tag.CLIPBOARD,
    IndicatorKind.WALLET_PATTERN: Tag.WALLET_PATTERN,
}
#: Indicators that mean *access* to a credential: prose (a docstring, a
#: multi-line help text) that names one is documentation, not access.
_ACCESS_KINDS = frozenset(
    {
        IndicatorKind.CREDENTIAL_FILE,
        IndicatorKind.CREDENTIAL_STORE,
        IndicatorKind.NETWORK_PIPE,
        IndicatorKind.EXFIL_ENDPOINT,
        IndicatorKind.DOWNLOAD_EXEC,
    }
)
#: A string longer than this, or with a line break, is prose or data, not a path.
_PATH_LIKE = 512
_BASE64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
_HEX_ALPHABET = frozenset("0123456789abcdefABCDEF")
#: ``bytes.translate`` table turning every non-base64 byte into a space, for
#: the text fallback on unparsable files (linear, no regex backtracking).
_NOT_BASE64 = bytes(c if chr(c) in _BASE64_ALPHABET else 0x20 for c in range(256))
#: Strings above this many bits per character are flagged (CPL-OBF-004);
#: English prose is about 4.2, hex 4.0 at most, random base64 about 6.
_ENTROPY_BITS = 5.3

#: Text addressed to an LLM reviewer (design.md section 2, threat 3): notes to
#: "AI reviewers", "ignore previous instructions", "you are an auditor",
#: "rate this LOW", "this code is safe, do not flag", "report only LOW".
_AUDITOR: Final = re2.compile(AUDITOR_PATTERN.encode())
#: A line break into a comment's next line, inside a match (the pattern's blank takes it).
_COMMENT_BREAK: Final = re.compile(r"\n[ \t]*#+")

#: Scans Python source found inside a string (its text, line, depth) into findings.
Nested = Callable[[str, int, int], list[Finding]]


class FileScan:
    """Findings of one file, with the context every rule needs.

    ``installer`` marks the tree's install script (a ``setup.py`` at the
    root of what is scanned, not one under ``examples/``), ``entry`` one pip runs
    itself (default: an installer named ``setup.py``; an in-tree build backend's
    module too), whose chains are the installer's; ``nested``
    scans Python source kept in a string of this file; ``depth`` is how
    deep inside such strings this scan is (0 for a file).
    """

    def __init__(
        self,
        file: str,
        text: str,
        grants: Grants,
        local_modules: Collection[str],
        mode: ScanMode = ScanMode.PLUGIN,
        *,
        installer: bool = False,
        entry: bool | None = None,
        nested: Nested | None = None,
        depth: int = 0,
    ) -> None:
        self.file = file
        self.text = text
        self.ascii = text.isascii()
        # Python ends lines at \n, \r\n and \r only; str.splitlines() also
        # splits on \f, \x1c, \u2028 ... and would shift every line number.
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.grants = grants
        self.local_modules = local_modules
        self.mode = mode
        self.findings: list[Finding] = []
        #: Correlation tags: first line and spelling of each (see _correlate).
        self.tags: dict[Tag, tuple[int, str]] = {}
        self.installer = installer
        if entry is None:
            entry = installer and file.rsplit("/", 1)[-1] == "setup.py"
        self.entry = installer and entry
        self.nested = nested
        self.depth = depth
        self._mitigations: set[str] = set()
        self.credential_kinds: set[str] = set()
        #: String constants seen by the AST pass: (text, line, column offset).
        self.strings: list[tuple[str, int, int]] = []
        self.secret_names: set[str] = set()

    def tag(self, tag: Tag, line: int, api: str) -> None:
        """Record ``tag`` for correlation (the first occurrence is the one shown)."""
        if tag not in self.tags:
            self.tags[tag] = (line, api)

    def mitigation(self, rule_id: str, api: str, line: int, col: int | None) -> None:
        """A mitigation finding, once per rule and file, in plugin reports only."""
        if self.mode is ScanMode.PLUGIN and rule_id not in self._mitigations:
            self._mitigations.add(rule_id)
            self.emit(rule_id, api, line, col)

    def string_indicators(self) -> None:
        """Indicator rules over the file's string constants, gated by one RE2 match.

        All strings joined by newlines go through a multi-line variant of the
        set once; only when it matches is each string matched on its own. The
        gate over-approximates (a pattern may match across two strings), so
        it never hides a string's own match.
        """
        if not self.strings:
            return
        joined = "\n".join(text for text, _, _ in self.strings)
        if not indicator_set().gate(joined):
            return
        for text, line, col in self.strings:
            prose = len(text) > _PATH_LIKE or "\n" in text
            self.indicators(text, line, col, prose=prose)

    def correlate(self) -> None:
        """Emit the chains this file's tags complete (after every other rule ran)."""
        self.string_indicators()
        chains = correlate(
            self.tags,
            # a module setup.py imports (_installer_imports) runs at install only as far as
            # setup.py calls into it: its network and download chains stay a module's
            # (lxml's buildlibxml.py, nodeenv.py), its pip and processes are the installer's;
            # an in-tree build backend is pip's entry point, as setup.py is (attack8)
            setup_py=self.entry,
            credential_kinds=len(self.credential_kinds),
            secret_names=len(self.secret_names),
        )
        for chain in chains:
            self.emit(chain.rule_id, chain.api, chain.line, None)

    def indicators(
        self, text: str, line: int, col_offset: int | None, *, prose: bool = False
    ) -> None:
        """Indicator rules and tags for one string (or one line of unparsable text)."""
        for indicator in indicator_set().matches(text):
            if prose and indicator.kind in _ACCESS_KINDS:
                continue
            rule_id = _INDICATOR_RULES.get(indicator.kind)
            if rule_id is not None:
                self.emit(rule_id, f"{indicator.label} {shorten(text)}", line, col_offset)
                continue
            tag = _INDICATOR_TAGS.get(indicator.kind)
            if tag is not None:
                self.tag(tag, line, f"{indicator.label} {shorten(text)}")
                if tag is Tag.EXFIL_ENDPOINT:
                    self.tag(Tag.EGRESS, line, indicator.label)
                elif tag is Tag.CREDENTIAL_FILE:
                    self.credential_kinds.add(indicator.label)

    def text_indicators(self) -> None:
        """Indicators line by line, for files without an AST (comments count here)."""
        if indicator_set().kinds(self.text):
            for number, line in enumerate(self.lines, start=1):
                self.indicators(line, number, 0)

    def bidi(self) -> None:
        """Trojan Source: bidirectional controls anywhere (comments and strings too)."""
        if self.ascii or not any(c in self.text for c in BIDI_CONTROLS):
            return
        for number, line in enumerate(self.lines, start=1):
            if not line.isascii():
                found = BIDI_CONTROLS.intersection(line)
                if found:
                    names = ", ".join(f"U+{ord(c):04X}" for c in sorted(found))
                    self.emit("CPL-THR-012", names, number, 0)

    def emit(
        self,
        rule_id: str,
        api: str,
        line: int,
        col_offset: int | None,
        *,
        covered: bool = False,
        capability: str | None = None,
        escalation: str | None = None,
    ) -> None:
        """Record one finding; ``col_offset`` is ast's (UTF-8 bytes, 0-based)."""
        tag = _RULE_TAGS.get(rule_id)
        if tag is not None:
            self.tag(tag, line, api)
        verdict = judge(
            rule_id, api, self.mode, covered=covered, capability=capability, escalation=escalation
        )
        if verdict is None:
            return
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        column = 0 if col_offset is None else _column(source_line, col_offset)
        excerpt = source_line.strip()
        if len(excerpt) > _EXCERPT_LENGTH:
            excerpt = excerpt[: _EXCERPT_LENGTH - 1] + "…"
        self.findings.append(
            Finding(
                rule_id=rule_id,
                severity=verdict.severity,
                message=verdict.message,
                file=self.file,
                line=line,
                column=column,
                excerpt=excerpt,
                capability=verdict.capability,
                covered=verdict.covered,
            )
        )

    def adopt(self, finding: Finding, line: int, col_offset: int | None) -> None:
        """A finding of Python source kept in a string of this file, reported at the string."""
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        excerpt = source_line.strip()
        if len(excerpt) > _EXCERPT_LENGTH:
            excerpt = excerpt[: _EXCERPT_LENGTH - 1] + "…"
        self.findings.append(
            dataclasses.replace(
                finding,
                file=self.file,
                line=line,
                column=0 if col_offset is None else _column(source_line, col_offset),
                excerpt=excerpt,
                message=f"{finding.message} (in Python source kept in a string here)",
            )
        )

    # -- text rules --------------------------------------------------------------------

    def auditor_text(self, maybe: bool = True) -> None:
        """CPL-AUD-001: comments or strings addressed to an AI auditor, after every other rule.

        A warning on its own (a project may discuss prompt injection); danger
        when the plugin declares a capability that can do harm, or when a
        threat was found in the same file of a package. ``maybe=False``: the
        package-mode prefilter's set already matched the same pattern over this
        text and found nothing, so the text is not searched again (issue 16).
        """
        if not maybe or not auditor_hit(self.text):
            return
        escalation: str | None = None
        if self.mode is ScanMode.PLUGIN and self.grants.dangerous is not None:
            escalation = f"in a plugin that declares {self.grants.dangerous}"
        elif self.mode is ScanMode.PACKAGE:
            threats = sorted(
                {f.rule_id for f in self.findings if rule(f.rule_id).kind is RuleKind.THREAT}
            )
            if threats:
                escalation = f"in a file with threat findings ({', '.join(threats[:3])})"
        read_lines = [as_read(line) for line in self.lines]
        found: set[int] = set()
        for number, read in enumerate(read_lines, start=1):
            match = _AUDITOR.search(read.encode("utf-8", "surrogatepass"))
            if match is not None:
                found.add(number)
                self._auditor_match(number, match.start(), match.group(0), escalation)
        # A sentence wrapped over lines (a docstring, prose, a manifest's multi-line
        # string): the pattern's blanks take a line break, and the model reads one
        # sentence (attack21). Found on the line it starts on, unless that line had one.
        whole = "\n".join(read_lines).encode("utf-8", "surrogatepass")
        number, counted = 1, 0  # the line at byte ``counted``: matches come in order
        for match in _AUDITOR.finditer(whole):
            number += whole.count(b"\n", counted, match.start())
            counted = match.start()
            if b"\n" not in match.group(0) or number in found:
                continue
            found.add(number)
            start = match.start() - (whole.rfind(b"\n", 0, match.start()) + 1)
            self._auditor_match(number, start, match.group(0), escalation)

    def _auditor_match(
        self, number: int, start: int, matched: bytes, escalation: str | None
    ) -> None:
        """One CPL-AUD-001 finding at ``start`` (bytes into the line as read) of line
        ``number``, placed at that character in the file."""
        line = self.lines[number - 1]
        read = as_read(line)
        text = matched.decode("utf-8", "replace")
        if "\n" in text:
            # a wrapped sentence, shown on one line, the comment marks it crossed dropped
            text = " ".join(_COMMENT_BREAK.sub(" ", text).split())
        if read is not line:
            # the match is in the line as read: placed at its first character in the file
            encoded = read.encode("utf-8", "surrogatepass")
            index = file_index(line, len(encoded[:start].decode("utf-8", "replace")))
            start = len(line[:index].encode("utf-8", "surrogatepass"))
        self.emit("CPL-AUD-001", shorten(text), number, start, escalation=escalation)

    def long_lines(self) -> None:
        # max() over the lengths runs in C; the loop only when one is too long.
        if not self.lines or max(map(len, self.lines)) <= LONG_LINE:
            return
        for number, line in enumerate(self.lines, start=1):
            if len(line) > LONG_LINE:
                self.emit("CPL-OBF-003", f"line {number} ({len(line)} characters)", number, 0)

    def blob_runs(self) -> None:
        """Encoded blobs in the raw text, for files whose strings ast cannot give us."""
        for number, line in enumerate(self.lines, start=1):
            if len(line) < BLOB_MIN_LENGTH:
                continue
            # Non-ASCII characters become "?" (not base64), then one C-level
            # translate turns every non-alphabet byte into a separator.
            ascii_line = line.encode("ascii", "replace").translate(_NOT_BASE64)
            for raw in ascii_line.split():
                run = raw.decode("ascii")
                if is_blob(run):
                    self.emit("CPL-OBF-001", f"text of {len(run)} characters", number, 0)
                    break


def auditor_hit(text: str) -> bool:
    """Whether ``text`` may hold text addressed to an auditor (one linear-time search).

    The text as a model reads it (:func:`as_read`): an instruction with a
    zero-width space between its letters, or spelled in tag characters,
    steers the auditor as the plain one does (attack20).
    """
    return _AUDITOR.search(as_read(text).encode("utf-8", "surrogatepass")) is not None


def _column(line: str, col_offset: int) -> int:
    """1-based character column from ast's UTF-8 byte offset."""
    if line.isascii():
        return col_offset + 1
    return len(line.encode("utf-8")[:col_offset].decode("utf-8", "replace")) + 1


def is_blob(text: str) -> bool:
    """Long base64 or hex text (line breaks and indentation allowed)."""
    if len(text) < BLOB_MIN_LENGTH:
        return False
    joined = "".join(line.strip() for line in text.splitlines())
    if len(joined) < BLOB_MIN_LENGTH:
        return False
    chars = set(joined)
    return len(chars) >= BLOB_MIN_DISTINCT and (chars <= _HEX_ALPHABET or chars <= _BASE64_ALPHABET)


def sensitive_path(text: str) -> bool:
    """A system or credential path literal worth a second look (CPL-FS-004)."""
    if len(text) > 4096:  # a path literal is short; prose and data are not paths
        return False
    if "/" not in text and ".netrc" not in text:  # fast exit: every pattern has one
        return False
    for prefix in SENSITIVE_PATH_PREFIXES:
        if text.startswith(prefix) or (prefix.endswith("/") and text == prefix[:-1]):
            return True
    return any(marker in text for marker in SENSITIVE_PATH_MARKERS)


def entropy(text: str) -> float:
    """Shannon entropy in bits per character (0 when it cannot reach the threshold)."""
    if len(set(text)) < 2**_ENTROPY_BITS:
        # Entropy never exceeds log2(distinct characters): exact, and cheap
        # for the long repetitive literals that are common and slow to count.
        return 0.0
    length = len(text)
    counts = collections.Counter(text).values()
    return -sum(c / length * math.log2(c / length) for c in counts)


def entropy_bits() -> float:
    """The CPL-OBF-004 threshold in bits per character."""
    return _ENTROPY_BITS
