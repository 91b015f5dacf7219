"""One file's pass: prefilter, parse, survey, rules, chains; nothing is executed.

:func:`scan_text` is what every Python file (and every string of Python
source found inside one, see :mod:`caplet._scan._sinks`) goes through:

* package mode asks the prefilter (:mod:`caplet._scan._prefilter`) first:
  a file without any threat token is never parsed, and hits local to one
  call only visit the statements holding them;
* the text rules that need no AST (long lines, Trojan Source controls);
* :func:`ast.parse`, then one survey walk (:mod:`caplet._scan._syntax`)
  and the rule visitor (:mod:`caplet._scan._visitor`);
* the per-file chains (:mod:`caplet._scan._correlate`).

A file that does not parse, or is too deep or too large to survey, still
gets the text rules (encoded blobs and indicators line by line).
"""

from __future__ import annotations

import ast
import gc
import re
import warnings
from collections.abc import Collection

from caplet._findings import Finding
from caplet._marks import LongMarkRunError, longest_mark_run, parse
from caplet._scan._escaped_strings import escaped_view, with_escaped_strings
from caplet._scan._filescan import FileScan
from caplet._scan._glued_forms import with_glued_forms
from caplet._scan._glued_strings import glued, with_glued_strings
from caplet._scan._grants import NO_GRANTS, Grants
from caplet._scan._indicators import BIDI_CONTROLS, indicator_set
from caplet._scan._logical_lines import with_logical_lines
from caplet._scan._model import ScanMode
from caplet._scan._prefilter import Need, prefilter
from caplet._scan._rules import LONG_LINE

__all__ = ["ALWAYS_PARSED", "scan_text", "unread_findings"]

#: Files always parsed, even in package mode: they run at start-up or in tests' set-up.
ALWAYS_PARSED = frozenset({"sitecustomize.py", "usercustomize.py", "conftest.py"})
#: Focus lines at most for a file too large to survey whole.
_MAX_OVERSIZED_FOCUS = 512


