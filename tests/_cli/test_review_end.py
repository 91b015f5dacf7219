"""steer22: the question is asked under what it is about, not under the plugin's text.

`caplet approve` asks "Approve NAME with these capabilities?" and the consent screen asks
y/N; each showed the capabilities and then the text the agent reads: up to 40 entries of
hints and descriptions, 240 characters each, all the plugin's. Wrapped at 80 columns that is
more than a hundred lines of harmless-looking advice between the capabilities and the
question, so on a terminal the person answering saw the advice and not the grant.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from caplet._cli._safe import ENTRY_MARGIN

CAPABILITY = "env.read:AWS_SECRET_ACCESS_KEY"
RULE = (
    "Prefer short notes; keep each note under one screen, with a title line, the date and "
    "a list of the people it concerns, so that the assistant can summarise it quickly and "
    "link it to the notes before and after it in the same folder, rule {n}."
)


def _write_plugin(plugins_dir: Path, rules: int) -> None:
    plugin = plugins_dir / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.py").write_text(
        "def create_functions(config):\n    return {'notes': {'read': lambda: ''}}\n"
    )
    hints = [RULE.format(n=n) for n in range(rules)]
    (plugin / "plugin.toml").write_text(
        'name = "notes"\nversion = "1.0.0"\ndescription = "Reads notes."\n'
        f"capabilities = [{json.dumps(CAPABILITY)}]\n\n"
        '[modules.notes]\nfunctions = ["read"]\n\n'
        f"[hints]\ncritical_rules = {json.dumps(hints)}\n"
    )


def _caplet(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "caplet",
            *args,
            "--plugins-dir",
            str(tmp_path / "plugins"),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def _after_the_plugins_text(shown: str) -> list[str]:
    """The lines of a review after the last line of the plugin's agent text."""
    lines = shown.splitlines()
    last = max(i for i, line in enumerate(lines) if "hints.critical_rules" in line)
    return lines[last + 1 :]


@pytest.mark.security
@pytest.mark.parametrize(
    "command",
    [("approve", "notes", "--yes"), ("call", "--enable", "notes", "notes.read", "--yes")],
    ids=["approve", "consent"],
)
def test_the_grant_is_shown_last_before_the_question(tmp_path: Path, command: tuple[str]) -> None:
    _write_plugin(tmp_path / "plugins", rules=40)
    result = _caplet(tmp_path, *command)
    assert result.returncode == 0, result.stderr
    shown = result.stdout if command[0] == "approve" else result.stderr
    after = _after_the_plugins_text(shown)
    assert any(CAPABILITY in line for line in after), shown
    # Nothing of the plugin's comes after it but the outcome.
    assert not any("Prefer short notes" in line for line in after)


@pytest.mark.parametrize(
    "command",
    [("approve", "notes", "--yes"), ("call", "--enable", "notes", "notes.read", "--yes")],
    ids=["approve", "consent"],
)
def test_the_agent_text_is_still_shown_whole(tmp_path: Path, command: tuple[str]) -> None:
    """Near miss: the agent's text is still shown, and whole where a person decides: every
    entry, none counted away (what the approval pins was shown, steer32)."""
    _write_plugin(tmp_path / "plugins", rules=41)
    result = _caplet(tmp_path, *command)
    assert result.returncode == 0, result.stderr
    shown = result.stdout if command[0] == "approve" else result.stderr
    assert shown.count("Prefer short notes") == 41
    assert "not shown here" not in shown


def _write_many(plugins_dir: Path, count: int) -> None:
    """A plugin whose one sensitive capability comes first, before ``count`` paths."""
    plugin = plugins_dir / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.py").write_text(
        "def create_functions(config):\n    return {'notes': {'read': lambda: ''}}\n"
    )
    paths = [f"fs.read:/srv/notes/shelf-{n:03d}" for n in range(count)]
    (plugin / "plugin.toml").write_text(
        'name = "notes"\nversion = "1.0.0"\ndescription = "Reads notes."\n'
        f"capabilities = {json.dumps([CAPABILITY, *paths])}\n\n"
        '[modules.notes]\nfunctions = ["read"]\n'
    )


@pytest.mark.security
@pytest.mark.parametrize(
    "command",
    [("approve", "notes", "--yes"), ("call", "--enable", "notes", "notes.read", "--yes")],
    ids=["approve", "consent"],
)
def test_one_capability_among_hundreds_is_named_on_the_last_line(
    tmp_path: Path, command: tuple[str]
) -> None:
    """steer22: the grant is one line of every capability; three hundred paths wrap to
    about a hundred lines, and the one that reads a secret, written first, scrolled away
    above the question. The last line of the grant now counts them by kind and names the
    kinds that have few."""
    _write_many(tmp_path / "plugins", 300)
    result = _caplet(tmp_path, *command)
    shown = result.stdout if command[0] == "approve" else result.stderr
    # (The enable itself is then refused: the paths do not exist here.)
    assert "approved notes" in shown or "consent for notes given by --yes" in shown, shown
    lines = shown.splitlines()
    last = max(i for i, line in enumerate(lines) if "in all: 301 capabilities" in line)
    summary = " ".join(line.strip() for line in lines[last : last + 3])
    assert (
        f"in all: 301 capabilities: {CAPABILITY}; 300 fs.read (/srv/notes/shelf-000 ...)" in summary
    ), summary


def test_a_few_capabilities_need_no_count(tmp_path: Path) -> None:
    """Near miss: a plugin with a handful of capabilities is shown as before."""
    _write_many(tmp_path / "plugins", 3)
    result = _caplet(tmp_path, "approve", "notes", "--yes")
    assert result.returncode == 0, result.stderr
    assert "in all:" not in result.stdout


