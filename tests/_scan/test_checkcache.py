"""The self-check's pass is remembered across processes only for the exact code that passed.

Each test has its own home (tests/conftest.py), so the cache file lives in
its temporary directory; the kept in-process outcome is forgotten before
and after each test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import re2

from caplet import _atomic
from caplet._errors import ScanError
from caplet._scan import _checkcache, _selfcheck
from caplet._scan._indicators import indicator_set
from caplet._scan._prefilter import prefilter
from caplet._scan._selfcheck import engine_answers, self_check

BROKEN = r"scanner self-check failed: rules? .* did not fire on"


class BlindSet:
    """An RE2 set that matches nothing, as google-re2's may on an internal error."""

    def Match(self, text: bytes) -> list[int]:
        return []


@pytest.fixture(autouse=True)
def fresh_outcome() -> Iterator[None]:
    _selfcheck._reset()
    yield
    _selfcheck._reset()


def cache_file() -> Path:
    return Path(os.environ["HOME"]) / ".cache" / "caplet" / "scan-self-check"


def no_replay(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the full replay record that it ran (and still answer)."""
    runs: list[str] = []
    real = _selfcheck._failure

    def counted() -> str | None:
        runs.append("replay")
        return real()

    monkeypatch.setattr(_selfcheck, "_failure", counted)
    return runs


def test_a_pass_is_remembered_and_skips_the_next_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = no_replay(monkeypatch)
    self_check()
    assert runs == ["replay"]
    stored = cache_file()
    assert stored.read_text(encoding="ascii").strip() == _checkcache.fingerprint()
    assert stored.stat().st_mode & 0o777 == 0o600
    assert stored.parent.stat().st_mode & 0o777 == 0o700
    _selfcheck._reset()  # as a new process would start
    self_check()
    assert runs == ["replay"]


def test_remembering_a_pass_is_no_state_write_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # The crash tests count an operation's state write steps in one run and kill the
    # next runs at each: a cache written by the first run only must not be one of them.
    steps: list[str] = []
    monkeypatch.setattr(_atomic, "write_step", steps.append)
    self_check()
    key = _checkcache.fingerprint()
    assert key is not None
    assert _checkcache.remembered(key)
    assert steps == []
    assert [p.name for p in cache_file().parent.iterdir()] == [cache_file().name]


def test_another_fingerprint_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = no_replay(monkeypatch)
    cache_file().parent.mkdir(parents=True, mode=0o700)
    cache_file().write_text("0" * 64 + "\n", encoding="ascii")
    os.chmod(cache_file(), 0o600)
    self_check()
    assert runs == ["replay"]
    assert cache_file().read_text(encoding="ascii").strip() == _checkcache.fingerprint()


def test_the_fingerprint_covers_the_scanner_its_imports_and_the_engine() -> None:
    files = {str(p) for p in _checkcache.fingerprinted_files()}
    scanner = Path(_checkcache.__file__).parent
    for path in scanner.iterdir():
        if path.suffix in (".py", ".toml"):
            assert str(path) in files
    assert str(scanner / "exfil_domains.toml") in files
    assert str(Path(re2.__file__)) in files
    assert str(Path(re2._re2.__file__)) in files  # the compiled engine itself


def test_every_module_the_replay_runs_is_fingerprinted() -> None:
    # A fresh interpreter: which caplet modules do the scanner, its canaries and the
    # check import? Every one outside the scanner package must be in the fingerprint.
    code = (
        "import json, sys\n"
        "import caplet._scan._scanner, caplet._scan._examples, caplet._scan._selfcheck\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('caplet'))))\n"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    packages = {"caplet", "caplet._capabilities", "caplet._scan"}
    outside = {m for m in loaded if not m.startswith("caplet._scan.") and m not in packages}
    assert outside == set(_checkcache._OUTSIDE)


@pytest.mark.parametrize(
    "change",
    ["a scanner file", "an imported module", "the interpreter", "caplet's version"],
)
def test_any_change_is_another_fingerprint(
    change: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = _checkcache.fingerprint()
    assert before is not None
    if change == "a scanner file":
        extra = tmp_path / "rules.py"
        extra.write_text("RULES = 1\n", encoding="utf-8")
        real = _checkcache.fingerprinted_files
        monkeypatch.setattr(_checkcache, "fingerprinted_files", lambda: [*real(), extra])
        with_file = _checkcache.fingerprint()
        extra.write_text("RULES = 2\n", encoding="utf-8")
        assert _checkcache.fingerprint() != with_file
    elif change == "an imported module":
        module = tmp_path / "fake_findings.py"
        module.write_text("X = 1\n", encoding="utf-8")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setattr(_checkcache, "_OUTSIDE", (*_checkcache._OUTSIDE, "fake_findings"))
        assert _checkcache.fingerprint() != before
    elif change == "the interpreter":
        monkeypatch.setattr(sys, "version", sys.version + " (another build)")
        assert _checkcache.fingerprint() != before
    else:
        monkeypatch.setattr(_checkcache, "__version__", "0.0.0-other")
        assert _checkcache.fingerprint() != before


def test_an_unreadable_file_means_no_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "gone.py"
    real = _checkcache.fingerprinted_files
    monkeypatch.setattr(_checkcache, "fingerprinted_files", lambda: [*real(), missing])
    assert _checkcache.fingerprint() is None
    runs = no_replay(monkeypatch)
    self_check()
    _selfcheck._reset()
    self_check()
    assert runs == ["replay", "replay"]
    assert not cache_file().exists()


def test_a_blind_engine_is_caught_despite_a_remembered_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    self_check()
    assert cache_file().exists()
    _selfcheck._reset()
    monkeypatch.setattr(prefilter(), "_set", BlindSet())
    assert not engine_answers()
    with pytest.raises(ScanError, match=BROKEN) as caught:
        self_check()
    assert "CPL-THR-001" in str(caught.value)  # the replay names the rules


@pytest.mark.parametrize("blind", ["indicators", "gate", "prefilter"])
def test_the_probe_sees_each_blind_set(blind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert engine_answers()
    target: object = prefilter() if blind == "prefilter" else indicator_set()
    attribute = {"indicators": "_text", "gate": "_gate", "prefilter": "_set"}[blind]
    monkeypatch.setattr(target, attribute, BlindSet())
    assert not engine_answers()


@pytest.mark.parametrize("part", range(5))
def test_the_probe_sees_either_prefilter_set_blind(
    part: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the prefilter is five RE2 sets (the solo patterns in two, the pairs' in three,
    # speed33): each is probed on its own, a part that the probe's words miss by its
    # sentinel
    parts = prefilter()._set.parts
    assert len(parts) == 5
    blinded = list(parts)
    blinded[part] = (parts[part][0], BlindSet())
    monkeypatch.setattr(prefilter()._set, "parts", blinded)
    assert not engine_answers()


def test_an_engine_that_raises_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    class Raising:
        def Match(self, text: bytes) -> list[int]:
            raise re2.error("out of memory")

    monkeypatch.setattr(indicator_set(), "_text", Raising())
    assert not engine_answers()


def test_a_failure_is_never_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indicator_set(), "_text", BlindSet())
    with pytest.raises(ScanError, match=BROKEN):
        self_check()
    assert not cache_file().exists()


@pytest.mark.parametrize("weakness", ["group-writable folder", "world-writable file", "symlink"])
def test_a_cache_others_could_write_is_not_trusted(
    weakness: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    self_check()
    key = _checkcache.fingerprint()
    assert key is not None
    assert _checkcache.remembered(key)
    stored = cache_file()
    if weakness == "group-writable folder":
        os.chmod(stored.parent, 0o770)
    elif weakness == "world-writable file":
        os.chmod(stored, 0o666)
    else:
        elsewhere = tmp_path / "planted"
        elsewhere.write_text(key + "\n", encoding="ascii")
        os.chmod(elsewhere, 0o600)
        stored.unlink()
        stored.symlink_to(elsewhere)
    assert not _checkcache.remembered(key)
    runs = no_replay(monkeypatch)
    _selfcheck._reset()
    self_check()
    assert runs == ["replay"]


def test_a_cache_of_another_user_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    self_check()
    key = _checkcache.fingerprint()
    assert key is not None
    assert _checkcache.remembered(key)
    someone_else = os.geteuid() + 1
    monkeypatch.setattr(os, "geteuid", lambda: someone_else)
    assert not _checkcache.remembered(key)


def test_xdg_cache_home_is_used_and_a_relative_one_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    self_check()
    assert (tmp_path / "xdg" / "caplet" / "scan-self-check").exists()
    assert not cache_file().exists()
    _selfcheck._reset()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    self_check()
    assert cache_file().exists()
    assert not Path("relative").exists()


def test_a_cache_that_cannot_be_written_costs_only_the_replay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    runs = no_replay(monkeypatch)
    self_check()
    _selfcheck._reset()
    self_check()
    assert runs == ["replay", "replay"]
    monkeypatch.delenv("HOME")
    monkeypatch.delenv("XDG_CACHE_HOME")
    _selfcheck._reset()
    self_check()
    assert runs == ["replay", "replay", "replay"]
