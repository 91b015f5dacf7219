"""The public API is exactly caplet.__all__: sorted, complete, importable, lazy."""

from __future__ import annotations

import subprocess
import sys

import pytest

import caplet


def test_all_is_sorted_and_unique() -> None:
    assert caplet.__all__ == sorted(set(caplet.__all__))


def test_all_matches_the_export_table_and_resolves() -> None:
    assert set(caplet.__all__) == set(caplet._EXPORTS)
    for name in caplet.__all__:
        assert getattr(caplet, name) is not None, name


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="'Nope'"):
        getattr(caplet, "Nope")  # noqa: B009


def test_every_error_is_a_caplet_error() -> None:
    for name in caplet.__all__:
        value = getattr(caplet, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, caplet.CapletError), name


def test_worker_import_stays_light() -> None:
    """A worker must not pay for the host's dependencies before running a plugin."""
    code = (
        "import sys, caplet._sandbox._worker;"
        "heavy = ('pydantic', 'rich', 'typer', 'sqlite3', 'caplet._host._host');"
        "heavy = [m for m in heavy if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
