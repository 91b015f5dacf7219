"""steer31, glob32: what a glob capability grants, said where a person consents to it.

steer31 found every screen showing the glob alone while the kernel layers granted its
whole folder, and said the folder. glob32 grants a glob as the files it matches at
enable, each by itself (a write glob creates no file: tests/_host/test_glob_grants.py):
each screen, ``ConsentRequest`` and the JSON documents now say that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._cli.clikit import caplet
from tests.conftest import give_to_worker

_SECRET = "TOP SECRET KEY"
_READER = """\
def create_functions(config):
    def read(name):
        with open({folder!r} + "/" + name) as handle:
            return handle.read()
    return {{"reports": {{"read": read}}}}
"""


def _workspace(tmp_path: Path, capability: str) -> Path:
    """A plugin granted ``capability`` (``{folder}`` filled in) and a folder holding a CSV
    report and a key beside it; the folder."""
    folder = tmp_path / "data" / "reports"
    folder.mkdir(parents=True)
    (folder / "q1.csv").write_text("a,b\n1,2\n")
    (folder / "secret.key").write_text(_SECRET)
    give_to_worker(tmp_path / "data")
    plugin = tmp_path / "plugins" / "reports"
    plugin.mkdir(parents=True)
    (plugin / "plugin.toml").write_text(
        'name = "reports"\nversion = "1.0.0"\ndescription = "Reads the CSV reports."\n'
        f"capabilities = [{json.dumps(capability.format(folder=folder, data=folder.parent))}]\n\n"
        '[modules.reports]\nfunctions = ["read"]\n'
    )
    (plugin / "plugin.py").write_text(_READER.format(folder=str(folder)))
    return folder


def _state(tmp_path: Path) -> tuple[str, ...]:
    return ("-p", str(tmp_path / "plugins"), "--state-dir", str(tmp_path / "state"))


_HOW = (
    "(each file it matches when the plugin is enabled is granted by itself; files added "
    "later are not seen until it is enabled again; a link, a folder or a file with another "
    "name (a hard link) is left out)"
)


@pytest.mark.security
def test_a_consent_to_a_glob_says_what_it_grants(tmp_path: Path) -> None:
    folder = _workspace(tmp_path, "fs.read:{folder}/*.csv")
    result = caplet(
        "call", "--enable", "reports", "reports.read", '"q1.csv"', "--yes",
        *_state(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "1,2" in result.stdout
    screen = " ".join(result.stderr.split())
    assert f"it will be granted: fs.read:{folder}/*.csv" in screen
    assert (
        f"which reaches: fs.read:{folder}/*.csv -> only the files of {folder} it matches, "
        f"read-only {_HOW}"
    ) in screen
    # What the screen says is what the sandbox does: the key beside them is not read.
    key = caplet(
        "call", "--enable", "reports", "reports.read", '"secret.key"', "--yes",
        *_state(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert key.returncode != 0
    assert _SECRET not in key.stdout + key.stderr


@pytest.mark.security
def test_approving_a_glob_says_what_it_grants(tmp_path: Path) -> None:
    folder = _workspace(tmp_path, "fs.write:{folder}/q[0-9]*.csv")
    result = caplet("approve", "reports", "--yes", *_state(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    screen = " ".join(result.stdout.split())
    assert (
        f"which reaches: fs.write:{folder}/q[0-9]*.csv -> only the files of {folder} it "
        "matches, written in place: it creates, renames and deletes no file (grant the "
        f"folder to create files) {_HOW}"
    ) in screen
    # The line stands with the grant, below the plugin's text, above the question.
    lines = result.stdout.splitlines()
    granted = next(i for i, line in enumerate(lines) if "it will be granted:" in line)
    assert "which reaches:" in lines[granted + 1]


@pytest.mark.security
def test_the_json_documents_carry_what_a_glob_reaches(tmp_path: Path) -> None:
    # steer31's residual: `approve --json` and `info --json` carried the glob alone.
    folder = _workspace(tmp_path, "fs.read:{folder}/*.csv")
    expected = [
        {
            "capability": f"fs.read:{folder}/*.csv",
            "reaches": f"only the files of {folder} it matches, read-only",
            "how": _HOW[1:-1],
        }
    ]
    approved = caplet("approve", "reports", "--yes", "--json", *_state(tmp_path), cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["globs"] == expected
    info = caplet("info", "reports", "--json", *_state(tmp_path), cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["globs"] == expected


@pytest.mark.security
def test_a_glob_in_a_middle_folder_says_the_folder_it_starts_in(tmp_path: Path) -> None:
    folder = _workspace(tmp_path, "fs.read:{data}/*/q1.csv")
    result = caplet(
        "call", "--enable", "reports", "reports.read", '"q1.csv"', "--yes",
        *_state(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "1,2" in result.stdout
    assert (
        f"which reaches: fs.read:{folder.parent}/*/q1.csv -> only the files of "
        f"{folder.parent} it matches, read-only"
    ) in " ".join(result.stderr.split())


@pytest.mark.security
def test_an_update_that_adds_a_glob_says_what_it_adds(tmp_path: Path) -> None:
    # Approved: one report by name. The next version asks for "the CSV reports".
    folder = _workspace(tmp_path, "fs.read:{folder}/q1.csv")
    approved = caplet("approve", "reports", "--yes", *_state(tmp_path), cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    manifest = tmp_path / "plugins" / "reports" / "plugin.toml"
    manifest.write_text(manifest.read_text().replace("q1.csv", "*.csv"))
    result = caplet(
        "call", "--enable", "reports", "reports.read", '"q1.csv"', "--yes",
        *_state(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        f"changed: adds capability fs.read:{folder}/*.csv, which reaches only the files of "
        f"{folder} it matches, read-only"
    ) in " ".join(result.stderr.split())


@pytest.mark.security
def test_a_plain_path_says_nothing_more(tmp_path: Path) -> None:
    # Near miss: a folder named whole reaches what it says; no line is added.
    folder = _workspace(tmp_path, "fs.read:{folder}")
    result = caplet(
        "call", "--enable", "reports", "reports.read", '"q1.csv"', "--yes",
        *_state(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "1,2" in result.stdout
    assert f"it will be granted: fs.read:{folder}" in " ".join(result.stderr.split())
    assert "which reaches" not in result.stderr
    approved = caplet("approve", "reports", "--yes", *_state(tmp_path), cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert "which reaches" not in approved.stdout


@pytest.mark.security
def test_a_templated_default_that_is_a_glob_says_what_it_grants(tmp_path: Path) -> None:
    folder = _workspace(tmp_path, "fs.read:${{config.root}}")
    manifest = tmp_path / "plugins" / "reports" / "plugin.toml"
    manifest.write_text(
        manifest.read_text()
        + f'\n[config.root]\ntype = "string"\ndefault = {json.dumps(f"{folder}/*.csv")}\n'
    )
    result = caplet("approve", "reports", "--yes", *_state(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (
        f"by default: fs.read:${{config.root}} -> {folder}/*.csv, which reaches only the "
        f"files of {folder} it matches, read-only {_HOW}"
    ) in " ".join(result.stdout.split())