def _write_globs(plugins_dir: Path, count: int) -> None:
    """steer32: the secret first, one egress, then ``count`` globs (a line each of what it
    reaches, and a composition warning per read and egress pair)."""
    plugin = plugins_dir / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.py").write_text(
        "def create_functions(config):\n    return {'notes': {'read': lambda: ''}}\n"
    )
    globs = [f"fs.read:/srv/notes/shelf-{n:03d}/*.md" for n in range(count)]
    (plugin / "plugin.toml").write_text(
        'name = "notes"\nversion = "1.0.0"\ndescription = "Reads notes."\n'
        f"capabilities = {json.dumps([CAPABILITY, 'net.http:https://api.example.com', *globs])}"
        '\n\n[modules.notes]\nfunctions = ["read"]\n'
    )


@pytest.mark.security
@pytest.mark.parametrize(
    "command",
    [("approve", "notes", "--yes"), ("call", "--enable", "notes", "notes.read", "--yes")],
    ids=["approve", "consent"],
)
def test_what_each_capability_reaches_never_pushes_the_count_off_the_screen(
    tmp_path: Path, command: tuple[str]
) -> None:
    """steer32: steer22 made the count that names the rare capability the grant's last
    line, and steer31 then printed a line for each glob's folder under it (three lines
    each, wrapped), and the consent screen printed the composition lint there too (a
    warning per read and egress pair). Sixty globs and one origin put about 300 lines
    between `env.read:AWS_SECRET_ACCESS_KEY` and the question. The count is now the last
    thing above it; the folders and the lint are still shown, above the count."""
    _write_globs(tmp_path / "plugins", 60)
    result = _caplet(tmp_path, *command)
    shown = result.stdout if command[0] == "approve" else result.stderr
    lines = shown.splitlines()
    last = max(i for i, line in enumerate(lines) if "in all: 62 capabilities" in line)
    outcome = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(("approved notes", "consent for notes given by --yes"))
    )
    summary = " ".join(line.strip() for line in lines[last:outcome])
    assert f"in all: 62 capabilities: {CAPABILITY}; net.http:https://api.example.com;" in summary
    # Nothing but the count's own wrapped lines between it and the outcome (each indented
    # under it since steer37).
    assert outcome - last <= 4, lines[last:outcome]
    assert all(line.startswith(" " * ENTRY_MARGIN) for line in lines[last + 1 : outcome])
    # Near miss inside: every folder is still said, and the lint still shown, above it.
    above = " ".join(" ".join(lines[:last]).split())
    assert above.count("-> only the files of") == 60
    if command[0] == "call":
        assert "Capability composition" in above


def test_a_few_globs_are_shown_as_before(tmp_path: Path) -> None:
    """Near miss: a plugin with a couple of globs has no count, and each folder is said
    right under the grant, as steer31 left it."""
    _write_globs(tmp_path / "plugins", 2)
    result = _caplet(tmp_path, "approve", "notes", "--yes")
    assert result.returncode == 0, result.stderr
    assert "in all:" not in result.stdout
    assert " ".join(result.stdout.split()).count("-> only the files of") == 2


def _write_one_wide(plugins_dir: Path) -> None:
    """Sixty narrow folders and, in the middle, one glob that reaches all of /srv."""
    plugin = plugins_dir / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.py").write_text(
        "def create_functions(config):\n    return {'notes': {'read': lambda: ''}}\n"
    )
    paths = [f"fs.read:/srv/notes/shelf-{n:03d}" for n in range(60)]
    paths.insert(30, "fs.read:/srv/*/notes.md")
    (plugin / "plugin.toml").write_text(
        'name = "notes"\nversion = "1.0.0"\ndescription = "Reads notes."\n'
        f"capabilities = {json.dumps(paths)}\n\n"
        '[modules.notes]\nfunctions = ["read"]\n'
    )


@pytest.mark.security
@pytest.mark.parametrize(
    "command",
    [("approve", "notes", "--yes"), ("call", "--enable", "notes", "notes.read", "--yes")],
    ids=["approve", "consent"],
)
def test_the_count_names_the_widest_folder_not_the_first(
    tmp_path: Path, command: tuple[str]
) -> None:
    """steer32: the count named a counted kind by its first capability, "61 fs.read
    (/srv/notes/shelf-000 ...)", and the glob in the middle that reaches all of /srv was
    one line among sixty above it. The count names the one that reaches furthest."""
    _write_one_wide(tmp_path / "plugins")
    result = _caplet(tmp_path, *command)
    shown = result.stdout if command[0] == "approve" else result.stderr
    lines = shown.splitlines()
    last = max(i for i, line in enumerate(lines) if "in all: 61 capabilities" in line)
    summary = " ".join(line.strip() for line in lines[last : last + 3])
    assert (
        "in all: 61 capabilities: 61 fs.read (widest: /srv/*/notes.md, which reaches only "
        "the files of /srv it matches, read-only ...)" in summary
    ), summary


def test_a_count_whose_first_is_the_widest_reads_as_before(tmp_path: Path) -> None:
    """Near miss: sixty sibling folders are named by the first, as steer22 showed them."""
    _write_many(tmp_path / "plugins", 60)
    result = _caplet(tmp_path, "approve", "notes", "--yes")
    assert result.returncode == 0, result.stderr
    summary = " ".join(result.stdout.split())
    assert f"in all: 61 capabilities: {CAPABILITY}; 60 fs.read (/srv/notes/shelf-000 ...)" in (
        summary
    )
