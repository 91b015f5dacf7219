"""Package mode's shortcut held to the whole-file pass: the same scan with the prefilter
and with it answering "the whole file" for every file (tests of _prefilter, _triggers,
_logical_lines, _glued_strings; benchmarks/prefilter_differential.py does the same on
whole corpora)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan import _filepass
from caplet._scan._filepass import scan_text
from caplet._scan._grants import NO_GRANTS
from caplet._scan._model import ScanMode
from caplet._scan._prefilter import Need, Prefilter
from caplet._scan._scanner import scan_tree

TextDanger = list[tuple[str, int]]
TreeDanger = list[tuple[str, str, int]]


class WholeFile(Prefilter):
    """A prefilter that sends every file, whole, to the AST pass."""

    def check_text(self, text: str) -> tuple[Need | frozenset[int], bool]:
        return Need.FULL, True


def text_danger(text: str, name: str, *, max_nodes: int = 1_000_000) -> TextDanger:
    """The DANGER findings (rule, line) of one file's ``text`` in package mode."""
    findings, _ = scan_text(
        text,
        name,
        grants=NO_GRANTS,
        local_modules=(),
        max_depth=100,
        max_nodes=max_nodes,
        mode=ScanMode.PACKAGE,
    )
    return sorted({(f.rule_id, f.line) for f in findings if f.severity is Severity.DANGER})


def tree_danger(root: Path) -> TreeDanger:
    """The DANGER findings (rule, file, line) of the tree ``root`` in package mode."""
    report = scan_tree(root, mode=ScanMode.PACKAGE)
    return sorted(
        {(f.rule_id, f.file, f.line) for f in report.findings if f.severity is Severity.DANGER}
    )


def text_both_ways(
    text: str, name: str, monkeypatch: pytest.MonkeyPatch, *, max_nodes: int = 1_000_000
) -> tuple[TextDanger, TextDanger]:
    """(prefiltered, whole-file) DANGER findings of ``text``."""
    filtered = text_danger(text, name, max_nodes=max_nodes)
    with monkeypatch.context() as patch:
        patch.setattr(_filepass, "prefilter", WholeFile)
        return filtered, text_danger(text, name, max_nodes=max_nodes)


def tree_both_ways(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TreeDanger, TreeDanger]:
    """(prefiltered, whole-file) DANGER findings of the tree ``root``."""
    filtered = tree_danger(root)
    with monkeypatch.context() as patch:
        patch.setattr(_filepass, "prefilter", WholeFile)
        return filtered, tree_danger(root)


def found_in_a_package(root: Path, monkeypatch: pytest.MonkeyPatch, text: str, rule: str) -> None:
    """``text`` written as ``root/mod.py``: the whole-file pass finds ``rule`` as DANGER
    (the attack is real) and the prefiltered scan finds every DANGER it does."""
    found_in_file(root, monkeypatch, "mod.py", text, rule)


def kept_by_the_prefilter(root: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """``text`` written as ``root/mod.py`` has DANGER findings in the whole-file pass (the
    attack is real) and the prefiltered scan finds every one of them."""
    (root / "mod.py").write_text(text, encoding="utf-8")
    filtered, whole = tree_both_ways(root, monkeypatch)
    assert whole
    assert filtered == whole


def found_in_file(
    root: Path, monkeypatch: pytest.MonkeyPatch, filename: str, text: str, rule: str
) -> None:
    """:func:`found_in_a_package` with ``text`` written as ``root/filename``."""
    target = root / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    filtered, whole = tree_both_ways(root, monkeypatch)
    assert rule in {r for r, _, _ in whole}
    assert filtered == whole
