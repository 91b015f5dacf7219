"""steer37: what a person is shown before deciding, attacked again.

Two things the decision screens left to the plugin or left out:

* the grant's lines (``it will be granted:``, ``which reaches:``, ``by default:``,
  ``runs:``) and the audit report's lines quote the plugin's capabilities, and were
  printed for rich (or, written whole, the terminal) to wrap at column 0: a capability
  holding blanks chose the line under the grant, the last one above the question
  (attack34 indented the agent text alone);
* what reviewed an approval (steer33, steer35) decides whether it carries over to the
  next version, and neither ``caplet list --json``, ``caplet info`` nor the top level of
  ``caplet info --json`` said which review it was.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from caplet import PluginHost
from caplet._cli._app import app
from caplet._cli._safe import ENTRY_MARGIN
from caplet._cli._shell import Shell
from tests._audit.llm_server import LLMServer, honest, serve
from tests._cli.test_shell import Script, Session
from tests.conftest import PluginFactory

runner = CliRunner()

#: A folder name ending in caplet's own words: 'fs.read:/srv/notes/nnn... it will be
#: granted: none' is one capability (quoted: it holds blanks), and on an 80-column screen
#: its last word wrapped to column 0, the last line above the question.
CAPABILITY = "fs.read:/srv/notes/" + "n" * 40 + " it will be granted: none"
SOURCE = "def create_functions(config):\n    return {'notes': {'read': lambda: ''}}\n"
MANIFEST = (
    'name = "notes"\nversion = "1.0.0"\ndescription = "Reads notes."\n'
    f"capabilities = [{json.dumps(CAPABILITY)}]\n\n"
    '[modules.notes]\nfunctions = ["read"]\n'
)
WIDTH = 80


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _assert_the_capability_wraps_inside(output: str) -> None:
    """Every line fits the screen, and no wrapped piece of the capability starts where
    caplet's labels do; the capability is all there, in order."""
    lines = output.splitlines()
    tails = [line for line in lines if line.strip() in {"none'", "granted: none'"}]
    assert tails, output
    assert all(_indent(line) >= ENTRY_MARGIN for line in tails), tails
    wide = [line for line in lines if len(line) > WIDTH]
    assert not wide, wide
    joined = " ".join(line.strip() for line in lines)
    assert f"it will be granted:    {CAPABILITY!r}" in joined or (
        f"it will be granted: {CAPABILITY!r}" in joined
    ), joined


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    plugin = tmp_path / "plugins" / "notes"
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / "plugin.py").write_text(SOURCE, encoding="utf-8")
    (plugin / "plugin.toml").write_text(MANIFEST, encoding="utf-8")
    dirs = ["--plugins-dir", str(tmp_path / "plugins"), "--state-dir", str(tmp_path / "state")]
    return subprocess.run(
        [sys.executable, "-m", "caplet", *args, *dirs],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": str(WIDTH), "NO_COLOR": "1"},
    )


@pytest.mark.security
def test_a_capability_never_wraps_to_where_caplets_lines_start(tmp_path: Path) -> None:
    ran = _cli(tmp_path, "approve", "notes", "--yes")
    assert ran.returncode == 0, ran.stderr
    _assert_the_capability_wraps_inside(ran.stdout)


@pytest.mark.security
def test_the_consent_screens_grant_wraps_inside_too(tmp_path: Path) -> None:
    """`caplet enable` without --yes shows the consent screen and asks for it; no worker
    starts."""
    ran = _cli(tmp_path, "enable", "notes")
    assert ran.returncode == 2, ran.stderr
    assert "Consent needed" in ran.stderr
    _assert_the_capability_wraps_inside(ran.stderr)


@pytest.mark.security
def test_the_shells_approve_wraps_a_capability_inside_its_line(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    """The shell wrote each line whole (soft wrap), for the terminal to wrap at column 0."""
    make_plugin("notes", manifest=MANIFEST, source=SOURCE)
    out, err = io.StringIO(), io.StringIO()
    with PluginHost(plugins_dir, state_dir=state_dir) as host:
        script = Script("/plugin approve notes", "y")
        shell = Shell(
            host,
            script,
            Console(file=out, width=WIDTH, color_system=None, highlight=False),
            err=Console(file=err, width=WIDTH, color_system=None, highlight=False),
            interactive=True,
        )
        Session(shell, script, out, err).run()
        assert host.is_approved("notes")
    shown = out.getvalue()
    start = shown.index("capabilities: ")
    grant = shown[start : shown.index("approved: ", start)]
    assert all(len(line) <= WIDTH for line in grant.splitlines()), grant
    rest = grant.splitlines()[1:]
    assert rest, grant
    assert all(_indent(line) >= ENTRY_MARGIN for line in rest), grant


def test_near_miss_a_short_grant_is_one_line_as_before(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.py").write_text(SOURCE, encoding="utf-8")
    (plugin / "plugin.toml").write_text(
        MANIFEST.replace(json.dumps(CAPABILITY), json.dumps("fs.read:/srv/notes")),
        encoding="utf-8",
    )
    dirs = ["--plugins-dir", str(tmp_path / "plugins"), "--state-dir", str(tmp_path / "state")]
    ran = subprocess.run(
        [sys.executable, "-m", "caplet", "approve", "notes", "--yes", *dirs],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": str(WIDTH), "NO_COLOR": "1"},
    )
    assert ran.returncode == 0, ran.stderr
    assert "  it will be granted:    fs.read:/srv/notes\n" in ran.stdout
    assert "  capabilities declared: fs.read:/srv/notes\n" in ran.stdout


# -- what reviewed the approval, shown -----------------------------------------------------


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


@pytest.fixture
def cli(plugins_dir: Path, state_dir: Path) -> list[str]:
    return ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _text(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.exit_code, result.output)
    return result.output


@pytest.mark.security
def test_the_review_an_approval_was_given_on_is_shown(
    make_plugin: PluginFactory,
    cli: list[str],
    llm: LLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An approval given on a model's audit carries over only on that model at that
    server's audit (steer33, steer35): the documents an operator or a script reads to
    decide name it."""
    make_plugin("notes", source=SOURCE)
    monkeypatch.setenv("CAPLET_LLM_PROVIDER", "openai")
    monkeypatch.setenv("CAPLET_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("CAPLET_LLM_MODEL", "scripted-model")
    llm.script(honest())
    approved = _json("approve", "notes", "--yes", *cli)
    review = f"openai:scripted-model at {llm.url}"
    assert approved["approval"]["review"] == review
    [listed] = _json("list", *cli)["plugins"]
    assert listed["approved"] is True
    assert listed["review"] == review
    assert _json("info", "notes", *cli)["review"] == review
    assert f"  approved:  yes, on {review}'s audit\n" in _text("info", "notes", *cli)


@pytest.mark.security
def test_a_static_approval_says_no_model_read_it(
    make_plugin: PluginFactory, cli: list[str]
) -> None:
    make_plugin("notes", source=SOURCE)
    _json("approve", "notes", "--yes", *cli)
    [listed] = _json("list", *cli)["plugins"]
    assert (listed["approved"], listed["review"]) == (True, "static-only")
    shown = _text("info", "notes", *cli)
    assert "  approved:  yes, on a static-only audit (no model read it)\n" in shown


def test_near_miss_a_plugin_nobody_approved_says_no(
    make_plugin: PluginFactory, cli: list[str]
) -> None:
    make_plugin("notes", source=SOURCE)
    [listed] = _json("list", *cli)["plugins"]
    assert listed["approved"] is False
    assert listed.get("review") is None
    assert "  approved:  no\n" in _text("info", "notes", *cli)
