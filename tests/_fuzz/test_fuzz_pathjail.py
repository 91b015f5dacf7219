"""Property tests of the reference plugins' path jail (plugins/fs-read/pathjail.py).

Hypothesis builds paths from a vocabulary that reaches every kind of entry
of a real jail directory (files, directories, dotfiles, hard links, a FIFO,
long and non-ASCII names, symbolic links pointing inside, outside, nowhere
and at themselves) plus ``..``, ``.``, empty components, NUL, lone
surrogates, absolute prefixes, doubled and trailing slashes, and arbitrary
text. Each path goes through the jail the way the plugins use it (open a
file, open a directory, ``lstat`` an entry) and is judged against
:func:`reference`, written independently from the path rules in
plugins/fs-read/README.md with ``os.lstat`` one component at a time.

Properties: the jail raises nothing but its documented refusals (the
``caplet.plugin.Refused`` class of its message's category, which subclasses
the built-in error it replaced: ``InvalidPathRefused`` a ValueError
"invalid path: ...", ``AccessRefused`` a PermissionError "access denied:
...", and so on), so no path a caller sends can count toward the plugin's
circuit breaker on a healthy file system; no message names the host's base
directory; whatever the jail
opens is exactly what the reference accepts (so never a path outside the
base, never through a link, never a dotfile), and it refuses nothing the
reference accepts.
"""

from __future__ import annotations

import enum
import importlib.util
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from caplet.plugin import Refused
from tests._fuzz.budget import fuzz

REFERENCE_JAIL = Path(__file__).resolve().parents[2] / "plugins" / "fs-read" / "pathjail.py"
#: Stands for the jail's absolute base path in generated paths (it is only known at run time).
BASE_TOKEN = "<base>"
#: The start of every refusal message the jail documents (README "Errors", pathjail.error),
#: its class, and the built-in error the class still is. "cannot access" is a refusal only
#: for a name too long (ENAMETOOLONG); "no space left" and any other "cannot access" are
#: failures, which a read-only walk of a healthy jail never meets.
REFUSALS: dict[str, tuple[str, type[Exception]]] = {
    "invalid path: ": ("InvalidPathRefused", ValueError),
    "access denied: ": ("AccessRefused", PermissionError),
    "not found: ": ("NotFoundRefused", FileNotFoundError),
    "already exists: ": ("AlreadyExistsRefused", FileExistsError),
    "not a directory: ": ("NotADirectoryRefused", NotADirectoryError),
    "is a directory: ": ("IsADirectoryRefused", IsADirectoryError),
    "cannot access ": ("NameTooLongRefused", OSError),
}
LONG_NAME = "l" * 255  # the longest name a Linux file system takes


class Op(enum.Enum):
    """How the plugins use a checked path."""

    FILE = "open a file"
    DIRECTORY = "open a directory"
    LSTAT = "lstat an entry"