def scan_text(
    text: str,
    file: str,
    *,
    grants: Grants,
    local_modules: Collection[str],
    max_depth: int,
    max_nodes: int,
    mode: ScanMode = ScanMode.PLUGIN,
    installer: bool | None = None,
    install_entry: bool | None = None,
    oversized: bool = False,
    depth: int = 0,
) -> tuple[list[Finding], bool]:
    """Findings of one decoded file, and whether the AST pass ran.

    ``installer`` says whether the file is the tree's install script (by
    default: when it is named ``setup.py``); ``install_entry`` whether pip runs it
    itself, its chains the installer's (by default: an installer named ``setup.py``;
    an in-tree build backend too); ``oversized`` marks a file
    larger than the scan's size limit, read anyway in package mode but only
    ever visited around the prefilter's hits; ``depth`` is how deep inside
    strings of Python source this text was found.

    The cycle collector is paused for the whole pass, and left as it was found.

    A file's syntax tree lives through the parse, the survey and the rules,
    and holds no reference cycle (nor does anything the pass keeps:
    tests/_scan/test_filepass.py), so it is freed by reference counting when
    the pass ends. Collections started by what the pass allocates meanwhile
    only walk that tree, each node once per generation it is promoted
    through: 8% of a package scan's CPU on the benign corpus (issue 16),
    for nothing. A nested pass (a string of Python source) finds the
    collector paused and leaves it so. What a host's other thread allocates
    meanwhile is collected when the pass ends. (A plain ``try``, not a context
    manager: every file of a package comes through here, most of them decided by
    the prefilter in a few microseconds, issue 16.)
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _scan_text(
            text,
            file,
            grants=grants,
            local_modules=local_modules,
            max_depth=max_depth,
            max_nodes=max_nodes,
            mode=mode,
            installer=installer,
            install_entry=install_entry,
            oversized=oversized,
            depth=depth,
        )
    finally:
        if paused:
            gc.enable()


def _scan_text(
    text: str,
    file: str,
    *,
    grants: Grants,
    local_modules: Collection[str],
    max_depth: int,
    max_nodes: int,
    mode: ScanMode,
    installer: bool | None,
    install_entry: bool | None,
    oversized: bool,
    depth: int,
) -> tuple[list[Finding], bool]:
    """:func:`scan_text`, with the collector paused."""
    if "\r" in text:
        # Universal newlines, as the import system reads a source (importlib's
        # decode_source) and the parser counts lines: the prefilter and the text rules
        # count lines at "\n" only, so a file of "\r"-only lines had its hits on line 1
        # and its payload, visited around line 1 alone, was never checked (scanfuzz).
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    name = file.rsplit("/", 1)[-1]
    if installer is None:
        installer = name == "setup.py"
    runs_itself = _runs_itself(name, installer=installer)
    focus_lines: frozenset[int] | None = None
    truncated = False  # a file over the size limit visited around its first hit lines only
    auditor = True  # whether text aimed at the auditor may be there (unknown: maybe)
    if mode is ScanMode.PACKAGE and depth == 0 and not installer and name not in ALWAYS_PARSED:
        check = prefilter()
        need, auditor = check.check_text(text)
        need = with_logical_lines(text, need, check.check)
        need = with_glued_strings(text, need, check.check)
        # literals as the parser reads them: escapes of printable characters, a word
        # split by a backslash at a line end inside a literal (attack8)
        need = with_escaped_strings(text, need, check.check)
        # literals glued in other spellings: '%s%s' % ('ev', 'al'), ''.join (...) (recall10)
        need = with_glued_forms(text, need, check.check)
        if need is Need.NOTHING and longest_mark_run(text) and _marks_run(text, mode):
            need = Need.FULL  # data hidden in invisible marks beside a loader (blind32)
        if need is Need.NOTHING:
            # The common case on real packages: only the text rules apply,
            # and each has a C-speed exit before any per-line work.
            if _no_text_findings(text) and not auditor:
                return [], False
            scan = FileScan(
                file, text, grants, local_modules, mode, installer=installer, entry=install_entry
            )
            scan.long_lines()
            scan.bidi()
            scan.auditor_text(auditor)
            return scan.findings, False
        if not isinstance(need, Need):
            focus_lines = need
        elif oversized:
            focus_lines = prefilter().hit_lines(text, _MAX_OVERSIZED_FOCUS)
            if focus_lines is None:  # more hits than lines worth visiting: the first ones
                focus_lines = frozenset(range(1, _MAX_OVERSIZED_FOCUS + 1))
                truncated = True

    def nested(source: str, line: int, level: int) -> list[Finding]:
        found, _ = scan_text(
            source,
            file,
            grants=NO_GRANTS,
            local_modules=(),
            max_depth=max_depth,
            max_nodes=max_nodes,
            mode=ScanMode.PACKAGE,
            installer=False,
            depth=level,
        )
        return found

    scan = FileScan(
        file,
        text,
        grants,
        local_modules,
        mode,
        installer=installer,
        entry=install_entry,
        nested=nested,
        depth=depth,
    )
    scan.long_lines()
    scan.bidi()
    if truncated:
        # the lines after them were never visited: said, not passed as clean (a dropper
        # after 1,000 eval("1") lines in a 3 MB file had no finding at all: scanfuzz). A
        # warning, not danger: generated API clients (kubernetes' core_v1_api.py,
        # google-cloud-compute's compute.py) have thousands of such lines.
        scan.emit(
            "CPL-SCAN-002",
            f"over the size limit with more than {_MAX_OVERSIZED_FOCUS} lines holding threat "
            f"tokens; only lines 1-{_MAX_OVERSIZED_FOCUS} were checked",
            _MAX_OVERSIZED_FOCUS + 1,
            None,
        )
    # The AST pass's modules (survey, rules, data flow, mending: a third of the
    # scanner's import time) load at the first file that needs them, so that a scan
    # the prefilter decides whole, and every ``caplet scan`` start-up, never pays for
    # them (issue 16: start-up <= 150 ms of CPU). Once loaded, this is a lookup in
    # sys.modules per parsed file.
    from caplet._scan._computed_strings import MAX_CANDIDATES, computed_strings
    from caplet._scan._focus import focus, focus_bindings
    from caplet._scan._mend import mend
    from caplet._scan._opaque import opaque_module_uses
    from caplet._scan._shell_split import ShellTextError
    from caplet._scan._sink_stages import StagePairsError
    from caplet._scan._syntax import TooComplex, survey
    from caplet._scan._visitor import RuleVisitor

    tree: ast.AST | None = None
    try:
        with warnings.catch_warnings():
            # Invalid escapes ("\d") warn while parsing; the scanned file's
            # style is not our concern, and warnings must not escape into the
            # host (tests run with filterwarnings=error).
            warnings.simplefilter("ignore")
            tree = _parse(text, file)
    except SyntaxError as exc:
        if depth:
            return [], True  # a string that is not Python after all
        line = exc.lineno or _nul_line(text)
        # the rest of the file is still read as code: lines mended (_scan/_mend)
        mended = mend(text, file, exc)
        detail = f"; lines {', '.join(map(str, mended[1]))} not read" if mended else ""
        # what was not read may be newer syntax another interpreter runs (a PEP 701
        # f-string, PEP 695 generics on 3.12): a payload there was a warning (scanfuzz)
        # (a file that cannot be mended at all stays a warning: sphinx's util/inspect.py)
        unread = _lines_of(text, mended[1]) if mended else ""
        scan.emit(
            "CPL-SCAN-003",
            f"SyntaxError: {exc.msg}{detail}",
            line,
            None,
            escalation=_threat_tokens(unread, ScanMode.PACKAGE),
        )
        tree = mended[0] if mended else None
    except LongMarkRunError as exc:
        # not parsed: the parser would sort the run's marks in quadratic time (attack23);
        # danger as any file too complex to check (a plugin's always)
        scan.emit(
            "CPL-SCAN-002",
            str(exc),
            exc.line,
            None,
            escalation=_cannot_check(text, mode, runs_itself) or _marks_run(text, mode),
        )
    except UnicodeEncodeError as exc:  # lone surrogates in an in-memory str
        line = text.count("\n", 0, exc.start) + 1
        scan.emit("CPL-SCAN-003", f"UnicodeEncodeError: {exc.reason}", line, None)
    except ValueError as exc:  # NUL bytes on some Python versions
        scan.emit("CPL-SCAN-003", f"ValueError: {exc}", _nul_line(text), None)
    except (RecursionError, MemoryError) as exc:
        scan.emit(
            "CPL-SCAN-002",
            f"{type(exc).__name__} while parsing",
            1,
            None,
            escalation=_cannot_check(text, mode, runs_itself),
        )
    if tree is None:
        return _text_only(scan), True
    # The whole file is surveyed even when focused: a sink on a focus line is reached by
    # data bound in any function, passed by any call of this file's functions and stored
    # into names anywhere (psutil's tests/__init__.py: os.getcwd() through four functions
    # into socket.connect, issue 16). The survey is cheap beside the rules, which run on
    # the focus statements only (marked by the survey on its way: its visited ids).
    roots = None if focus_lines is None else focus(tree, focus_lines)
    surveyed = survey(tree, max_depth, max_nodes, marked=roots)
    if roots is not None and isinstance(surveyed, TooComplex) and oversized:
        # a file over the size limit is read only around its hits: what is there
        surveyed = survey(tree, max_depth, max_nodes, roots, focus_bindings(tree))
    visited = None if isinstance(surveyed, TooComplex) else surveyed.visited
    if isinstance(surveyed, TooComplex):
        scan.emit(
            "CPL-SCAN-002",
            surveyed.reason,
            surveyed.line,
            None,
            escalation=_cannot_check(text, mode, runs_itself),
        )
        return _text_only(scan), True
    visitor = RuleVisitor(scan, surveyed.bindings, surveyed.nodes, surveyed.scopes, visited)
    try:
        visitor.run()
        # text the code computes ("Log" + "in Data", "".join(map(chr, ...))) is read by the
        # indicator rules as its literals are (after the other rules: their budget first)
        computed, stopped = computed_strings(visitor.flow, surveyed.nodes, visited)
        scan.strings.extend(computed)
        if stopped is not None:
            scan.emit(
                "CPL-SCAN-002",
                f"more than {MAX_CANDIDATES} expressions build text; from line {stopped} on,"
                " the text they build was not checked for indicators",
                stopped,
                None,
                escalation=_unevaluated_threat(text, stopped, mode),
            )
        if mode is ScanMode.PLUGIN and focus_lines is None:
            # The gate: a dangerous module handed on as a value hides what runs.
            flow = visitor.flow
            opaque_module_uses(scan, surveyed.nodes, flow.resolve, flow.name_value)
    except (RecursionError, MemoryError, ShellTextError, StagePairsError) as exc:
        # Whatever a rule's recursion missed, the file is "too complex", never a
        # crash of the scan (or of an enable): the gate fails closed on it. A value
        # the evaluator would build past what can be allocated is the same (scanfuzz),
        # and commands with more shell text than a file's budget to split (attack25), or
        # more writes and runs to pair than its budget (scandos37).
        told = isinstance(exc, (ShellTextError, StagePairsError))
        scan.emit(
            "CPL-SCAN-002",
            str(exc) if told else f"{type(exc).__name__} while checking",
            1,
            None,
            escalation=_cannot_check(text, mode, runs_itself),
        )
        return _text_only(scan), True
    scan.correlate()
    scan.auditor_text(auditor)
    return scan.findings, True


def unread_findings(text: str, file: str, detail: str, mode: ScanMode) -> list[Finding]:
    """A package's file too large to read as code at all (past the collector's hard
    cap): CPL-SCAN-001, danger when its text holds what the threat rules look for, as
    for a file too complex to check (a payload after 17 MB of padding was a warning,
    exit 0: attack8; issue 16's class 6, files over the limit)."""
    scan = FileScan(file, text, NO_GRANTS, (), mode)
    runs_itself = _runs_itself(file.rsplit("/", 1)[-1], installer=None)
    scan.emit("CPL-SCAN-001", detail, 1, None, escalation=_cannot_check(text, mode, runs_itself))
    return scan.findings


#: Why a package's file the scanner could not check whole is danger (CPL-SCAN-002, 003).
_MAY_HIDE = (
    "and it holds code the threat rules look for (exec, decoders, lookups by name): "
    "a payload may hide in it, review the file by hand"
)


#: Why a package's file that runs by itself is danger when it cannot be checked whole.
_RUNS_ITSELF = (
    "and it runs without being imported (pip runs an install script, Python a "
    "sitecustomize, pytest a conftest): what cannot be checked there cannot be ruled out, "
    "review the file by hand"
)


def _runs_itself(name: str, *, installer: bool | None) -> bool:
    """Whether a file runs without anyone importing it: an install script (by default one
    named ``setup.py``), a ``sitecustomize``/``usercustomize`` or a ``conftest``."""
    return (name == "setup.py" if installer is None else installer) or name in ALWAYS_PARSED


def _cannot_check(text: str, mode: ScanMode, runs_itself: bool) -> str | None:
    """Why a package's file the scanner could not check whole is danger, or ``None``.

    An install script, a ``sitecustomize``/``usercustomize`` or a ``conftest``
    runs without anyone importing it, and no benign one is too deep or too large
    to check: there the safe answer wins whatever the file holds. A setup.py too
    deep to survey that only imports a helper of its folder hid that the helper
    runs at install (its install-time chains are the installer's only when the
    import is read: _installer_imports). Any other file is danger when it holds
    what the threat rules look for (:func:`_threat_tokens`).
    """
    if mode is ScanMode.PACKAGE and runs_itself:
        return _RUNS_ITSELF
    return _threat_tokens(text, mode)


#: Code that runs what it is given: beside a run of invisible marks, a loader of the data
#: the marks hide (blind32, GlassWorm's variation selectors).
_RUNS_CODE = re.compile(
    r"\b(?:exec|eval|compile|__import__|import_module|system|popen|Popen|loads)\s*\("
)
_MARKS_HIDE = (
    "and the file runs code (exec, eval, a process): no real source holds such a run, "
    "data hidden in invisible characters (variation selectors) may be what it runs, "
    "review the file by hand"
)


def _marks_run(text: str, mode: ScanMode) -> str | None:
    """Why a package's file not parsed for a run of marks is danger: a run longer than
    any real source holds (the benign corpus's longest is 9, :mod:`caplet._marks`) beside
    code that runs code is data hidden in invisible characters and its loader (Koi
    Security's 2025 GlassWorm: bits as variation selectors U+FE00/U+FE01; blind32)."""
    if mode is not ScanMode.PACKAGE or _RUNS_CODE.search(text) is None:
        return None
    return _MARKS_HIDE


def _unevaluated_threat(text: str, stopped: int, mode: ScanMode) -> str | None:
    """:func:`_threat_tokens` for a file whose text-building expressions from line
    ``stopped`` on were not evaluated: the literals glued on those lines are read with
    the file (``'cur' + 'l ... | sh'`` past 2,000 padding concatenations, attack5), so
    an indicator or a command only they spell makes it danger, a data table does not."""
    tail = text.split("\n", stopped - 1)[-1] if stopped > 1 else text
    found = glued(tail)
    if found is None:
        return _threat_tokens(text, mode)
    lines, raw, _ = found
    if mode is ScanMode.PACKAGE and indicator_set().kinds(lines) - indicator_set().kinds(raw):
        return _MAY_HIDE
    return _threat_tokens(lines + "\n" + text, mode)


def _threat_tokens(text: str, mode: ScanMode) -> str | None:
    """Why a package's file too complex to check is danger, or ``None`` when it is a warning.

    A package's file the scanner cannot check whole is only reported (a generated table
    is not a threat); but one that holds what the threat rules look for may be a payload
    made too deep on purpose to hide it (``x = -----...1`` beside ``exec(b64decode(...))``
    came out a warning, exit 0: scanfuzz), so there the safe answer wins. A plugin's is
    danger anyway.
    """
    if mode is not ScanMode.PACKAGE:
        return None
    need = with_logical_lines(text, prefilter().check(text), prefilter().check)
    if need is Need.NOTHING and (view := escaped_view(text)) is not None:
        need = prefilter().check(view)  # a token spelled in escapes (attack8)
    if need is Need.NOTHING:
        return None
    return _MAY_HIDE


def _lines_of(text: str, numbers: Collection[int]) -> str:
    """The lines ``numbers`` (1-based) of ``text``."""
    lines = text.split("\n")
    return "\n".join(lines[n - 1] for n in numbers if 0 < n <= len(lines))


def _parse(text: str, file: str) -> ast.AST:
    """:func:`ast.parse` (the caller has paused the collector: its thousands of nodes
    would otherwise be walked while they are made, a tenth of a package scan's CPU)."""
    tree = parse(text, filename=file)
    if any(escape in text for escape in _SURROGATE_ESCAPES):
        _replace_surrogates(tree)
    return tree


#: How a lone surrogate gets into a string constant: an escape in the source
#: (``"\ud800"``); decoded source text never holds one (it must be UTF-8).
_SURROGATE_ESCAPES = ("\\ud", "\\uD", "\\U0000d", "\\U0000D")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _replace_surrogates(tree: ast.AST) -> None:
    """Replace lone surrogates in the tree's string constants by U+FFFD.

    re2 (the rules' regular expressions) encodes what it matches as UTF-8,
    strictly: a plugin holding ``"/\ud800"`` made every scan, and so every
    enable, raise UnicodeEncodeError (found attacking issue 13's result).
    What the rules look for never needs a lone surrogate.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = _SURROGATES.sub("\ufffd", node.value)


def _text_only(scan: FileScan) -> list[Finding]:
    """The rules that need no AST, for text that could not be parsed or surveyed."""
    scan.blob_runs()
    scan.text_indicators()
    scan.correlate()
    scan.auditor_text()
    return scan.findings


def _no_text_findings(text: str) -> bool:
    """True when neither a long line nor a bidi control can be in ``text``."""
    if not text.isascii() and any(c in text for c in BIDI_CONTROLS):
        return False
    return not _has_long_line(text)


def _has_long_line(text: str) -> bool:
    """Whether a line of ``text`` (split at "\\n") is longer than :data:`LONG_LINE`.

    Each step finds the last newline within the next ``LONG_LINE + 1``
    characters (one C-level search): none means a line that long, else the
    next step starts after it. Short lines are so skipped ``LONG_LINE`` at a
    time instead of split into a list of every line, which cost as much as
    matching the prefilter on the files it decides (issue 16).
    """
    start, size = 0, len(text)
    while size - start > LONG_LINE:
        newline = text.rfind("\n", start, start + LONG_LINE + 1)
        if newline < 0:
            return True
        start = newline + 1
    return False


def _nul_line(text: str) -> int:
    index = text.find("\0")
    return text.count("\n", 0, index) + 1 if index >= 0 else 0
