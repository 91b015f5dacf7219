"""Every rule's worked example: the true positive fires, the near miss does not, the alias does.

The examples live in :mod:`caplet._scan._examples` (the self-check and
docs/rules.md use them too). Source examples go through ``scan_source``;
tree examples are written into ``tmp_path`` (archives as the bytes built in
memory, symlinks as symlinks, paths longer than PATH_MAX through directory
file descriptors) and go through ``scan_tree``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._findings import Finding, Severity
from caplet._scan._examples import (
    CANONICAL,
    EXAMPLES,
    GAPS,
    FileTree,
    Link,
    RuleExample,
    Variant,
    example,
)
from caplet._scan._model import ScanMode
from caplet._scan._rules import RULES, RuleKind
from caplet._scan._scanner import DEFAULT_MAX_FILE_BYTES, scan_source, scan_tree


def write_tree(root: Path, tree: FileTree) -> None:
    """Create ``tree`` under ``root`` one component at a time, relative to directory fds.

    Relative operations keep working past PATH_MAX, which the CPL-SCAN-004
    example needs; ``..`` or absolute entry paths are refused.
    """
    for relative, data in tree:
        *folders, name = relative.split("/")
        assert ".." not in folders
        assert not relative.startswith("/")
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for folder in folders:
                try:
                    os.mkdir(folder, dir_fd=fd)
                except FileExistsError:
                    pass
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = inner
            if isinstance(data, Link):
                os.symlink(data.target, name, dir_fd=fd)
            else:
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
                with os.fdopen(out, "wb") as handle:
                    handle.write(data)
        finally:
            os.close(fd)


def run(example: RuleExample, variant: Variant, workdir: Path) -> tuple[Finding, ...]:
    """Findings of one variant of ``example`` (its source, or its tree written to ``workdir``)."""
    source = example.source(variant)
    if source is not None:
        return tuple(scan_source(source, example.filename, example.capabilities, mode=example.mode))
    tree = example.tree(variant)
    assert tree is not None, f"{example.rule_id} has no {variant.value} variant"
    root = workdir / variant.value
    root.mkdir()
    write_tree(root, tree)
    if example.archive:
        [(name, _)] = tree
        root = root / name
    report = scan_tree(
        root,
        example.capabilities,
        mode=example.mode,
        max_file_bytes=example.max_file_bytes or DEFAULT_MAX_FILE_BYTES,
    )
    return report.findings


def expected_severity(example: RuleExample) -> Severity:
    """What the example's rule is worth in its mode (no example declares a covering capability)."""
    rule = RULES[example.rule_id]
    if example.mode is ScanMode.PACKAGE and rule.kind is RuleKind.CAPABILITY:
        return Severity.INFO  # an observed capability
    return rule.severity


def _params(variant: Variant) -> list[object]:
    """One param per example; gap examples are strict xfails with the gap as reason."""
    params: list[object] = []
    seen: dict[str, int] = {}
    for item in EXAMPLES:
        seen[item.rule_id] = seen.get(item.rule_id, 0) + 1
        if variant is Variant.ALIAS and item.alias is None:
            continue
        if item.gap_in is not None and item.gap_in is not variant:
            continue  # its other variants are the canonical example's, tested there
        gap = item.gap(variant)
        marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
        name = (
            item.rule_id
            if seen[item.rule_id] == 1
            else f"{item.rule_id}-gap{seen[item.rule_id] - 1}"
        )
        params.append(pytest.param(item, id=name, marks=marks))
    return params


@pytest.mark.parametrize("example", _params(Variant.BAD))
def test_true_positive_fires_with_its_modes_severity(example: RuleExample, tmp_path: Path) -> None:
    findings = run(example, Variant.BAD, tmp_path)
    hits = [f for f in findings if f.rule_id == example.rule_id]
    assert hits, findings
    assert {f.severity for f in hits} == {expected_severity(example)}, hits


@pytest.mark.parametrize("example", _params(Variant.GOOD))
def test_near_miss_does_not_fire(example: RuleExample, tmp_path: Path) -> None:
    findings = run(example, Variant.GOOD, tmp_path)
    assert [f for f in findings if f.rule_id == example.rule_id] == []


@pytest.mark.parametrize("example", _params(Variant.ALIAS))
def test_alias_fires_too(example: RuleExample, tmp_path: Path) -> None:
    findings = run(example, Variant.ALIAS, tmp_path)
    hits = [f for f in findings if f.rule_id == example.rule_id]
    assert hits, findings
    assert {f.severity for f in hits} == {expected_severity(example)}, hits


def test_every_rule_has_one_canonical_example_in_table_order() -> None:
    # docs/rules.md and the self-check read them in the order of RULES
    assert [e.rule_id for e in CANONICAL] == list(RULES)
    assert all(example(r).rule_id == r for r in RULES)
    with pytest.raises(KeyError, match="CPL-NOPE-001"):
        example("CPL-NOPE-001")


def test_canonical_examples_have_no_gap_and_gaps_all_have_one() -> None:
    assert all(e.gap_in is None for e in CANONICAL)
    assert all(e.gap_in is not None and e.known_gap for e in GAPS)


def test_only_file_and_scanner_rules_lack_an_alias() -> None:
    missing = {e.rule_id for e in EXAMPLES if e.alias is None}
    assert all(RULES[r].kind is RuleKind.SCANNER for r in missing), missing


def test_source_examples_differ_from_their_near_miss() -> None:
    for item in EXAMPLES:
        assert item.bad != item.good, item.rule_id
        assert item.alias != item.bad, item.rule_id


def test_an_example_with_a_gap_says_where() -> None:
    with pytest.raises(ValueError, match="known_gap and gap_in go together"):
        RuleExample("CPL-DYN-001", ScanMode.PLUGIN, "eval(x)", "x", "y", known_gap="why")
    with pytest.raises(ValueError, match="unknown rule"):
        RuleExample("CPL-NOPE-001", ScanMode.PLUGIN, "eval(x)", "x", "y")
