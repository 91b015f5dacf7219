"""Paths and names the command line refuses before anything uses them (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from caplet._cli._app import app
from caplet._cli._arguments import usable_path

runner = CliRunner()
#: Wide enough that the usage error's panel does not wrap the message.
WIDE = {"COLUMNS": "400"}


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("a\x00b", "embedded null byte"),  # typer's own Path conversion refuses it first
        ("n" * 300, "a name in the path ('" + "n" * 40 + "'..., 300 bytes) is longer than"),
        ("/x" * 2100, "the path is 4200 bytes long; the system's limit is 4095"),
        ("\ud800", "surrogates not allowed"),  # typer's own Path conversion again
    ],
)
def test_a_path_no_system_call_can_take_is_a_usage_error(
    tmp_path: Path, path: str, problem: str
) -> None:
    result = runner.invoke(
        app, ["list", "--plugins-dir", str(tmp_path), "--state-dir", path], env=WIDE
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Invalid value for '--state-dir'" in result.output
    assert problem in result.output


def test_a_non_utf8_name_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["info", "hel\udcfflo", "--plugins-dir", str(tmp_path), "--state-dir", str(tmp_path)],
        env=WIDE,
    )
    assert result.exit_code == 2, result.output
    assert "'hel' is followed by bytes that are not UTF-8 text" in result.output


def test_keygen_needs_a_file_name(tmp_path: Path) -> None:
    result = runner.invoke(app, ["keygen", ""])
    assert result.exit_code == 1, result.output
    assert "PREFIX '.' names no file; pass a path such as keys/publisher" in result.output


def test_usable_path_refuses_what_typer_lets_through_and_more() -> None:
    """Typer's Path conversion refuses NUL and unencodable text itself; the check holds
    on its own too (a callback may get a Path built some other way)."""
    for path in (Path("a\x00b"), Path("\ud800"), Path("n" * 256), Path("/x" * 2048)):
        with pytest.raises(typer.BadParameter):
            usable_path(path)
    assert usable_path(Path("n" * 255)) == Path("n" * 255)
    assert usable_path(Path("caf\udce9")) == Path("caf\udce9")  # non-UTF-8 bytes are fine
    assert usable_path(None) is None
