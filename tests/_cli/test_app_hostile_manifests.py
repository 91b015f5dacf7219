"""One hostile plugin folder beside others: discovery names it and goes on (attack29).

Each manifest below ended ``caplet list`` (and every command that discovers) in an
internal error on f0500b3c, the good plugin beside it never listed: an integer past
``int()``'s digit limit in TOML or JSON (a ``ValueError`` that is no decode error), a
hexadecimal one (parsed, and raised where pydantic showed it), a version or a required
version of 5,000 digits (packaging's ``Version`` raised the same); a lone surrogate in a
JSON manifest was listed, and ``caplet mcp`` answered ``tools/list`` with a traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests._cli.clikit import caplet, document
from tests.conftest import EXAMPLES

_TOML = (
    'name = "{name}"\nversion = "{version}"\ndescription = "d"\n{extra}\n'
    '[modules.m]\nfunctions = ["f"]\n'
)
_DIGITS = "9" * 5_000


def _toml(name: str, extra: str = "", version: str = "1.0.0") -> str:
    return _TOML.format(name=name, version=version, extra=extra)


_HOSTILE = {
    "toml-int": ("plugin.toml", _toml("toml-int", f"[limits]\ntimeout_ms = {_DIGITS}")),
    "toml-hex": ("plugin.toml", _toml("toml-hex", f"[limits]\ntimeout_ms = 0x{'f' * 5_000}")),
    "json-int": ("plugin.json", f'{{"name": "json-int", "version": {_DIGITS}}}'),
    "json-surrogate": (
        "plugin.json",
        json.dumps(
            {
                "name": "json-surrogate",
                "version": "1.0.0",
                "description": "PLACEHOLDER",
                "modules": {"m": {"functions": ["f"]}},
            }
        ).replace("PLACEHOLDER", "tool \\ud800"),
    ),
    "long-version": ("plugin.toml", _toml("long-version", version=_DIGITS)),
    "long-requirement": (
        "plugin.toml",
        _toml("long-requirement", f'requires = ["hello>=1.{_DIGITS}"]'),
    ),
}

_WHY = {
    "toml-int": "outside TOML's 64-bit range",
    "toml-hex": "outside TOML's 64-bit range",
    "json-int": "outside the 64-bit range",
    "json-surrogate": "description: 'tool \\ud800' holds a lone surrogate",
    "long-version": "is 5000 characters; a version is at most 64",
    "long-requirement": "a version in it is too long",
}


@pytest.mark.parametrize("name", sorted(_HOSTILE))
def test_a_hostile_manifest_is_skipped_with_its_reason_and_the_others_listed(
    tmp_path: Path, name: str
) -> None:
    plugins = tmp_path / "plugins"
    shutil.copytree(EXAMPLES / "hello", plugins / "hello")
    file_name, text = _HOSTILE[name]
    (plugins / name).mkdir()
    (plugins / name / file_name).write_text(text, encoding="utf-8")
    (plugins / name / "plugin.py").write_text("def create_functions(c):\n    return {}\n")
    result = caplet(
        "list", "--json", "-p", str(plugins), "--state-dir", str(tmp_path / "state"), cwd=tmp_path
    )
    assert "internal error" not in result.stderr
    assert result.returncode == 0, result.stderr
    listed = document(result)
    assert [p["name"] for p in listed["plugins"]] == ["hello"]
    [skipped] = listed["skipped"]
    assert skipped["directory"].endswith(f"plugins/{name}")
    assert f"{name}/{file_name}" in skipped["error"]
    assert _WHY[name] in skipped["error"]


def test_a_policy_value_past_the_digit_limit_is_the_fields_error(tmp_path: Path) -> None:
    # attack29: `--set` parsed VALUE with tomllib, whose int() raised the digit limit's
    # ValueError: an internal error, not the field's message.
    (tmp_path / "plugins").mkdir()
    result = caplet(
        "policy",
        "-p",
        str(tmp_path / "plugins"),
        "--set",
        f"guest.timeout_ms={_DIGITS}",
        cwd=tmp_path,
        env={"CAPLET_STATE_DIR": str(tmp_path / "state")},
    )
    assert "internal error" not in result.stderr
    assert result.returncode == 2, result.stderr
    assert "--set guest.timeout_ms: guest.timeout_ms:" in result.stderr
    assert "expected a whole number (the default is 5000)" in result.stderr


def test_a_capability_that_reads_as_two_is_shown_quoted_where_it_is_approved(
    tmp_path: Path,
) -> None:
    # attack29: "fs.read:/tmp/notes, nothing else" (one capability: a folder of that name)
    # and a default of "/tmp/x (read-only)" behind fs.write read, in the list of what
    # will be granted, as a grant and caplet's remarks beside it.
    plugins = tmp_path / "plugins"
    (plugins / "notes").mkdir(parents=True)
    (plugins / "notes" / "plugin.toml").write_text(
        _toml(
            "notes",
            'capabilities = ["fs.read:/tmp/notes, nothing else", "fs.write:${config.root}"]\n'
            '[config.root]\ntype = "string"\ndefault = "/tmp/x (read-only)"\n',
        ),
        encoding="utf-8",
    )
    (plugins / "notes" / "plugin.py").write_text("def create_functions(c):\n    return {}\n")
    result = caplet(
        "approve", "notes", "-p", str(plugins), "--state-dir", str(tmp_path / "s"), cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr  # no terminal: asked for --yes
    shown = result.stdout + result.stderr
    assert (
        "it will be granted:    'fs.read:/tmp/notes, nothing else', fs.write:${config.root}"
        in shown
    )
    assert "by default:            fs.write:${config.root} -> '/tmp/x (read-only)'" in shown
