"""The team workflow on the command line: lock, verify, locked mode, update, sign, trust."""

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
from caplet._trust._signing import SIGNATURE_FILE

runner = CliRunner()


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture
def cli(examples_copy: Path, state_dir: Path) -> list[str]:
    return ["--plugins-dir", str(examples_copy), "--state-dir", str(state_dir)]


@pytest.fixture
def lockfile(examples_copy: Path) -> Path:
    return examples_copy.parent / "caplet.lock"


def test_lock_pins_approved_plugins_and_reports_the_rest(cli: list[str], lockfile: Path) -> None:
    run("approve", "hello", "--yes", *cli)
    document = run("lock", "--yes", *cli, code=1)
    assert [e["name"] for e in document["pinned"]] == ["hello"]
    pinned = document["pinned"][0]
    assert pinned["digest"].startswith("sha256-")
    assert pinned["source"] == "directory"
    assert {s["name"] for s in document["skipped"]} == {"fs-read", "shell-out"}
    assert all("is not approved" in s["reason"] for s in document["skipped"])
    assert "[plugins.hello]" in lockfile.read_text()


def test_lock_one_plugin_withholding_a_capability(cli: list[str], lockfile: Path) -> None:
    run("approve", "fs-read", "--yes", *cli)
    document = run("lock", "fs-read", "--withhold", "fs.read:${config.root}", "--yes", *cli)
    assert document["pinned"][0]["capabilities"] == []
    assert "capabilities = []" in lockfile.read_text()


def test_lock_needs_confirmation_without_a_terminal(cli: list[str]) -> None:
    run("approve", "hello", "--yes", *cli)
    result = runner.invoke(app, ["lock", "hello", *cli])
    assert result.exit_code == 2
    assert "pinning plugins needs confirmation; pass --yes" in result.output


def test_lock_of_an_unapproved_plugin_is_refused(cli: list[str]) -> None:
    document = run("lock", "hello", "--yes", *cli, code=1)
    assert "plugin 'hello' is not approved" in document["error"]["message"]


def test_verify_lists_one_problem_per_line_and_passes_when_pinned(
    cli: list[str], examples_copy: Path
) -> None:
    missing = run("verify", *cli, code=1)
    assert "does not exist" in missing["problems"][0]["message"]
    for name in ("hello", "fs-read"):
        run("approve", name, "--yes", *cli)
    run("lock", "--yes", *cli, code=1)
    failing = run("verify", *cli, code=1)
    assert [(p["plugin"], p["kind"]) for p in failing["problems"]] == [("shell-out", "no-entry")]
    human = runner.invoke(app, ["verify", *cli])
    assert human.exit_code == 1
    assert human.stdout.count("✗ ") == 1
    (examples_copy / "shell-out" / "plugin.py").unlink()
    (examples_copy / "shell-out" / "plugin.toml").unlink()
    for leftover in sorted((examples_copy / "shell-out").rglob("*"), reverse=True):
        leftover.unlink() if leftover.is_file() else leftover.rmdir()
    (examples_copy / "shell-out").rmdir()
    assert run("verify", *cli) == {
        "ok": True,
        "lockfile": str(examples_copy.parent / "caplet.lock"),
        "plugins": 2,
        "problems": [],
    }
    (examples_copy / "hello" / "plugin.py").write_text("# tampered\n")
    tampered = run("verify", *cli, code=1)
    assert [p["kind"] for p in tampered["problems"]] == ["digest-mismatch"]


def test_locked_mode_in_ci_refuses_unpinned_plugins(cli: list[str]) -> None:
    env = {"CI": "true"}
    listed = run("list", *cli, env=env)
    assert listed["locked"] is True
    assert {p["state"] for p in listed["plugins"]} == {"inert"}
    refused = run("call", "--enable", "hello", "greet.say", '"x"', *cli, code=1, env=env)
    assert "plugin 'hello' is inert in locked mode" in refused["reason"]
    run("approve", "hello", "--yes", *cli)
    run("lock", "hello", "--yes", *cli)
    called = run("call", "--enable", "hello", "greet.say", '"x"', *cli, env=env)
    assert called["result"] == "Hello, x!"
    unlocked = run(
        "call", "--no-locked", "--enable", "fs-read", "files.list_dir", "--yes", *cli, code=2
    )
    assert "inert" not in json.dumps(unlocked)
    assert "config field 'root' needs a value" in unlocked["error"]["message"]


