"""``caplet exec``: guest code from the command line, in a real sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._sandbox._jail import DISABLE_LAYERS_ENV

runner = CliRunner()


@pytest.fixture
def cli(examples_copy: Path, state_dir: Path) -> list[str]:
    return ["--plugins-dir", str(examples_copy), "--state-dir", str(state_dir)]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "todo.md").write_text("- write tests\n", encoding="utf-8")
    return root


def _json(args: list[str], code: int, stdin: str | None = None) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"], input=stdin)
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_exec_enables_plugins_and_prints_output_and_value(cli: list[str], notes: Path) -> None:
    code = "import host.files as files\nprint(files.list_dir('.'))\nfiles.read_text('todo.md')"
    result = runner.invoke(
        app, ["exec", "--enable", "fs-read", f"root={notes}", "--yes", code, *cli]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "['todo.md']\n'- write tests\\n'\n"
    # stderr holds only what the person consented to (fs-read is not approved): the
    # guest wrote nothing there.
    assert result.stderr.startswith("Consent needed: plugin 'fs-read' is not approved")
    assert "Audit report: fs-read" in result.stderr
    assert result.stderr.endswith("consent for fs-read given by --yes (this process only)\n")


def test_exec_json_document(cli: list[str], notes: Path) -> None:
    document = _json(
        ["exec", *cli, "-y", "--enable", "fs-read", f"root={notes}", "print('hi')\n[1, (2, 3)]"],
        0,
    )
    assert document == {
        "ok": True,
        "status": "ok",
        "stdout": "hi\n",
        "stderr": "",
        "value": [1, [2, 3]],
        "repr": "[1, (2, 3)]",
        "error": None,
        "error_type": None,
        "truncated": False,
    }


def test_exec_reads_the_snippet_from_stdin(cli: list[str]) -> None:
    result = runner.invoke(app, ["exec", "-", *cli], input="import sys\nsys.version_info[0]\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == "3\n"


def test_a_guest_error_exits_1_with_the_guests_traceback(cli: list[str]) -> None:
    result = runner.invoke(app, ["exec", "x = 1\nx.missing", *cli])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        '  File "<guest>", line 2, in <module>\n'
        "    x.missing\n"
        "AttributeError: 'int' object has no attribute 'missing'\n"
    )


def test_a_module_that_is_not_enabled_exits_1(cli: list[str]) -> None:
    document = _json(["exec", "import host.files", *cli], 1)
    assert document["status"] == "error"
    assert document["error_type"] == "ModuleNotFoundError"
    assert "plugin 'fs-read' declares it but is not enabled" in document["error"]
    assert "caplet exec --enable fs-read" in document["error"]


def test_a_timeout_exits_1(cli: list[str]) -> None:
    document = _json(["exec", "--timeout", "0.5", "while True: pass", *cli], 1)
    assert (document["status"], document["error_type"]) == ("timeout", "TimeoutError")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "missing CODE"),
        (["--enable"], "--enable needs a plugin name"),
        (["--bogus", "1"], "unknown option '--bogus'"),
        (["1", "2"], "expected one CODE argument, got 2"),
        (["--timeout", "0", "1"], "timeout must be a positive number of seconds"),
    ],
)
def test_usage_errors_exit_2(cli: list[str], args: list[str], message: str) -> None:
    document = _json(["exec", *args, *cli], 2)
    assert message in document["error"]["message"]


def test_a_refused_enable_exits_1_before_any_code_runs(cli: list[str]) -> None:
    document = _json(["exec", "--enable", "shell-out", "print('ran')", *cli], 1)
    assert "danger finding" in document["reason"]


def test_a_sandbox_that_cannot_start_exits_3(
    cli: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_LAYERS_ENV, "seccomp")
    document = _json(["exec", "1 + 1", *cli], 3)
    assert document["error"]["type"] == "WorkerStartError"
    assert "isolation 'strict' needs the seccomp layer" in document["error"]["message"]
