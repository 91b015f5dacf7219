"""A command imports only what it needs: `caplet scan PATH` starts without the host (issue 16).

Issue 16 gives `caplet scan` 150 ms of CPU to start; most of the 480 ms it
took went to importing every command module, and with them the host, the
sandbox, the trust store and pydantic. The root group now imports a
command's module when the command is looked up
(caplet._cli._command.COMMAND_MODULES). These tests check what is
imported, never how long it takes: a module that is imported is a cost on
every machine, a timing is a flaky test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._cli._command import COMMAND_MODULES, load_commands

#: What `caplet scan PATH --json` must not import. Measured with
#: `python -X importtime -m caplet scan EMPTY --json` before the change: these
#: were most of its 480 ms of CPU, and the scan needs none of them.
HEAVY = (
    "pydantic",
    "pydantic_core",
    "caplet._host._host",
    "caplet._host._manager",
    "caplet._host._policy",
    "caplet._host._policy_file",
    "caplet._host._hooks",
    "caplet._host._records",
    "caplet._sandbox",
    "caplet._broker",
    "caplet._trust",
    "caplet._audit",
    "caplet._selftest",
    "caplet._manifest._load",
    "caplet._manifest._model",
    "caplet._cli._cmd_plugins",
    "caplet._cli._cmd_run",
    "caplet._cli._cmd_lock",
    "caplet._cli._cmd_state",
    "caplet._cli._cmd_trust",
    "caplet._cli._cmd_selftest",
    "caplet._cli._cmd_policy",
    "caplet._scan._fetch",
    "caplet._scan._sarif",
    # the canaries: a self-check remembered for this code does not rebuild them
    "caplet._scan._examples",
    "multiprocessing",
    "concurrent.futures",
    "sqlite3",
    "httpx",
    "platformdirs",
    "packaging",
    "jsonschema",
    "cryptography",
    "msgpack",
    "rich.progress",
    "rich.table",
    # the archive readers and setup.cfg's parser: imported by the first archive,
    # zip-like data file or setup.cfg the scan meets
    "tarfile",
    "zipfile",
    "configparser",
    "caplet._scan._archive_tar",
    "caplet._scan._archive_zip",
)


def _modules_of(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -m caplet ARGS`` and return what it had imported when it exited."""
    listing = cwd / "modules.json"
    code = (
        "import atexit, json, runpy, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write("
        "json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['caplet', *{args!r}]\n"
        "runpy.run_module('caplet', run_name='__main__', alter_sys=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=False
    )
    return result, set(json.loads(listing.read_text(encoding="utf-8")))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))


