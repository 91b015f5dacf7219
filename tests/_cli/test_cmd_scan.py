"""`caplet scan`: what looks like a path is a path (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._cli.clikit import caplet, document


@pytest.mark.parametrize(
    "target", ["./plugins/foo", "/nonexistent", "plugins/foo", "dist/x.whl", "pkg.tar.gz", "~/x"]
)
def test_a_missing_path_is_no_such_file_not_no_such_plugin(tmp_path: Path, target: str) -> None:
    """It said "no plugin named ... in plugins"."""
    (tmp_path / "plugins").mkdir()
    result = caplet("scan", target, "--json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert document(result)["error"] == {
        "type": "UsageError",
        "message": f"cannot scan {target!r}: no such file or directory",
    }


def test_a_plain_name_is_still_a_plugin(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    result = caplet("scan", "helo", "--json", cwd=tmp_path)
    assert result.returncode == 2
    assert document(result)["error"]["type"] == "PluginNotFoundError"
