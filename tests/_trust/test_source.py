"""The environment an installed plugin belongs to (attack15): part of its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._trust._source import environment_of


@pytest.mark.parametrize(
    ("site", "root"),
    [
        ("app/.venv/lib/python3.12/site-packages", "app/.venv"),
        ("app/.venv/lib64/python3.11/site-packages", "app/.venv"),
        ("app/.venv/lib/python3.13t/site-packages", "app/.venv"),
        ("usr/lib/python3/dist-packages", "usr"),
        ("usr/local/lib/python3.11/dist-packages", "usr/local"),
        ("home/u/.local/lib/python3.11/site-packages", "home/u/.local"),
        ("venv/Lib/site-packages", "venv"),
        # any other folder on the search path is its own environment
        ("vendor/plugins", "vendor/plugins"),
        ("app/site-packages", "app/site-packages"),
        ("app/lib/notpython/site-packages", "app/lib/notpython/site-packages"),
    ],
)
def test_a_site_directory_belongs_to_its_environments_root(
    tmp_path: Path, site: str, root: str
) -> None:
    (tmp_path / site).mkdir(parents=True)
    assert environment_of(tmp_path / site) == str((tmp_path / root).resolve())


def test_a_new_python_in_the_same_environment_is_the_same_environment(tmp_path: Path) -> None:
    old = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    new = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    assert environment_of(old) == environment_of(new)


def test_links_are_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real" / "lib" / "python3.12" / "site-packages"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    linked = tmp_path / "link" / "lib" / "python3.12" / "site-packages"
    assert environment_of(linked) == str((tmp_path / "real").resolve())
