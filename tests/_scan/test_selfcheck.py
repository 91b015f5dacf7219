"""The scanner refuses to scan when a rule does not fire on its built-in canary.

A broken engine is simulated by replacing the compiled RE2 sets with one
whose ``Match`` finds nothing, as google-re2 may on an internal error: this
is one of the few places a monkeypatch is the right tool. The kept outcome
is forgotten before and after each test, so no test sees another's verdict.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet._errors import ScanError
from caplet._scan import _scanner, _selfcheck
from caplet._scan._examples import CANONICAL
from caplet._scan._indicators import indicator_set
from caplet._scan._prefilter import Prefilter, prefilter
from caplet._scan._rules import RULES
from caplet._scan._selfcheck import self_check

BROKEN = (
    r"scanner self-check failed: rules? .* did not fire on (its built-in canary|their "
    r"built-in canaries).*; the rule engine is broken \(a regex engine returning no match on "
    r"an internal error must not pass as clean\); reinstall caplet or report a bug"
)


class BlindSet:
    """An RE2 set that matches nothing, whatever it is given."""

    def Match(self, text: bytes) -> list[int]:
        return []


@pytest.fixture(autouse=True)
def fresh_outcome() -> Iterator[None]:
    _selfcheck._reset()
    yield
    _selfcheck._reset()


def test_the_real_engine_fires_every_canary() -> None:
    assert _selfcheck._failure() is None
    self_check()


def test_every_rule_is_checked_in_memory_or_on_disk() -> None:
    in_memory = {e.rule_id for e in CANONICAL if not e.disk_only}
    on_disk = {e.rule_id for e in CANONICAL if e.disk_only}
    assert in_memory | on_disk == set(RULES)
    # Only what a matcher cannot decide is left to the tests on real files.
    assert on_disk == {
        "CPL-ARC-001",
        "CPL-ARC-002",
        "CPL-ARC-003",
        "CPL-ARC-004",
        "CPL-SCAN-004",
        "CPL-SCAN-005",
        "CPL-SCAN-006",  # a plugin's data file is opened only by the walk of a directory
        "CPL-THR-030",  # a wheel's __pycache__ is read from the archive (a tree skips it)
    }


def test_a_blind_indicator_set_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indicator_set(), "_text", BlindSet())
    with pytest.raises(ScanError, match=BROKEN) as caught:
        self_check()
    message = str(caught.value)
    # every rule that hangs on an indicator is named
    for rule_id in ("CPL-THR-005", "CPL-THR-010", "CPL-NET-004", "CPL-PER-001"):
        assert rule_id in message
    assert "CPL-DYN-001" not in message  # AST rules still fire


def test_a_blind_prefilter_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefilter(), "_set", BlindSet())
    with pytest.raises(ScanError, match=BROKEN) as caught:
        self_check()
    # package-mode canaries never reach the AST pass, so their threats miss
    for rule_id in ("CPL-THR-001", "CPL-THR-003", "CPL-THR-008"):
        assert rule_id in str(caught.value)


def test_a_threat_canary_the_prefilter_would_skip_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the scans themselves keep the working prefilter; only the explicit
    # check of each threat canary against it sees a blind one
    blind = Prefilter()
    monkeypatch.setattr(blind, "_set", BlindSet())
    monkeypatch.setattr(_selfcheck, "prefilter", lambda: blind)
    with pytest.raises(ScanError, match=BROKEN) as caught:
        self_check()
    message = str(caught.value)
    assert "(the package-mode prefilter skipped CPL-THR-001, " in message
    assert "CPL-THR-012" not in message  # a text rule, run on every file
    assert "CPL-DYN-001" not in message  # not a threat: never prefiltered


def test_scans_are_refused_while_the_engine_is_broken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(indicator_set(), "_text", BlindSet())
    (tmp_path / "plugin.py").write_text("import os\n")
    with pytest.raises(ScanError, match=BROKEN):
        _scanner.scan_source("import os\n", "plugin.py")
    with pytest.raises(ScanError, match=BROKEN):
        _scanner.scan_tree(tmp_path)


def test_the_outcome_is_kept_for_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    self_check()
    # broken after a passed check: the check does not run again
    monkeypatch.setattr(indicator_set(), "_text", BlindSet())
    self_check()
    _selfcheck._reset()
    with pytest.raises(ScanError, match=BROKEN):
        self_check()
    # and a failure is kept too, even once the engine works again
    monkeypatch.undo()
    with pytest.raises(ScanError, match=BROKEN):
        self_check()


def test_concurrent_first_scans_run_the_check_once(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    real = _selfcheck._failure

    def counted() -> str | None:
        runs.append(threading.get_ident())
        return real()

    monkeypatch.setattr(_selfcheck, "_failure", counted)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def scan() -> None:
        start.wait()
        try:
            self_check()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=scan) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(runs) == 1


def test_the_check_does_not_go_through_the_public_entry_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # scan_source and scan_tree call self_check: calling them back would recurse
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the self-check called a public scan function")

    monkeypatch.setattr(_scanner, "scan_source", refuse)
    monkeypatch.setattr(_scanner, "scan_tree", refuse)
    self_check()


def test_a_scan_started_by_the_check_itself_does_not_deadlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _selfcheck._failure

    def reentrant() -> str | None:
        self_check()  # as a future check that scans through scan_source would
        return real()

    monkeypatch.setattr(_selfcheck, "_failure", reentrant)
    self_check()