def test_update_from_a_folder_with_consent(
    cli: list[str], examples_copy: Path, tmp_path: Path
) -> None:
    run("approve", "hello", "--yes", *cli)
    run("lock", "hello", "--yes", *cli)
    new = tmp_path / "new" / "hello"
    import shutil

    shutil.copytree(examples_copy / "hello", new)
    manifest = new / "plugin.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'version = "1.0.0"', 'version = "1.1.0"\ncapabilities = ["env.read:LANG"]'
        )
    )
    refused = run("update", "hello", "--from", str(new), *cli, code=1)
    assert refused["added"] == ["env.read:LANG"]
    assert "needs explicit consent" in refused["reason"]
    done = run("update", "hello", "--from", str(new), "--yes", *cli)
    assert (done["old_version"], done["new_version"]) == ("1.0.0", "1.1.0")
    assert run("verify", *cli, code=1)["problems"][0]["plugin"] != "hello"


def test_keygen_sign_trust_and_the_tier_in_list_and_info(
    cli: list[str], examples_copy: Path, tmp_path: Path, state_dir: Path
) -> None:
    keys = run("keygen", str(tmp_path / "publisher"))
    key_id = keys["key_id"]
    assert (tmp_path / "publisher.key").stat().st_mode & 0o777 == 0o600
    signed = run("sign", "hello", "--key", str(tmp_path / "publisher.key"), *cli)
    assert signed["key_id"] == key_id
    assert (examples_copy / "hello" / SIGNATURE_FILE).is_file()
    info = run("info", "hello", *cli)
    assert (info["tier"], info["signature"]["status"]) == ("community", "untrusted-key")
    added = run("trust", "add", str(tmp_path / "publisher.pub"), "--state-dir", str(state_dir))
    assert added["key_id"] == key_id
    listed = run("trust", "list", "--state-dir", str(state_dir))
    assert [k["key_id"] for k in listed["keys"]] == [key_id]
    plugins = {p["name"]: p for p in run("list", *cli)["plugins"]}
    assert (plugins["hello"]["tier"], plugins["hello"]["signature"]["status"]) == (
        "trusted",
        "valid",
    )
    assert plugins["fs-read"]["tier"] == "community"
    audit = run("audit", "hello", *cli)
    assert audit["tier"] == "trusted"
    run("trust", "remove", key_id, "--state-dir", str(state_dir))
    refused = run("trust", "remove", key_id, "--state-dir", str(state_dir), code=1)
    assert refused["ok"] is False
    bad = run("trust", "add", "not-a-key", "--state-dir", str(state_dir), code=1)
    assert "'not-a-key' is not a minisign public key" in bad["error"]["message"]


def test_minisign_can_verify_what_caplet_sign_wrote(
    cli: list[str], examples_copy: Path, tmp_path: Path
) -> None:
    """The documented check: the signature covers the digest text, as minisign -V sees it."""
    from caplet._trust._signing import parse_public_key, parse_signature, verify_signature

    run("keygen", str(tmp_path / "k"))
    digest = run("sign", "hello", "--key", str(tmp_path / "k.key"), *cli)["digest"]
    key = parse_public_key((tmp_path / "k.pub").read_text())
    signature = parse_signature((examples_copy / "hello" / SIGNATURE_FILE).read_text())
    verify_signature(signature, key, digest.encode("ascii"))
    assert signature.trusted_comment == f"caplet plugin hello 1.0.0 {digest}"


