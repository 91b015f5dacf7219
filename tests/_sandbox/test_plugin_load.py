"""Loading a plugin in its worker, in process: the entry's path, the zip importer, registration.

The worker's own tests (tests/_sandbox/test_worker.py) load plugins through
a real worker process; these are the loader's pure helpers.
"""

from __future__ import annotations

import importlib.machinery
import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from caplet._sandbox._plugin_load import (
    _entry_parts,
    _LoadError,
    _no_zip_imports,
    _register,
)


def test_a_zip_importer_cached_before_the_load_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same attack with the archive's importer already cached (by the
    # zygote, or anything that ran before the plugin): dropping the hook
    # alone would leave it in use. A directory's finder stays cached: clearing
    # them all cost every start the listing of every sys.path directory.
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("hidden.py", "VALUE = 'zip code ran'\n")
    monkeypatch.setattr(sys, "path_hooks", list(sys.path_hooks))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    sys.path_importer_cache[str(archive)] = zipimport.zipimporter(str(archive))
    assert importlib.machinery.PathFinder.find_spec("hidden", [str(archive)]) is not None
    finder = importlib.machinery.FileFinder(str(tmp_path))
    sys.path_importer_cache[str(tmp_path)] = finder

    _no_zip_imports()

    assert zipimport.zipimporter not in sys.path_hooks
    assert str(archive) not in sys.path_importer_cache
    assert importlib.machinery.PathFinder.find_spec("hidden", [str(archive)]) is None
    assert sys.path_importer_cache[str(tmp_path)] is finder


@pytest.mark.parametrize(
    ("entry", "parts"),
    [
        ("plugin.py", ("plugin",)),
        ("pkg/main.py", ("pkg", "main")),
        ("my-plugin.py", ("my-plugin",)),
    ],
)
def test_entry_parts(entry: str, parts: tuple[str, ...]) -> None:
    assert _entry_parts(entry) == parts


@pytest.mark.parametrize(
    "entry",
    ["", "/abs/plugin.py", "../x.py", "a/../x.py", "plugin.txt", ".py", "a//b.py", "a\\b.py"],
)
def test_entry_parts_refuses_escapes(entry: str) -> None:
    with pytest.raises(_LoadError, match=r"must be a relative path to a \.py file"):
        _entry_parts(entry)


def test_entry_directories_must_be_package_names() -> None:
    with pytest.raises(_LoadError, match="directory 'my-dir' is not a Python package name"):
        _entry_parts("my-dir/plugin.py")


def test_register_keeps_only_declared_names() -> None:
    def run() -> None:
        return None

    loaded = _register(
        {"demo": {"run": run, "other": run}, "extra": {"x": run}},
        {"demo": ("run", "missing"), "unused": ("y",)},
    )
    assert loaded.table == {"demo": {"run": run}}
    assert loaded.rejected == ("demo.other", "extra")
