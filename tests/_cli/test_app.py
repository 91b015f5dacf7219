"""The CLI through --json (in-process with typer's runner) and as a real subprocess."""

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
from tests.conftest import PluginFactory

runner = CliRunner()


def run(*args: str, code: int = 0) -> dict[str, Any]:
    """Invoke the CLI with --json; assert the exit code; return the JSON document."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture
def cli(examples_copy: Path, state_dir: Path) -> list[str]:
    """Common options pointing at a private copy of the examples."""
    return ["--plugins-dir", str(examples_copy), "--state-dir", str(state_dir)]


def test_list(cli: list[str]) -> None:
    document = run("list", *cli)
    names = [p["name"] for p in document["plugins"]]
    assert names == ["fs-read", "hello", "shell-out"]
    assert all(p["state"] == "discovered" and not p["approved"] for p in document["plugins"])


def test_list_reports_skipped_plugins(
    tmp_path: Path, make_plugin: PluginFactory, plugins_dir: Path
) -> None:
    make_plugin("good")
    make_plugin("bad", manifest="name = 3\n")
    document = run("list", "--plugins-dir", str(plugins_dir), "--state-dir", str(tmp_path / "s"))
    assert [p["name"] for p in document["plugins"]] == ["good"]
    assert document["skipped"][0]["directory"].endswith("bad")


def test_info_shows_capabilities_config_and_isolation(cli: list[str]) -> None:
    document = run("info", "fs-read", *cli)
    assert document["capabilities"] == ["fs.read:${config.root}"]
    assert [f["name"] for f in document["config_schema"]] == ["root", "max_kb"]
    assert document["modules"] == {"files": ["read_text", "list_dir"]}
    assert document["isolation"] == "sandbox: namespaces, rlimits, landlock, seccomp, cgroup"


def test_scan_of_a_plugin_and_of_a_path(cli: list[str], examples_copy: Path) -> None:
    clean = run("scan", "hello", *cli)
    assert clean["ok"] is True
    dangerous = run("scan", str(examples_copy / "shell-out"), *cli, code=1)
    assert any(
        f["severity"] == "danger" and f["file"] == "plugin.py" for f in dangerous["findings"]
    )
    tolerated = run("scan", str(examples_copy / "shell-out"), "--fail-on", "never", *cli)
    assert tolerated["ok"] is True
    assert tolerated["findings"] == dangerous["findings"]


def test_audit_is_static_only_and_labelled(cli: list[str]) -> None:
    document = run("audit", "hello", *cli)
    assert document["audit"]["provider"] == "static-only"
    assert document["audit"]["risk_level"] == "LOW"
    rejected = run("audit", "shell-out", *cli, code=1)
    assert rejected["audit"]["verdict"] == "reject"


def test_approve_and_unapprove(cli: list[str]) -> None:
    approved = run("approve", "hello", "--yes", *cli)
    assert approved["approval"]["name"] == "hello"
    assert run("list", *cli)["plugins"][1]["approved"] is True
    run("unapprove", "hello", *cli)
    refused = run("unapprove", "hello", *cli, code=1)
    assert "is not approved" in refused["reason"]


def test_approve_without_yes_and_without_a_terminal_is_a_usage_error(cli: list[str]) -> None:
    result = runner.invoke(app, ["approve", "hello", *cli])
    assert result.exit_code == 2
    assert "pass --yes" in result.output


def test_approve_refuses_a_dangerous_plugin(cli: list[str]) -> None:
    document = run("approve", "shell-out", "--yes", *cli, code=1)
    assert "danger finding" in document["reason"]


def test_enable_validates_config(cli: list[str], tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    document = run("enable", "fs-read", f"root={notes}", "--yes", *cli)
    assert document["plugin"]["state"] == "enabled"
    assert document["plugin"]["capabilities"] == [f"fs.read:{notes}"]
    # A value the operator must give is a usage error (README: exit 2), as a bad one is.
    missing = run("enable", "fs-read", "--yes", *cli, code=2)
    assert "root" in missing["error"]["message"]
    bad = run("enable", "fs-read", f"root={notes}", "max_kb=lots", "--yes", *cli, code=2)
    assert bad["error"] == {
        "type": "ConfigError",
        "message": "plugin 'fs-read': config field 'max_kb' must be an integer, got 'lots'; "
        "pass a whole number, e.g. max_kb=10",
    }


def test_enable_unknown_config_key_is_a_usage_error(cli: list[str], tmp_path: Path) -> None:
    document = run("enable", "fs-read", f"rot={tmp_path}", *cli, code=2)
    assert "did you mean 'root'" in document["error"]["message"]


def test_disable_in_a_fresh_process_says_why(cli: list[str]) -> None:
    """Issue 15: it could never succeed (enablement lasts for one process): now it says
    there is nothing to disable, and succeeds."""
    document = run("disable", "hello", *cli)
    assert document["enabled"] is False
    assert "is not enabled: enablement lasts for one process" in document["reason"]


def test_call_with_enable(cli: list[str]) -> None:
    document = run(
        "call", "--enable", "hello", "greeting=Hi", "greet.say", '"world"', "--yes", *cli
    )
    assert document["result"] == "Hi, world!"


def test_call_without_enable_explains(cli: list[str]) -> None:
    document = run("call", "hello", "greet.say", '"world"', *cli, code=1)
    assert "caplet call --enable hello" in document["error"]["message"]


def test_call_usage_errors(cli: list[str]) -> None:
    assert (
        "need --enable"
        in run("call", "hello", "greeting=Hi", "greet.say", *cli, code=2)["error"]["message"]
    )
    assert (
        "is not JSON"
        in run("call", "--enable", "hello", "greet.say", "world", *cli, code=2)["error"]["message"]
    )
    assert (
        "missing MODULE.FUNCTION"
        in run("call", "--enable", "hello", *cli, code=2)["error"]["message"]
    )


def test_call_plugin_error_exits_1_with_the_plugins_message(cli: list[str]) -> None:
    document = run("call", "--enable", "hello", "greet.say", '""', "--yes", *cli, code=1)
    assert "name must be a non-empty string" in document["error"]["message"]


def test_unknown_plugin_suggests_and_exits_2(cli: list[str]) -> None:
    document = run("info", "helo", *cli, code=2)
    assert "did you mean 'hello'?" in document["error"]["message"]


def test_unknown_subcommand_suggests_the_closest() -> None:
    result = runner.invoke(app, ["unaprove", "x"])
    assert result.exit_code == 2
    assert "Did you mean 'unapprove'?" in result.output


def test_new_scaffolds_a_plugin_that_enables_and_answers(
    plugins_dir: Path, state_dir: Path
) -> None:
    opts = ["--plugins-dir", str(plugins_dir)]
    created = run("new", "my-tool", *opts)
    assert Path(created["path"]).is_dir()
    audit = run("audit", "my-tool", *opts, "--state-dir", str(state_dir))
    assert audit["audit"]["risk_level"] == "LOW"
    answer = run(
        "call",
        "--enable",
        "my-tool",
        "my_tool.hello",
        '"you"',
        "--yes",
        *opts,
        "--state-dir",
        str(state_dir),
    )
    assert answer["result"] == "Hello, you!"
    # A bad name is a usage error (issue 15: README's exit codes everywhere).
    assert "not kebab-case" in run("new", "My_Tool", *opts, code=2)["error"]["message"]
    assert "already exists" in run("new", "my-tool", *opts, code=1)["error"]["message"]


def test_demo(state_dir: Path) -> None:
    document = run("demo", "--state-dir", str(state_dir))
    assert document["ok"] is True
    steps = {s["step"]: s for s in document["steps"]}
    assert steps["call hello greet.say('world')"]["result"] == "Hello, world!"
    assert "danger finding" in steps["shell-out enable refused (danger gate)"]["reason"]


def test_corrupt_state_database_exits_3_and_is_untouched(cli: list[str], state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / "caplet.db"
    db.write_bytes(b"not a database at all" * 100)
    before = db.read_bytes()
    document = run("list", *cli, code=3)
    assert "corrupt" in document["error"]["message"]
    assert db.read_bytes() == before


@pytest.mark.slow
def test_real_subprocess_call_end_to_end(examples_copy: Path, state_dir: Path) -> None:
    """The README's promise, as a user runs it: a separate `caplet` process."""
    env = {
        **os.environ,
        "CAPLET_STATE_DIR": str(state_dir),
        "CAPLET_PLUGINS_DIR": str(examples_copy),
    }
    result = subprocess.run(
        [
            *(sys.executable, "-m", "caplet", "call", "--enable", "hello", "greet.say"),
            *('"world"', "--yes"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello, world!"


def test_secret_config_values_are_never_printed(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin(
        "vault",
        extra=(
            '[config.token]\ntype = "string"\nsecret = true\ndefault = "default-s3cr3t"\n'
            '[config.user]\ntype = "string"\ndefault = "ann"\n'
        ),
    )
    opts = ["--plugins-dir", str(plugins_dir), "--state-dir", str(state_dir)]
    for args in (["info", "vault"], ["enable", "vault", "token=hunter2-value", "-y"], ["list"]):
        result = runner.invoke(app, [*args, *opts, "--json"])
        assert result.exit_code == 0, result.output
        assert "hunter2-value" not in result.output
        assert "default-s3cr3t" not in result.output
    human = runner.invoke(app, ["info", "vault", *opts])
    assert "default-s3cr3t" not in human.output
    assert "******" in human.output
    enabled = run("enable", "vault", "token=hunter2-value", "--yes", *opts)
    assert enabled["plugin"]["config"] == {"token": "******", "user": "ann"}
    db = (state_dir / "caplet.db").read_bytes()
    assert b"hunter2-value" not in db


def test_plugin_info_repr_hides_config(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    from caplet import PluginHost

    make_plugin("vault", extra='[config.token]\ntype = "string"\nsecret = true\n')
    with PluginHost(plugins_dir, state_dir=state_dir) as host:
        assert host.enable("vault", ["token=hunter2-value"], consent=True)
        info = host.get_plugin("vault")
        assert info is not None
        assert info.config["token"] == "hunter2-value"
        assert "hunter2-value" not in repr(info)


# -- quarantine, release and the decision log ----------------------------------------------


def _quarantine(examples_copy: Path, state_dir: Path, name: str, reason: str) -> None:
    """Quarantine through the library, as a host whose breaker tripped would."""
    from caplet import PluginHost

    with PluginHost(examples_copy, state_dir=state_dir) as host:
        assert host.quarantine(name, reason)


def test_list_shows_a_quarantined_plugin_with_its_reason(
    cli: list[str], examples_copy: Path, state_dir: Path
) -> None:
    _quarantine(examples_copy, state_dir, "hello", "circuit breaker tripped 3 times")
    plugins = {p["name"]: p for p in run("list", *cli)["plugins"]}
    assert plugins["hello"]["state"] == "quarantined"
    assert plugins["hello"]["quarantine"]["reason"] == "circuit breaker tripped 3 times"
    assert plugins["fs-read"]["quarantine"] is None
    text = runner.invoke(app, ["list", *cli])
    assert text.exit_code == 0
    assert "circuit breaker tripped 3 times (release it with `caplet release hello`)" in (
        " ".join(text.stdout.split())
    )


def test_release_lifts_a_quarantine_once(
    cli: list[str], examples_copy: Path, state_dir: Path
) -> None:
    _quarantine(examples_copy, state_dir, "hello", "crashed")
    refused = run("call", "--enable", "hello", "greet.say", '"world"', *cli, code=1)
    assert "quarantined (crashed)" in refused["reason"]
    released = run("release", "hello", *cli)
    assert released == {"ok": True, "name": "hello", "also_affected": []}
    assert run("list", *cli)["plugins"][1]["state"] == "discovered"
    again = run("release", "hello", *cli, code=1)
    assert again["reason"] == "plugin 'hello' is not quarantined; nothing to release"
    called = run("call", "--enable", "hello", "greet.say", '"world"', "--yes", *cli)
    assert called["result"] == "Hello, world!"
    assert "did you mean 'hello'" in run("release", "helo", *cli, code=2)["error"]["message"]


def test_log_shows_decisions_newest_first(
    cli: list[str], examples_copy: Path, state_dir: Path
) -> None:
    _quarantine(examples_copy, state_dir, "hello", "crashed [red]3[/red] times")
    run("release", "hello", *cli)
    run("audit", "fs-read", *cli)
    everything = run("log", *cli)
    assert everything["ok"] is True
    assert everything["plugin"] is None
    entries = everything["decisions"]
    assert [(d["plugin"], d["action"]) for d in entries[:3]] == [
        ("fs-read", "audit"),
        ("hello", "release"),
        ("hello", "quarantine"),
    ]
    ids = [d["id"] for d in entries]
    assert ids == sorted(ids, reverse=True)
    quarantine = entries[2]
    assert quarantine["allowed"] is False
    assert quarantine["detail"] == "crashed [red]3[/red] times"
    assert quarantine["target"] == "hello"
    assert set(quarantine) == {
        "id",
        "at",
        "time",
        "plugin",
        "action",
        "target",
        "allowed",
        "detail",
    }
    only_hello = run("log", "hello", "--limit", "1", *cli)["decisions"]
    assert [(d["plugin"], d["action"], d["allowed"]) for d in only_hello] == [
        ("hello", "release", True)
    ]
    assert "did you mean 'hello'" in run("log", "helo", *cli, code=2)["error"]["message"]
    assert runner.invoke(app, ["log", "--limit", "-1", *cli]).exit_code == 2
    text = runner.invoke(app, ["log", "hello", *cli], env={"COLUMNS": "200"})
    assert text.exit_code == 0
    assert "crashed [red]3[/red] times" in text.stdout, "details are printed as text, not markup"
    assert "denied" in text.stdout
    assert "allowed" in text.stdout


def test_doctor_tells_the_truth_here() -> None:
    document = run("doctor")
    assert document["ok"] is True
    assert set(document["layers"]) == {"namespaces", "rlimits", "landlock", "seccomp", "cgroup"}
    assert all(layer["available"] for layer in document["layers"].values())
    assert int(document["details"]["landlock_abi"]) >= 1


def test_doctor_reports_a_machine_without_user_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces")
    document = run("doctor", code=1)
    assert document["ok"] is False
    namespaces = document["layers"]["namespaces"]
    assert namespaces["available"] is False
    assert "user namespaces" in namespaces["fix"]
    assert document["layers"]["landlock"]["available"] is True


def test_strict_refuses_and_best_effort_runs_without_namespaces(
    monkeypatch: pytest.MonkeyPatch, examples_copy: Path, state_dir: Path
) -> None:
    from caplet import Isolation, PluginHost, Policy

    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces")
    with PluginHost(examples_copy, state_dir=state_dir) as strict:
        outcome = strict.enable("hello", consent=True)
        assert not outcome
        assert "isolation 'strict' needs the namespaces layer" in outcome.reason
    policy = Policy(isolation=Isolation.BEST_EFFORT)
    with PluginHost(examples_copy, state_dir=state_dir, policy=policy) as lenient:
        assert lenient.enable("hello", consent=True)
        assert "missing: namespaces" in lenient.isolation
        assert lenient.call("hello", "greet.say", "you") == "Hello, you!"


def test_doctor_treats_the_cgroup_as_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "cgroup")
    document = run("doctor")
    assert document["ok"] is True, "strict isolation does not require the cgroup"
    assert document["layers"]["cgroup"]["available"] is False
    assert "pids" in document["layers"]["cgroup"]["fix"]