def test_ci_true_end_to_end_as_a_real_process(
    cli: list[str], examples_copy: Path, state_dir: Path
) -> None:
    run("approve", "hello", "--yes", *cli)
    run("lock", "hello", "--yes", *cli)
    env = {**os.environ, "CI": "true"}
    result = subprocess.run(
        [sys.executable, "-m", "caplet", "verify", *cli],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.count("✗ ") == 2, result.stdout
    assert "Traceback" not in result.stderr


# -- issue 14: lock and installed plugins say exactly what is wrong (real processes) -----------


def caplet(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caplet", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "250", **(env or {})},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=120,
    )


def test_verify_checks_the_pinned_version(cli: list[str], lockfile: Path, tmp_path: Path) -> None:
    run("approve", "hello", "--yes", *cli)
    run("lock", "hello", "--yes", *cli)
    text = lockfile.read_text()
    assert 'version = "1.0.0"' in text
    lockfile.write_text(text.replace('version = "1.0.0"', 'version = "0.9.0"'))
    checked = caplet("verify", "--json", *cli, cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    problems = json.loads(checked.stdout)["problems"]
    hello = [p for p in problems if p["plugin"] == "hello"]
    assert [p["kind"] for p in hello] == ["version-mismatch"]
    assert (
        "plugin 'hello', field 'version' says '0.9.0', but its manifest says '1.0.0'"
        in (hello[0]["message"])
    )


WITHHELD_ENV = """
import os

def create_functions(config):
    def run():
        return os.environ["SECRET_TOKEN"]
    return {"main": {"run": run}}
"""


def test_a_withheld_capability_names_the_lock_entry_not_declare(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    (plugins_dir / "env").mkdir(parents=True)
    (plugins_dir / "env" / "plugin.toml").write_text(
        'name = "env"\nversion = "1.0.0"\ndescription = "Reads a token."\n'
        'capabilities = ["env.read:SECRET_TOKEN"]\n[modules.main]\nfunctions = ["run"]\n'
    )
    (plugins_dir / "env" / "plugin.py").write_text(WITHHELD_ENV)
    cli = ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]
    assert caplet("approve", "env", "--yes", *cli, cwd=tmp_path).returncode == 0
    locked = caplet(
        "lock", "env", "--withhold", "env.read:SECRET_TOKEN", "--yes", *cli, cwd=tmp_path
    )
    assert locked.returncode == 0, locked.stderr
    ci_state = ["--plugins-dir", str(plugins_dir), "--state-dir", str(tmp_path / "ci")]
    called = caplet(
        "call", "--enable", "env", "main.run", *ci_state, cwd=tmp_path, env={"CI": "true"}
    )
    assert called.returncode == 1
    message = " ".join(called.stderr.split())
    assert "CPL-ENV-001 at plugin.py:6 needs env.read:SECRET_TOKEN" in message
    assert "plugin 'env' declares env.read:SECRET_TOKEN, but its entry in the lock file" in message
    assert "caplet approve env && caplet lock env" in message
    assert "declare env.read" not in message
    assert "Traceback" not in called.stderr


def test_two_distributions_claiming_a_plugin_are_reported_and_neither_loads(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    from tests.conftest import make_distribution

    first, second = tmp_path / "site-a", tmp_path / "site-b"
    make_distribution(first, "hello")
    make_distribution(second, "hello", dist="other-plugins")
    plugins_dir.mkdir(exist_ok=True)
    cli = ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]
    listed = caplet(
        "list", "--json", *cli, cwd=tmp_path, env={"PYTHONPATH": f"{first}{os.pathsep}{second}"}
    )
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert document["plugins"] == []
    errors = [s["error"] for s in document["skipped"]]
    assert len(errors) == 2
    assert all("plugin 'hello' is claimed by 2 installed distributions" in e for e in errors)
    assert all("'acme-plugins'" in e and "'other-plugins'" in e for e in errors)
    assert "shadowed" not in listed.stdout + listed.stderr


def test_an_entry_point_into_another_distributions_folder_is_skipped_with_both_names(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    """Issue 14: the plugin was credited to the distribution that merely claimed it."""
    from tests.conftest import make_distribution

    site = tmp_path / "site"
    folder = make_distribution(site, "hello")
    # A second distribution, no plugin of its own, whose entry point names acme's folder.
    make_distribution(site, "other", dist="evil-plugins", entry_point="acme_plugins:hello")
    cli = ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]
    env = {"PYTHONPATH": str(site)}
    expected = (
        f"distribution 'evil-plugins': entry point 'other' points at {folder}, which belongs "
        "to distribution 'acme-plugins', not to 'evil-plugins'"
    )
    listed = caplet("list", "--json", *cli, cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert [(p["name"], p["source"]["distribution"]) for p in document["plugins"]] == [
        ("hello", "acme-plugins")
    ]
    [skipped] = document["skipped"]
    assert skipped["error"].startswith(expected)
    text = caplet("list", *cli, cwd=tmp_path, env=env)
    assert text.returncode == 0, text.stderr
    assert expected in " ".join((text.stdout + text.stderr).split())
    # verify, against a lock that pins the real hello, names the stray entry point as well.
    for command in (("approve", "hello"), ("lock", "hello")):
        pinned = caplet(*command, "--yes", *cli, cwd=tmp_path, env=env)
        assert pinned.returncode == 0, pinned.stderr
    verified = caplet("verify", "--json", *cli, cwd=tmp_path, env=env)
    assert verified.returncode == 1, verified.stderr
    problems = [p["message"] for p in json.loads(verified.stdout)["problems"]]
    assert len(problems) == 1, problems
    assert expected in problems[0]
