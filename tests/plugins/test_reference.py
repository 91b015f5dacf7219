"""The reference plugins as shipped: scanned and audited clean, typed, linted, packaged."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from caplet._cli._app import app
from tests.plugins.conftest import REFERENCE, REPO, install

NAMES = ("fetch", "fs-read", "fs-write")
runner = CliRunner()


def _run(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_the_folder_holds_exactly_the_reference_plugins() -> None:
    assert sorted(p.name for p in REFERENCE.iterdir() if p.is_dir()) == sorted(NAMES)
    for name in NAMES:
        assert (REFERENCE / name / "README.md").is_file()
        assert (REFERENCE / name / "plugin.toml").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_the_scan_finds_nothing_above_info(name: str) -> None:
    document = _run("scan", str(REFERENCE / name))
    assert document["ok"] is True
    assert document["mode"] == "plugin"
    assert {f["severity"] for f in document["findings"]} <= {"info"}, document["findings"]


@pytest.mark.parametrize("name", NAMES)
def test_the_static_audit_is_low_risk(name: str, plugins_dir: Path, state_dir: Path) -> None:
    install(plugins_dir, *NAMES)
    document = _run("audit", name, "--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir))
    audit = document["audit"]
    assert (audit["provider"], audit["risk_level"]) == ("static-only", "LOW")
    assert audit["verdict"] == "approve"


def test_the_path_jail_is_the_same_file_in_both_file_plugins() -> None:
    read = (REFERENCE / "fs-read" / "pathjail.py").read_bytes()
    assert (REFERENCE / "fs-write" / "pathjail.py").read_bytes() == read


@pytest.mark.parametrize("path", sorted(REFERENCE.rglob("*.py")), ids=lambda p: p.parent.name)
def test_plugin_code_imports_only_the_stdlib_caplet_plugin_and_its_own_files(path: Path) -> None:
    local = {p.stem for p in path.parent.glob("*.py")}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            assert node.module is not None
            imported.add(node.module)
    outside = {
        name
        for name in imported
        if name.split(".")[0] not in sys.stdlib_module_names
        and name not in local
        and name != "caplet.plugin"
    }
    assert not outside, f"{path} imports {sorted(outside)}"


def test_the_wheel_ships_the_reference_plugins() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    included = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert included["plugins"] == "caplet/_plugins"


@pytest.mark.lint
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_mypy_strict(name: str) -> None:
    # One run per plugin: every plugin has a module called 'plugin'. A cache
    # of their own: tests/test_lint.py's mypy may run at the same time on
    # another worker (pytest-xdist), and mypy's cache is one SQLite database
    # a second writer waits on, then gives up ("database is locked").
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            ".mypy_cache/reference-plugins",
            f"plugins/{name}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.lint
def test_ruff_check_and_format() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    for command in ([ruff, "check", "plugins"], [ruff, "format", "--check", "plugins"]):
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
