"""pathjail.py where no sandboxed call reaches deterministically: the canonical re-check
and the errors of a failing system.

Through the plugins, every link is refused while the path is walked, before
the re-check runs; it exists for what changes between the walk and the open
(a rename race). And a healthy file system never answers EIO or ENOSPC to a
read. Here the module is called directly, on a private copy (importing the
shipped file would write bytecode into plugins/), outside any worker: its
one caplet import, ``caplet.plugin``, works wherever caplet is installed.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from caplet.plugin import Refused
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
    with pytest.raises(pathjail.AccessRefused) as info:
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
    with pytest.raises(pathjail.AccessRefused, match=r"'alias\.txt' does not resolve to itself"):
        pathjail.Jail(str(base)).recheck(("alias.txt",), fd)


def test_the_recheck_refuses_a_vanished_path(pathjail: ModuleType, base: Path, fd: int) -> None:
    (base / "a.txt").unlink()
    with pytest.raises(pathjail.AccessRefused, match=r"'a\.txt' does not resolve to itself"):
        pathjail.Jail(str(base)).recheck(("a.txt",), fd)


def test_the_base_must_be_absolute(pathjail: ModuleType) -> None:
    with pytest.raises(ValueError, match="root must be an absolute path"):
        pathjail.Jail("relative/base")


@pytest.mark.parametrize(
    ("code", "name", "builtin", "message"),
    [
        (errno.ENOENT, "NotFoundRefused", FileNotFoundError, "not found: 'a/b'"),
        (errno.EEXIST, "AlreadyExistsRefused", FileExistsError, "already exists: 'a/b'"),
        (errno.ENOTDIR, "NotADirectoryRefused", NotADirectoryError, "not a directory: 'a/b'"),
        (errno.EISDIR, "IsADirectoryRefused", IsADirectoryError, "is a directory: 'a/b'"),
        (
            errno.ELOOP,
            "AccessRefused",
            PermissionError,
            "access denied: 'a/b' is a symbolic link; symlinks are not permitted",
        ),
        (errno.EACCES, "AccessRefused", PermissionError, "access denied: 'a/b'"),
        (errno.EPERM, "AccessRefused", PermissionError, "access denied: 'a/b'"),
        (
            errno.ENAMETOOLONG,
            "NameTooLongRefused",
            OSError,
            "cannot access 'a/b': File name too long",
        ),
    ],
)
def test_errors_a_path_explains_are_refusals(
    pathjail: ModuleType, base: Path, code: int, name: str, builtin: type[OSError], message: str
) -> None:
    error = pathjail.Jail(str(base)).error(OSError(code, os.strerror(code)), ("a", "b"))
    assert type(error) is getattr(pathjail, name)
    assert isinstance(error, Refused), "it must not count toward the breaker"
    assert isinstance(error, builtin), "an except clause for the old type still catches it"
    assert str(error) == message


@pytest.mark.parametrize(
    ("code", "builtin", "message"),
    [
        (errno.EIO, OSError, "cannot access 'a/b': Input/output error"),
        (errno.ENOSPC, OSError, "no space left: 'a/b'"),
        (errno.EDQUOT, OSError, "no space left: 'a/b'"),
        (errno.EMFILE, OSError, "cannot access 'a/b': Too many open files"),
        (errno.EROFS, PermissionError, "access denied: 'a/b'"),
    ],
)
def test_errors_of_a_failing_system_are_failures(
    pathjail: ModuleType, base: Path, code: int, builtin: type[OSError], message: str
) -> None:
    error = pathjail.Jail(str(base)).error(OSError(code, os.strerror(code)), ("a", "b"))
    assert type(error) is builtin, "a plain built-in error: the breaker counts it"
    assert str(error) == message


def test_a_base_that_cannot_be_opened_is_a_failure(pathjail: ModuleType, base: Path) -> None:
    jail = pathjail.Jail(str(base / "gone"))
    with pytest.raises(OSError) as info, jail.directory(()):
        pass
    assert type(info.value) is OSError, "no path of the caller's can fix it: it counts"
    assert str(info.value) == (
        "the base directory cannot be opened (No such file or directory); check the plugin's "
        "root setting"
    )
