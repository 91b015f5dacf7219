"""pathjail.py's canonical re-check, which no sandboxed call can reach deterministically.

Through the plugins, every link is refused while the path is walked, before
the re-check runs; it exists for what changes between the walk and the open
(a rename race). Here it is called directly, on a private copy of the module
(importing the shipped file would write bytecode into plugins/).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.plugins.conftest import REFERENCE


@pytest.fixture
def pathjail(tmp_path: Path) -> ModuleType:
    copy = tmp_path / "module" / "pathjail.py"
    copy.parent.mkdir()
    shutil.copyfile(REFERENCE / "fs-read" / "pathjail.py", copy)
    spec = importlib.util.spec_from_file_location("caplet_test_pathjail", copy)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fd(base: Path) -> Iterator[int]:
    (base / "a.txt").write_text("a", encoding="utf-8")
    descriptor = os.open(base / "a.txt", os.O_RDONLY)
    yield descriptor
    os.close(descriptor)


def test_the_recheck_accepts_the_file_the_path_names(
    pathjail: ModuleType, base: Path, fd: int
) -> None:
    pathjail.Jail(str(base)).recheck(("a.txt",), fd)


def test_the_recheck_refuses_another_file_under_the_same_name(
    pathjail: ModuleType, base: Path, fd: int
) -> None:
    (base / "a.txt").rename(base / "moved.txt")
    (base / "a.txt").write_text("swapped in", encoding="utf-8")
    with pytest.raises(PermissionError) as info:
        pathjail.Jail(str(base)).recheck(("a.txt",), fd)
    assert str(info.value) == (
        "access denied: 'a.txt' does not resolve to itself inside the base directory (a link, "
        "or it changed while it was opened)"
    )
    assert str(base) not in str(info.value)


def test_the_recheck_refuses_a_path_that_resolves_elsewhere(
    pathjail: ModuleType, base: Path, fd: int
) -> None:
    (base / "alias.txt").symlink_to(base / "a.txt")
    with pytest.raises(PermissionError, match=r"'alias\.txt' does not resolve to itself"):
        pathjail.Jail(str(base)).recheck(("alias.txt",), fd)


def test_the_recheck_refuses_a_vanished_path(pathjail: ModuleType, base: Path, fd: int) -> None:
    (base / "a.txt").unlink()
    with pytest.raises(PermissionError, match=r"'a\.txt' does not resolve to itself"):
        pathjail.Jail(str(base)).recheck(("a.txt",), fd)


def test_the_base_must_be_absolute(pathjail: ModuleType) -> None:
    with pytest.raises(ValueError, match="root must be an absolute path"):
        pathjail.Jail("relative/base")