@pytest.fixture(scope="module")
def pathjail(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """A private copy of the shipped module (importing it would write bytecode into plugins/)."""
    copy = tmp_path_factory.mktemp("module") / "pathjail.py"
    shutil.copyfile(REFERENCE_JAIL, copy)
    spec = importlib.util.spec_from_file_location("caplet_fuzz_pathjail", copy)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The jail: one of every kind of entry, and links pointing in, out and nowhere."""
    root = tmp_path_factory.mktemp("jail")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    jail = root / "base"
    (jail / "docs" / "deep").mkdir(parents=True)
    (jail / ".hidden").mkdir()
    (jail / "é文").mkdir()
    (jail / "a.txt").write_text("a")
    (jail / "docs" / "b.md").write_text("b")
    (jail / "docs" / "deep" / "c.txt").write_text("c")
    (jail / ".env").write_text("SECRET=1")
    (jail / ".hidden" / "x.txt").write_text("x")
    (jail / "é文" / "ü.txt").write_text("u")
    (jail / LONG_NAME).write_text("long")
    (jail / "hard.txt").write_text("twice")
    os.link(jail / "hard.txt", jail / "twin.txt")
    os.link(outside / "secret.txt", jail / "secret.txt")
    os.mkfifo(jail / "fifo")
    (jail / "link_in").symlink_to("a.txt")
    (jail / "link_dir_in").symlink_to("docs")
    (jail / "link_out").symlink_to("../outside/secret.txt")
    (jail / "link_dir_out").symlink_to("../outside")
    (jail / "link_abs").symlink_to(outside)
    (jail / "loop").symlink_to("loop")
    (jail / "dangling").symlink_to("nowhere")
    (jail / "docs" / "up").symlink_to("..")
    (jail / "docs" / "out").symlink_to("../../outside")
    return jail


# -- the reference ---------------------------------------------------------------------------


def reference(base: Path, path: object, op: Op) -> str | None:
    """The host path ``op`` may reach for ``path`` under the README's rules, or None.

    Rules: a non-empty str of valid Unicode text (no lone surrogate) without
    NUL, at most 4096 characters, relative;
    ``.`` and empty components are skipped; no ``..`` and no component
    starting with ``.``; every component exists, and none is a symbolic link
    except the entry an lstat is about; every ancestor is a directory. A
    file must be a regular file with one link; a directory a directory.
    """
    if not isinstance(path, str) or not path or "\0" in path or len(path) > 4096:
        return None
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate is no text
        return None
    if path.startswith("/"):
        return None
    components = [c for c in path.split("/") if c not in ("", ".")]
    if any(c == ".." or c.startswith(".") for c in components):
        return None
    current = str(base)
    info = os.lstat(current)
    for index, component in enumerate(components):
        current = os.path.join(current, component)
        try:
            info = os.lstat(current)
        except OSError:  # missing, or a name too long
            return None
        last = index == len(components) - 1
        if stat.S_ISLNK(info.st_mode) and not (last and op is Op.LSTAT):
            return None
        if not last and not stat.S_ISDIR(info.st_mode):
            return None
    if op is Op.DIRECTORY:
        return current if stat.S_ISDIR(info.st_mode) else None
    if not components:
        return None  # a file or an entry needs a name
    if op is Op.FILE:
        return current if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 else None
    return current


# -- the jail, as the plugins use it ---------------------------------------------------------


def opened(fd: int) -> str:
    """The host path the kernel says ``fd`` is open on."""
    return os.readlink(f"/proc/self/fd/{fd}")


@contextmanager
def closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def through_jail(pathjail: ModuleType, base: Path, path: object, op: Op) -> str:
    """What the jail opens (or lstats) for ``path``; raises what the jail raises."""
    jail = pathjail.Jail(str(base))
    parts: tuple[str, ...] = jail.parts(path)
    if op is Op.DIRECTORY:
        with jail.directory(parts) as fd:
            return opened(fd)
    if not parts:
        raise pathjail.IsADirectoryRefused("is a directory: '.'")  # as the plugins answer
    with jail.directory(parts[:-1]) as directory:
        if op is Op.LSTAT:
            info = jail.lstat_in(directory, parts)
            where = os.path.join(opened(directory), parts[-1])
            assert os.lstat(where).st_ino == info.st_ino
            return where
        with closing(jail.open_in(directory, parts, os.O_RDONLY)) as fd:
            return opened(fd)


# -- the generated paths ---------------------------------------------------------------------

#: The entries of each directory of the jail, by the name that reaches it (a link to a
#: directory by its own name): what a walk from the base can step on next.
ROOT = [
    "a.txt",
    "docs",
    ".env",
    ".hidden",
    "é文",
    LONG_NAME,
    "hard.txt",
    "twin.txt",
    "secret.txt",
    "fifo",
    "link_in",
    "link_dir_in",
    "link_out",
    "link_dir_out",
    "link_abs",
    "loop",
    "dangling",
]
DOCS = ["b.md", "deep", "up", "out"]
OUTSIDE = ["secret.txt"]
CHILDREN = {
    "": ROOT,
    "docs": DOCS,
    "link_dir_in": DOCS,
    "up": ROOT,
    "deep": ["c.txt"],
    ".hidden": ["x.txt"],
    "é文": ["ü.txt"],
    "out": OUTSIDE,
    "link_dir_out": OUTSIDE,
    "link_abs": OUTSIDE,
}
#: Components no entry has: traversal, skipped and odd names, bytes the kernel cannot take.
SPECIAL = [
    "..",
    ".",
    "",
    "...",
    "outside",
    "missing",
    LONG_NAME + "l",
    "a.txt\0",
    "\ud800",
    "\udcff",
    " ",
    "a.txt ",
    "~",
]
prefixes = st.sampled_from(["", "", "", "", "", "./", "../", "/", "//", f"{BASE_TOKEN}/", "/etc/"])
suffixes = st.sampled_from(["", "", "", "/", "//", "/."])
separators = st.sampled_from(["/", "/", "/", "//", "/./"])


@st.composite
def walks(draw: st.DrawFn) -> str:
    """A walk down the jail's real entries, now and then with a special component."""
    parts: list[str] = []
    where = ""
    for _ in range(draw(st.integers(1, 4))):
        options = CHILDREN.get(where)
        if options is None:
            break
        where = draw(st.sampled_from(options))
        parts.append(where)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(parts)))
        parts.insert(at, draw(st.one_of(st.sampled_from(SPECIAL), st.text(max_size=4))))
    return draw(prefixes) + draw(separators).join(parts) + draw(suffixes)


