"""`caplet policy`: the effective values, where each came from, what loosens (issue 15)."""

from __future__ import annotations

from pathlib import Path

from tests._cli.clikit import caplet, document
from tests.conftest import write_policy


def test_the_defaults_without_a_file(tmp_path: Path) -> None:
    result = caplet("policy", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = document(result)
    assert shown["ok"] is True
    assert shown["file"] is None
    assert shown["loosened"] == []
    fields = {s["field"]: s for s in shown["settings"]}
    assert fields["memory_mb"] == {
        "field": "memory_mb",
        "value": 512,
        "default": 512,
        "source": "default",
        "loosens": None,
    }
    assert fields["network.allowed_networks"]["value"] == []
    assert "worker_uid" in fields
    assert "guest.pool_size" in fields
    text = caplet("policy", cwd=tmp_path)
    assert "nothing loosens the defaults" in text.stdout


def test_a_file_and_flags_each_named_as_the_source(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    write_policy(
        tmp_path / "caplet.toml",
        'isolation = "best-effort"\n[guest]\npool_size = 0\n',
        encoding="utf-8",
    )
    result = caplet(
        "policy",
        "--changed",
        "--allow-network",
        "127.0.0.0/8",
        "--set",
        "guest.timeout_ms=9000",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    shown = document(result)
    assert shown["file"] == "caplet.toml"
    assert {s["field"]: s["source"] for s in shown["settings"]} == {
        "isolation": "caplet.toml",
        "network.allowed_networks": "--allow-network",
        "guest.pool_size": "caplet.toml",
        "guest.timeout_ms": "--set guest.timeout_ms",
    }
    loosened = {s["field"]: s["loosens"] for s in shown["loosened"]}
    assert loosened == {
        "isolation": "runs plugins even when an isolation layer is missing on this machine",
        "network.allowed_networks": "plugins may reach 127.0.0.0/8 (loopback: services on "
        "this machine)",
        "guest.timeout_ms": "raises the default 5000",
    }


def test_text_output_marks_each_loosening_and_never_splits_a_word(tmp_path: Path) -> None:
    write_policy(tmp_path / "caplet.toml", 'max_risk_level = "HIGH"\n')
    for columns in ("250", "60"):
        result = caplet("policy", "--changed", cwd=tmp_path, env={"COLUMNS": columns})
        assert result.returncode == 0, result.stderr
        words = result.stdout.split()
        assert "max_risk_level" in words
        assert "loosens:" in words
        assert "MEDIUM)" in words
        assert "1 value(s) loosen the defaults" in " ".join(words)


def test_a_bad_policy_is_a_usage_error_naming_the_file_and_the_field(tmp_path: Path) -> None:
    write_policy(tmp_path / "caplet.toml", "memory_mb = 'lots'\n")
    for command in (("policy",), ("list",), ("call", "hello", "greet.say")):
        result = caplet(*command, "--json", cwd=tmp_path)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        error = document(result)["error"]
        assert error["type"] == "PolicyError"
        assert error["message"] == (
            "invalid policy: caplet.toml: memory_mb: 'lots' is not valid: expected a whole "
            "number (the default is 512)"
        )
    bad_flag = caplet("policy", "--max-risk", "extreme", cwd=tmp_path)
    assert bad_flag.returncode == 2
    assert "--max-risk: max_risk_level: 'EXTREME' is not valid" in bad_flag.stderr
    malformed = caplet("policy", "--set", "memory_mb", "--json", cwd=tmp_path)
    assert malformed.returncode == 2
    assert document(malformed)["error"]["type"] == "UsageError"
    assert "'memory_mb' is not FIELD=VALUE" in document(malformed)["error"]["message"]