def test_scan_of_a_path_imports_none_of_the_heavy_modules(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    target = tmp_path / "pkg"
    target.mkdir()
    (target / "mod.py").write_text("import os\nos.system('id')\n", encoding="utf-8")
    # The first scan of this home replays the canaries (and builds them: some are
    # sdists, read by the archive readers) ...
    result, modules = _modules_of(["scan", str(empty), "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "caplet._scan._examples" in _heavy(modules)
    assert not {"multiprocessing", "pydantic", "sqlite3", "httpx"} & modules
    # ... later ones find the pass remembered for this code.
    for args in (
        ["scan", str(empty), "--json"],
        ["scan", str(target), "--json", "--fail-on", "never"],
        ["scan", str(target), "--fail-on", "never"],  # the table for people
    ):
        result, modules = _modules_of(args, tmp_path)
        assert result.returncode == 0, result.stderr
        assert "caplet._scan._scanner" in modules  # it did scan, in this process
        assert _heavy(modules) == [], args


def test_other_commands_still_import_what_they_need(tmp_path: Path) -> None:
    result, modules = _modules_of(["list", "--plugins-dir", str(tmp_path), "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "caplet._host._host" in modules
    assert "caplet._cli._cmd_plugins" in modules
    assert "caplet._cli._cmd_run" not in modules


def test_the_table_names_every_command_and_the_module_registering_it() -> None:
    load_commands()
    found: dict[str, set[str]] = {}
    for info in app.registered_commands:
        assert info.name is not None
        assert info.callback is not None
        found.setdefault(info.name, set()).add(info.callback.__module__)
    for group in app.registered_groups:
        assert group.typer_instance is not None
        name = group.typer_instance.info.name
        assert isinstance(name, str)
        for sub in group.typer_instance.registered_commands:
            assert sub.callback is not None
            found.setdefault(name, set()).add(sub.callback.__module__)
    assert found == {name: {f"caplet._cli.{module}"} for name, module in COMMAND_MODULES.items()}


def test_help_lists_every_command_in_the_table_order(tmp_path: Path) -> None:
    # In a fresh process: nothing loaded before --help asks for the list.
    result = subprocess.run(
        [sys.executable, "-m", "caplet", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        cwd=tmp_path,
        check=True,
    )
    listed = [
        line.split()[1]
        for line in result.stdout.splitlines()
        if line.startswith("│ ") and line.split()[1] in COMMAND_MODULES
    ]
    assert listed == list(COMMAND_MODULES)


def test_a_command_is_built_once_its_module_is_loaded() -> None:
    group = typer.main.get_command(app)
    context = group.make_context("caplet", ["--help"], resilient_parsing=True)
    for name in COMMAND_MODULES:
        built = group.get_command(context, name)  # type: ignore[attr-defined]
        assert built is not None
        assert built.name == name
    assert group.get_command(context, "no-such-command") is None  # type: ignore[attr-defined]


def test_a_mistyped_command_is_still_suggested() -> None:
    result = CliRunner().invoke(app, ["scna", "."])
    assert result.exit_code == 2
    assert "No such command 'scna'. Did you mean 'scan'?" in result.output


#: A file the prefilter sends to the AST pass, where a threat rule fires.
_THREAT = "import base64\nexec(base64.b64decode('cHJpbnQoMSk='))\n"

#: The AST pass's modules: loaded at the first file the prefilter sends to it.
AST_PASS = ("caplet._scan._visitor", "caplet._scan._flow", "caplet._scan._computed_strings")


def _remembered_self_check(tmp_path: Path) -> None:
    """Run one scan so that this home remembers the self-check's pass: its replay
    parses every canary (and so loads the AST pass), which later scans skip."""
    empty = tmp_path / "warm"
    empty.mkdir()
    result, _ = _modules_of(["scan", str(empty), "--json"], tmp_path)
    assert result.returncode == 0, result.stderr


def test_a_json_scan_never_imports_rich(tmp_path: Path) -> None:
    _remembered_self_check(tmp_path)
    target = tmp_path / "pkg"
    target.mkdir()
    (target / "run.py").write_text(_THREAT, encoding="utf-8")
    result, modules = _modules_of(["scan", str(target), "--json", "--fail-on", "never"], tmp_path)
    assert result.returncode == 0, result.stderr
    findings = json.loads(result.stdout)["findings"]
    found = {f["rule_id"] for f in findings if f["severity"] == "danger"}
    assert found
    assert sorted(m for m in modules if m == "rich" or m.startswith("rich.")) == []
    # The same scan for people draws its table with rich (the test can fail).
    result, modules = _modules_of(["scan", str(target), "--fail-on", "never"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert all(rule in result.stdout for rule in found)
    assert "rich.console" in modules


def test_an_error_is_still_shown_escaped_without_json(tmp_path: Path) -> None:
    # Out's consoles are made at first use: the error of a run for people still has one.
    missing = tmp_path / "missing\x1b[31m"
    result, modules = _modules_of(["scan", str(missing)], tmp_path)
    assert result.returncode == 2
    assert "usage error: cannot scan" in result.stderr
    assert "\x1b" not in result.stderr
    assert "rich.console" in modules
    result, _ = _modules_of(["scan", str(missing), "--json"], tmp_path)
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["type"] == "UsageError"


def test_the_ast_pass_loads_at_the_first_file_that_needs_it(tmp_path: Path) -> None:
    _remembered_self_check(tmp_path)
    plain_tree = tmp_path / "plain"
    plain_tree.mkdir()
    (plain_tree / "calc.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    result, modules = _modules_of(["scan", str(plain_tree), "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["files_scanned"], document["files_parsed"]) == (1, 0)
    assert [m for m in AST_PASS if m in modules] == []
    threat = tmp_path / "threat"
    threat.mkdir()
    (threat / "run.py").write_text(_THREAT, encoding="utf-8")
    result, modules = _modules_of(["scan", str(threat), "--json", "--fail-on", "never"], tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["files_parsed"] == 1
    assert "danger" in {f["severity"] for f in document["findings"]}
    assert [m for m in AST_PASS if m in modules] == list(AST_PASS)
