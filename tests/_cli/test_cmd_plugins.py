"""Plugin commands at the edges: a plugins directory that is not there (issue 15)."""

from __future__ import annotations

from pathlib import Path

from tests._cli.clikit import caplet, document


def test_a_missing_plugins_directory_is_a_usage_error_not_an_empty_list(tmp_path: Path) -> None:
    """`caplet list -p nonexist` exited 0 silently."""
    for command in (("list",), ("info", "x"), ("audit", "x")):
        result = caplet(*command, "-p", "nonexist", "--json", cwd=tmp_path)
        assert result.returncode == 2, (command, result.stderr)
        message = document(result)["error"]["message"]
        assert message.startswith("no plugins directory 'nonexist'; pass --plugins-dir"), message
    (tmp_path / "afile").write_text("x")
    result = caplet("list", "-p", "afile", cwd=tmp_path)
    assert result.returncode == 2
    assert "'afile' is not a directory" in result.stderr
    # The log is about the state, not the plugins: no plugins directory is needed.
    log = caplet("log", "-p", "nonexist", "--state-dir", str(tmp_path / "s"), cwd=tmp_path)
    assert log.returncode == 0, log.stderr


def test_new_example_copies_a_shipped_plugin(tmp_path: Path) -> None:
    for name in ("fs-read", "fetch", "hello"):
        result = caplet("new", name, "--example", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "plugins" / name / "plugin.toml").is_file()
    listed = document(caplet("list", "--json", cwd=tmp_path))
    assert [p["name"] for p in listed["plugins"]] == ["fetch", "fs-read", "hello"]
    again = caplet("new", "hello", "--example", "--json", cwd=tmp_path)
    assert again.returncode == 1
    assert "already exists" in document(again)["error"]["message"]
    unknown = caplet("new", "fs-reed", "--example", "--json", cwd=tmp_path)
    assert unknown.returncode == 2
    assert document(unknown)["error"]["message"].startswith(
        "caplet ships no plugin named 'fs-reed' (did you mean 'fs-read'?)"
    )