@st.composite
def mixtures(draw: st.DrawFn) -> str:
    """Any names of the jail, in any order, with special components and arbitrary text."""
    component = st.one_of(
        st.sampled_from(ROOT + DOCS), st.sampled_from(SPECIAL), st.text(max_size=6)
    )
    parts = draw(st.lists(component, max_size=5))
    return draw(prefixes) + draw(separators).join(parts) + draw(suffixes)


paths: st.SearchStrategy[object] = st.one_of(
    walks(),
    walks(),
    walks(),
    mixtures(),
    st.one_of(
        st.text(max_size=24),
        st.just("x" * 4097),
        st.just("a/" * 2048 + "a.txt"),
        st.none(),
        st.integers(),
        st.binary(max_size=8),
        st.lists(st.just("a.txt"), max_size=2),
    ),
)


@fuzz(300)
@given(paths, st.sampled_from(list(Op)))
# The escapes the rules exist for, whatever the budget: a hard link to a file
# outside, a dotfile, links out (as the target and as an ancestor), traversal
# through a link to the base's parent, a lone surrogate.
@example(path="secret.txt", op=Op.FILE)
@example(path=".env", op=Op.FILE)
@example(path="link_out", op=Op.FILE)
@example(path="link_dir_out/secret.txt", op=Op.FILE)
@example(path="docs/out/secret.txt", op=Op.LSTAT)
@example(path="docs/up/a.txt", op=Op.FILE)
@example(path="\ud800", op=Op.DIRECTORY)
def test_the_jail_opens_exactly_what_the_reference_accepts(
    pathjail: ModuleType, base: Path, path: object, op: Op
) -> None:
    if isinstance(path, str):
        path = path.replace(BASE_TOKEN, str(base))
    expected = reference(base, path, op)
    error: ValueError | OSError | None = None
    try:
        got = through_jail(pathjail, base, path, op)
    except (ValueError, OSError) as exc:  # anything else fails the test as it is
        error = exc
    if error is not None:
        refusal = str(error)
        category = next((c for c in REFUSALS if refusal.startswith(c)), None)
        assert category is not None, f"undocumented {error!r}"
        name, builtin = REFUSALS[category]
        assert type(error) is getattr(pathjail, name), f"{error!r} is not a {name}"
        assert isinstance(error, Refused), f"{error!r} would count toward the breaker"
        assert isinstance(error, builtin), f"{error!r} is no longer a {builtin.__name__}"
        for hidden in {str(base), os.path.realpath(base), str(base.parent)}:
            assert hidden not in refusal, f"{refusal!r} names the host path {hidden!r}"
        assert expected is None, f"{op.value} {path!r}: refused ({refusal}), reference accepts"
        return
    assert expected is not None, f"{op.value} {path!r}: the jail reached {got}, reference refuses"
    # An lstat is about the entry itself (a link is not followed), the rest about the target.
    head, name = os.path.split(expected)
    assert got == (
        os.path.join(os.path.realpath(head), name) if op is Op.LSTAT else os.path.realpath(expected)
    )
    real_base = os.path.realpath(base)
    assert os.path.commonpath([got, real_base]) == real_base
    if op is not Op.DIRECTORY:
        assert got != real_base  # a file or an entry is strictly inside
