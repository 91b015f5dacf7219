"""`caplet doctor --check-state`: exit 0 when the state is healthy, 3 when it is damaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._trust._sqlite import DB_FILENAME
from tests.conftest import PluginFactory, write_policy

runner = CliRunner()


@pytest.fixture
def cli(make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path) -> list[str]:
    """A plugin approved through the CLI, so there is a database to check."""
    make_plugin("hello")
    options = ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]
    result = runner.invoke(app, ["approve", "hello", "--yes", "--json", *options])
    assert result.exit_code == 0, result.output
    return options


def doctor(*args: str, code: int) -> dict[str, Any]:
    result = runner.invoke(app, ["doctor", "--check-state", "--json", *args])
    assert result.exit_code == code, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_healthy_state_exits_0(cli: list[str], plugins_dir: Path, state_dir: Path) -> None:
    document = doctor(*cli, code=0)
    assert document == {
        "ok": True,
        "state_dir": str(state_dir),
        "database": str(state_dir / DB_FILENAME),
        "lockfile": str(plugins_dir.parent / "caplet.lock"),
        "problems": [],
    }
    text = runner.invoke(app, ["doctor", "--check-state", *cli])
    assert text.exit_code == 0
    assert f"state ok: {state_dir / DB_FILENAME}; lock file" in text.stdout


def test_warnings_are_listed_but_exit_0(cli: list[str], state_dir: Path) -> None:
    leftover = state_dir / ".caplet.db.abcd1234.tmp"
    leftover.write_text("")
    document = doctor(*cli, code=0)
    assert document["ok"] is True
    (problem,) = document["problems"]
    assert problem["kind"] == "temp-file"
    assert problem["damaged"] is False
    assert problem["path"] == str(leftover)
    text = runner.invoke(app, ["doctor", "--check-state", *cli])
    assert text.exit_code == 0
    assert f"! temporary file {leftover}" in text.stdout.replace("\n", " ")
    assert "(1 warning(s))" in text.stdout


def test_damaged_state_exits_3_naming_the_file_and_the_fix(cli: list[str], state_dir: Path) -> None:
    db = state_dir / DB_FILENAME
    db.write_bytes(b"garbage" * 1000)
    document = doctor(*cli, code=3)
    assert document["ok"] is False
    (problem,) = document["problems"]
    assert problem["kind"] == "corrupt"
    assert problem["damaged"] is True
    assert problem["path"] == str(db)
    assert f"state database {db} is corrupt or not a caplet database" in problem["message"]
    assert f"mv {db} {db}.bak" in problem["message"]
    text = runner.invoke(app, ["doctor", "--check-state", *cli])
    assert text.exit_code == 3
    flat = " ".join(text.stdout.split())
    assert f"✗ state database {db} is corrupt" in flat
    assert "state damaged: 1 problem(s); fix them before running plugins" in flat


def test_the_lock_file_option_is_checked(cli: list[str], tmp_path: Path) -> None:
    lockfile = tmp_path / "elsewhere.lock"
    lockfile.write_text("version = 99\n")
    document = doctor(*cli, "--lockfile", str(lockfile), code=3)
    assert document["lockfile"] == str(lockfile)
    (problem,) = document["problems"]
    assert problem["kind"] == "lockfile"
    assert f"lock file {lockfile} has format version 99" in problem["message"]


def test_no_state_yet_is_healthy(tmp_path: Path) -> None:
    state = tmp_path / "nothing-here"
    document = doctor("--state-dir", str(state), "--plugins-dir", str(tmp_path / "p"), code=0)
    assert document["database"] is None
    assert not state.exists()


def test_a_real_process_reports_damage_without_a_traceback(
    cli: list[str], state_dir: Path, tmp_path: Path
) -> None:
    (state_dir / DB_FILENAME).write_bytes(b"garbage" * 1000)
    result = subprocess.run(
        [sys.executable, "-m", "caplet", "doctor", "--check-state", *cli],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "300"},
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert result.returncode == 3
    assert "Traceback" not in result.stdout + result.stderr
    assert f"state database {state_dir / DB_FILENAME} is corrupt" in result.stdout


def test_the_policy_files_store_is_the_one_checked(
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CAPLET_STORE", raising=False)
    shared = tmp_path / "shared-state"
    write_policy(plugins_dir.parent / "caplet.toml", f'store = "sqlite://{shared}"\n')
    make_plugin("hello")
    cli = ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]
    approved = runner.invoke(app, ["approve", "hello", "--yes", "--json", *cli])
    assert approved.exit_code == 0, approved.output
    assert not (state_dir / DB_FILENAME).exists()
    document = doctor(*cli, code=0)
    assert document["database"] == str(shared / DB_FILENAME)
