"""Pathological inputs end in a bounded finding, never a hang, a crash or a huge report.

Issue 4: "a 50 MB file, 10,000-deep nesting, a line of 10 MB, a zip bomb
finish within a bounded time with a finding". No test measures time (that
would be flaky); each asserts the finding and that the work stayed bounded
(bytes read, findings reported). Inputs are generated in ``tmp_path``: the
50 MB file is sparse, and the bombs repeat one Z_FULL_FLUSH deflate block
of zeros (tests/_scan/archivekit.py), so gigabytes of content cost
a few megabytes on disk and milliseconds to write.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._findings import Finding
from caplet._scan._model import ScanMode
from caplet._scan._scanner import DEFAULT_MAX_FILE_BYTES, scan_source, scan_tree
from tests._scan.archivekit import GIB, MIB, tar_gz_bomb, zip_bomb


def by_rule(findings: tuple[Finding, ...] | list[Finding], rule_id: str) -> list[Finding]:
    return [f for f in findings if f.rule_id == rule_id]


# -- size ------------------------------------------------------------------------------


def test_a_50_mb_file_is_a_finding_and_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "plugin.py"
    with big.open("wb") as handle:
        handle.truncate(50 * 1000 * 1000)  # sparse: 50 MB of NUL bytes, no disk used
    report = scan_tree(tmp_path)
    [finding] = report.findings
    assert finding.rule_id == "CPL-SCAN-001"
    assert finding.file == "plugin.py"
    assert f"50000000 bytes, limit {DEFAULT_MAX_FILE_BYTES}" in finding.message
    # decided from the size alone: not one byte of it was scanned
    assert (report.files_scanned, report.bytes_scanned) == (0, 0)


def test_a_50_mb_file_is_a_finding_in_package_mode_too(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_bytes(b"x = 1\n" * (9 * MIB))  # 54 MiB of real text
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert [f.rule_id for f in report.findings] == ["CPL-SCAN-001"]
    assert report.bytes_scanned == 0


# -- depth -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "-" * 10_000 + "1",  # unary operators
        "not " * 10_000 + "x",
        "a" + ".b" * 10_000,  # an attribute chain
    ],
    ids=["unary-minus", "not", "attributes"],
)
def test_10000_deep_nesting_is_a_finding_not_a_recursion_error(expression: str) -> None:
    findings = scan_source(f"x = {expression}\n", "plugin.py")
    [deep] = by_rule(findings, "CPL-SCAN-002")
    assert deep.line == 1
    assert "while parsing" in deep.message
    # the line is long too; nothing else is claimed about code never parsed
    assert {f.rule_id for f in findings} == {"CPL-SCAN-002", "CPL-OBF-003"}


def test_10000_deep_nesting_in_a_tree_scan(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text("x = " + "-" * 10_000 + "1\n")
    (tmp_path / "helpers.py").write_text("import subprocess\n")
    report = scan_tree(tmp_path)
    assert [f.file for f in by_rule(report.findings, "CPL-SCAN-002")] == ["plugin.py"]
    # the next file is still scanned
    assert [f.file for f in by_rule(report.findings, "CPL-PROC-002")] == ["helpers.py"]


# -- a line of 10 MB -------------------------------------------------------------------


@pytest.mark.slow
def test_a_10_mb_line_is_a_long_line_finding(tmp_path: Path) -> None:
    # one line of code: a call with a 10 MB string argument (the entropy and
    # blob checks then walk 10 MB of text: linear, but seconds)
    line = 'print("' + "lorem ipsum dolor sit amet " * (10 * MIB // 27) + '")'
    (tmp_path / "plugin.py").write_text("# data\n" + line + "\n")
    report = scan_tree(tmp_path, max_file_bytes=16 * MIB)
    [long_line] = report.findings
    assert long_line.rule_id == "CPL-OBF-003"
    assert long_line.line == 2
    assert f"line 2 ({len(line)} characters)" in long_line.message
    assert len(long_line.excerpt) <= 120
    assert report.bytes_scanned > 10 * MIB


def test_a_10_mb_comment_line_in_a_package_is_a_long_line_finding(tmp_path: Path) -> None:
    # package mode: the prefilter clears the file, the long-line rule still runs
    (tmp_path / "mod.py").write_text("#" + "=" * (10 * MIB) + "\nVALUE = 1\n")
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE, max_file_bytes=16 * MIB)
    assert [(f.rule_id, f.line) for f in report.findings] == [("CPL-OBF-003", 1)]


# -- bombs -----------------------------------------------------------------------------


def test_a_tar_gz_bomb_is_a_finding(tmp_path: Path) -> None:
    # 32 MiB of zeros in a few dozen KiB: refused by ratio while streaming
    path = tar_gz_bomb(tmp_path / "bomb-1.0.tar.gz", member_size=32 * MIB, zeros=33 * MIB)
    assert path.stat().st_size < 64 * 1024
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    [bomb] = by_rule(report.findings, "CPL-ARC-002")
    assert bomb.file == "bomb.py"
    assert "decompression bomb" in bomb.message
    assert report.bytes_scanned == 0


def test_a_tar_gz_declaring_10_gib_is_a_finding_from_its_header(tmp_path: Path) -> None:
    path = tar_gz_bomb(tmp_path / "bomb-1.0.tar.gz", member_size=10 * GIB, zeros=10 * GIB)
    assert path.stat().st_size < 12 * MIB
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    assert by_rule(report.findings, "CPL-ARC-002")
    assert report.bytes_scanned == 0


def test_a_zip_bomb_is_a_finding(tmp_path: Path) -> None:
    path = zip_bomb(tmp_path / "bomb-1.0.zip", declared=32 * MIB, zeros=32 * MIB)
    assert path.stat().st_size < 64 * 1024
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    [bomb] = by_rule(report.findings, "CPL-ARC-002")
    assert bomb.file == "bomb.py"
    assert report.bytes_scanned == 0


def test_a_zip_declaring_10_gib_is_refused_before_decompressing(tmp_path: Path) -> None:
    path = zip_bomb(tmp_path / "bomb-1.0.zip", declared=10 * GIB, zeros=10 * GIB)
    report = scan_tree(path, mode=ScanMode.PACKAGE)
    assert by_rule(report.findings, "CPL-ARC-002")
    assert report.bytes_scanned == 0


def test_a_bomb_in_a_plugin_scan_is_danger(tmp_path: Path) -> None:
    path = zip_bomb(tmp_path / "bomb-1.0.zip", declared=32 * MIB, zeros=32 * MIB)
    report = scan_tree(path)
    assert report.has_danger
    assert by_rule(report.uncovered_dangers(), "CPL-ARC-002")


# -- many strings ----------------------------------------------------------------------


@pytest.mark.slow
def test_100000_long_strings_complete_with_a_bounded_report(tmp_path: Path) -> None:
    # Every string is long enough for the entropy and blob checks and the
    # indicator match, and none holds anything to report.
    filler = "the quick brown fox jumps over the lazy dog, then naps"
    lines = ["DATA = ["]
    lines += [f'    "{i:06d} {filler} {i:06d}",' for i in range(100_000)]
    lines.append("]")
    (tmp_path / "plugin.py").write_text("\n".join(lines) + "\n")
    report = scan_tree(tmp_path, max_file_bytes=32 * MIB)
    assert report.files_scanned == report.files_parsed == 1
    assert report.bytes_scanned > 7 * MIB
    assert report.findings == ()
