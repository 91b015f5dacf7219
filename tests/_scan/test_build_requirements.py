"""Build requirements fetched from a direct URL (caplet._scan._build_requirements).

The attack is tune sample b16-dr-build-requires-url: ``[build-system] requires`` holds
``wheel-helpers @ https://...tar.gz``, which pip fetches, builds and runs before it
builds the package (clean on main, recall17); a VCS URL is the same. The near misses:
requirements by name and version, a local path, a direct URL under ``[project]``
(metadata, not the build), a ``pyproject.toml`` deeper than pip reads, and one that is
not TOML.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from tests._scan.archivekit import make_tar, tar_file
from tests._scan.scankit import package_danger, write_tree

SAMPLE = Path(__file__).resolve().parents[2] / "benchmarks/malware/tune/b16-dr-build-requires-url"


def _pyproject(requires: str) -> str:
    return (
        f'[build-system]\nrequires = {requires}\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "demo"\nversion = "1.0"\n'
    )


@pytest.mark.parametrize(
    "requires",
    [
        '["setuptools>=61", "helper @ https://files.example/helper-1.0.tar.gz"]',
        '["setuptools", "helper@git+https://github.com/someone/helper@v1"]',
        '["https://198.51.100.9/helper-1.0-py3-none-any.whl"]',
        "[\"helper @ https://h.example/h.zip ; python_version >= '3.8'\"]",
    ],
)
def test_a_build_requirement_from_a_url_is_a_second_stage(tmp_path: Path, requires: str) -> None:
    write_tree(tmp_path, {"pyproject.toml": _pyproject(requires), "demo.py": "x = 1\n"})
    assert ("CPL-THR-019", "pyproject.toml") in package_danger(tmp_path)
    plugin = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    assert any(
        f.rule_id == "CPL-THR-019" and f.severity is Severity.DANGER for f in plugin.findings
    )


def test_the_sample_is_found_in_its_tree_and_its_sdist(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(SAMPLE, tree)
    assert ("CPL-THR-019", "pyproject.toml") in package_danger(tree)
    text = (SAMPLE / "pyproject.toml").read_bytes()
    sdist = make_tar(
        tmp_path / "pdfsplit-tools-0.3.0.tar.gz",
        [
            tar_file("pdfsplit-tools-0.3.0/pyproject.toml", text),
            tar_file("pdfsplit-tools-0.3.0/pdfsplit_tools/__init__.py", b"x = 1\n"),
        ],
    )
    report = scan_tree(sdist, mode=ScanMode.PACKAGE)
    found = next(f for f in report.findings if f.rule_id == "CPL-THR-019")
    assert found.severity is Severity.DANGER
    assert found.line == 2
    assert "wheel-helpers @ https://files.wheelhelp.example" in found.message


@pytest.mark.parametrize(
    "files",
    [
        {
            "pyproject.toml": _pyproject(
                '["setuptools>=61", "wheel", "Cython>=3.0; python_version>=\'3.8\'"]'
            )
        },
        {"pyproject.toml": _pyproject('["helper @ file:///opt/wheels/helper-1.0.tar.gz"]')},
        {
            "pyproject.toml": _pyproject('["setuptools"]')
            + 'dependencies = ["dep @ git+https://github.com/someone/dep"]\n'
        },
        {"tools/vendored/lib/pyproject.toml": _pyproject('["x @ https://h.example/x.tar.gz"]')},
        {"pyproject.toml": "[build-system\nrequires = ['x @ https://h.example/x.tar.gz']\n"},
    ],
)
def test_build_requirements_pip_takes_from_the_index_or_never_reads_are_clean(
    tmp_path: Path, files: dict[str, str]
) -> None:
    write_tree(tmp_path, {**files, "demo.py": "x = 1\n"})
    assert not {r for r, _ in package_danger(tmp_path)}


@pytest.mark.parametrize(
    "extra",
    [
        "x = " + "9" * 5_000 + "\n",  # tomllib raised the digit limit's ValueError
        "x = " + "[" * 3_000 + "]" * 3_000 + "\n",  # RecursionError
        ".".join(["a"] * 3_000) + " = 1\n",  # quadratic in tomllib: minutes at 20,000
    ],
    ids=["integer", "nesting", "dotted-key"],
)
def test_a_pyproject_beyond_tomls_bounds_is_too_complex_to_check(
    tmp_path: Path, extra: str
) -> None:
    # attack29: the first two raised out of `caplet scan` and `caplet audit` (internal
    # error), the third took 31 s for 20,000 parts; what pip builds with is not known.
    write_tree(
        tmp_path, {"pyproject.toml": _pyproject('["setuptools"]') + extra, "demo.py": "x = 1\n"}
    )
    assert ("CPL-SCAN-002", "pyproject.toml") in package_danger(tmp_path)
    plugin = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    found = [f for f in plugin.findings if f.rule_id == "CPL-SCAN-002"]
    assert found
    assert found[0].severity is Severity.DANGER
    assert "pip reads this file" in found[0].message
