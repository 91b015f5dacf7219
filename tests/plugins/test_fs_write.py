"""plugins/fs-write in the real sandbox: writes, appends, mkdir, limits, the entry budget
and the same jail rules as fs-read."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from caplet import CircuitOpenError, Policy
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import give_to_worker
from tests.plugins.conftest import Caller, install, reference_host

FsWrite = Callable[..., Caller]


@pytest.fixture
def tree(base: Path, outside: Path) -> Path:
    (base / "docs").mkdir()
    (base / "notes.md").write_text("old\n", encoding="utf-8")
    (base / "link.md").symlink_to(base / "notes.md")
    (base / "linkdir").symlink_to(base / "docs")
    (base / "escape").symlink_to(outside / "secret.txt")
    (base / "escapedir").symlink_to(outside)
    os.link(outside / "secret.txt", base / "hardlink.txt")
    os.mkfifo(base / "fifo")
    return base


@pytest.fixture
def fswrite(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    tree: Path,
    tmp_path: Path,
) -> Iterator[FsWrite]:
    """Enable fs-read and fs-write on ``tree`` (fs-write's settings given); returns its caller.

    Each call starts a new host on the same state directory, as a new
    process of the application would.
    """
    install(plugins_dir, "fs-read", "fs-write")
    give_to_worker(tree)  # a writable grant belongs to the worker's uid (docs/security.md)
    with ExitStack() as stack:

        def start(*settings: str) -> Caller:
            host = stack.enter_context(reference_host(plugins_dir, state_dir, launcher))
            host.discover()
            assert host.enable("fs-read", [f"root={tree}"], consent=True)
            outcome = host.enable("fs-write", [f"root={tree}", *settings], consent=True)
            assert outcome, outcome.reason
            return Caller(host, "fs-write", "fswrite", hidden=(str(tmp_path),))

        yield start


def test_requires_fs_read(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, tree: Path
) -> None:
    install(plugins_dir, "fs-read", "fs-write")
    give_to_worker(tree)
    with reference_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
        refused = host.enable("fs-write", [f"root={tree}"], consent=True)
        assert not refused
        assert refused.reason == (
            "plugin 'fs-write' requires 'fs-read', which is not enabled; enable 'fs-read' first"
        )
        assert host.enable("fs-read", [f"root={tree}"], consent=True)
        assert host.enable("fs-write", [f"root={tree}"], consent=True)
        info = host.manager.require_plugin("fs-write")
        assert [str(c) for c in info.capabilities] == [f"fs.write:{tree}"]


def test_write_overwrite_append_and_mkdir(fswrite: FsWrite, tree: Path) -> None:
    caller = fswrite()
    assert caller("write_file", "new.txt", "héllo") == {
        "path": "new.txt",
        "bytes": 6,
        "size": 6,
        "created": True,
    }
    assert (tree / "new.txt").read_text(encoding="utf-8") == "héllo"
    assert stat.S_IMODE((tree / "new.txt").stat().st_mode) == 0o600
    assert caller("write_file", "notes.md", "new\n")["created"] is False
    assert (tree / "notes.md").read_text(encoding="utf-8") == "new\n"
    assert caller("append_file", "notes.md", "more\n") == {
        "path": "notes.md",
        "bytes": 5,
        "size": 9,
        "created": False,
    }
    assert (tree / "notes.md").read_text(encoding="utf-8") == "new\nmore\n"
    assert caller("append_file", "log.txt", "1\n")["created"] is True
    assert caller("mkdir", "out") == {"path": "out", "created": True}
    assert stat.S_IMODE((tree / "out").stat().st_mode) == 0o700
    assert caller("write_file", "out/report.md", "# r\n")["created"] is True
    assert (tree / "out" / "report.md").read_text(encoding="utf-8") == "# r\n"
    data = bytes(range(256))
    encoded = base64.b64encode(data).decode()
    assert caller("write_file_base64", "out/data.bin", encoded)["bytes"] == 256
    assert caller("append_file_base64", "out/data.bin", encoded)["size"] == 512
    assert (tree / "out" / "data.bin").read_bytes() == data * 2
    assert caller.message("write_file_base64", "x.bin", "not base64!") == (
        "InvalidDataRefused: invalid data: not valid base64"
    )
    assert not (tree / "x.bin").exists()


def test_mkdir_makes_one_level(fswrite: FsWrite, tree: Path) -> None:
    caller = fswrite()
    assert caller.message("mkdir", "a/b") == "NotFoundRefused: not found: 'a'"
    assert (
        caller.message("mkdir", "docs")
        == "AlreadyExistsRefused: already exists: 'docs' (directory)"
    )
    assert caller.message("mkdir", "notes.md") == (
        "AlreadyExistsRefused: already exists: 'notes.md' (file)"
    )
    assert caller.message("mkdir", ".") == "AlreadyExistsRefused: already exists: '.'"
    assert caller("mkdir", "a") == {"path": "a", "created": True}
    assert caller("mkdir", "a/b") == {"path": "a/b", "created": True}
    assert (tree / "a" / "b").is_dir()


def test_size_limits_per_call_and_per_file(fswrite: FsWrite, tree: Path) -> None:
    caller = fswrite("max_write_kb=1", "max_file_kb=2")
    assert caller.message("write_file", "big.txt", "x" * 1025) == (
        "TooLargeRefused: too large: 1025 bytes for 'big.txt', above the 1 KiB one call writes "
        "(max_write_kb)"
    )
    assert caller.message("write_file_base64", "big.bin", "A" * 1400) == (
        "TooLargeRefused: too large: more than the 1 KiB one call writes (max_write_kb)"
    )
    assert caller("write_file", "log.txt", "a" * 1024)["size"] == 1024
    assert caller("append_file", "log.txt", "b" * 1024)["size"] == 2048
    assert caller.message("append_file", "log.txt", "c") == (
        "TooLargeRefused: too large: 'log.txt' would hold 2049 bytes, above the 2 KiB a file may "
        "hold (max_file_kb)"
    )
    assert (tree / "log.txt").read_text(encoding="utf-8") == "a" * 1024 + "b" * 1024
    assert not (tree / "big.txt").exists()
    assert not (tree / "big.bin").exists()
    tight = fswrite("max_write_kb=4", "max_file_kb=1")
    assert tight.message("write_file", "wide.txt", "x" * 2048) == (
        "TooLargeRefused: too large: 2048 bytes for 'wide.txt', above the 1 KiB a file may hold "
        "(max_file_kb)"
    )


def test_the_entry_budget_counts_new_entries_only_and_persists(
    fswrite: FsWrite, tree: Path
) -> None:
    caller = fswrite("max_entries=2")
    assert caller("write_file", "one.txt", "1")["created"] is True
    assert caller("mkdir", "two") == {"path": "two", "created": True}
    full = (
        "entry limit reached: '{}' would be new, and 2 of 2 new files and directories "
        "(max_entries) are already created; overwrite or append to existing files instead"
    )
    assert caller.message("write_file", "three.txt", "3") == "EntryLimitRefused: " + full.format(
        "three.txt"
    )
    assert caller.message("append_file", "three.txt", "3").endswith(full.format("three.txt"))
    assert caller.message("mkdir", "two/three").endswith(full.format("two/three"))
    assert caller("write_file", "one.txt", "overwritten")["created"] is False
    assert caller("append_file", "one.txt", "+")["created"] is False
    assert caller("write_file", "notes.md", "existing files never count")["created"] is False
    assert sorted(p.name for p in tree.iterdir() if not p.name.startswith(("link", "escape"))) == [
        "docs",
        "fifo",
        "hardlink.txt",
        "notes.md",
        "one.txt",
        "two",
    ]
    # A new host (a new process of the application): the count lives in ctx.kv.
    again = fswrite("max_entries=2")
    assert again.message("write_file", "four.txt", "4").endswith(full.format("four.txt"))
    raised = fswrite("max_entries=3")
    assert raised("write_file", "four.txt", "4")["created"] is True


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", "InvalidPathRefused: invalid path: must be a non-empty string"),
        ("a\0b", "InvalidPathRefused: invalid path: contains a NUL character"),
        ("/tmp/x", "InvalidPathRefused: invalid path: absolute paths are not accepted"),
        ("../outside/new.txt", "AccessRefused: access denied: '..': '..' (path traversal)"),
        ("docs/../x", "AccessRefused: access denied: 'docs/..': '..' (path traversal)"),
        (".env", "AccessRefused: access denied: '.env': dotfiles are not permitted"),
        ("docs/.hidden/x", "AccessRefused: access denied: 'docs/.hidden': dotfiles are not"),
        ("link.md", "AccessRefused: access denied: 'link.md' is a symbolic link"),
        ("escape", "AccessRefused: access denied: 'escape' is a symbolic link"),
        ("linkdir/x.txt", "AccessRefused: access denied: 'linkdir' is a symbolic link"),
        ("escapedir/new.txt", "AccessRefused: access denied: 'escapedir' is a symbolic link"),
        (
            "hardlink.txt",
            "AccessRefused: access denied: 'hardlink.txt' has 2 hard links; hard-linked files "
            "are not permitted",
        ),
        ("fifo", "AccessRefused: access denied: 'fifo' is not a regular file (other)"),
        ("docs", "IsADirectoryRefused: is a directory: 'docs'"),
        (".", "IsADirectoryRefused: is a directory: '.'"),
        ("missing/x.txt", "NotFoundRefused: not found: 'missing'"),
        ("notes.md/x", "NotADirectoryRefused: not a directory: 'notes.md'"),
    ],
)
def test_the_jail_refuses_writes_with_a_relative_message(
    fswrite: FsWrite, tree: Path, outside: Path, path: str, expected: str
) -> None:
    caller = fswrite()
    for function in ("write_file", "append_file"):
        assert caller.message(function, path, "pwned").startswith(expected)
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (tree / "notes.md").read_text(encoding="utf-8") == "old\n"


def test_mkdir_uses_the_same_jail(fswrite: FsWrite, outside: Path) -> None:
    caller = fswrite()
    assert caller.message("mkdir", "escapedir/d").startswith(
        "AccessRefused: access denied: 'escapedir' is a symbolic link"
    )
    assert caller.message("mkdir", ".git").startswith(
        "AccessRefused: access denied: '.git': dotfiles are not permitted"
    )
    assert caller.message("mkdir", "../d").startswith("AccessRefused: access denied: '..'")
    assert caller.message("mkdir", "link.md") == (
        "AlreadyExistsRefused: already exists: 'link.md' (symlink)"
    )
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_refusals_in_a_row_leave_the_breaker_closed_and_failures_count(
    fswrite: FsWrite, tree: Path
) -> None:
    caller = fswrite("max_entries=1", "max_write_kb=1")
    assert caller("write_file", "one.txt", "1")["created"] is True
    refusals = [
        ("InvalidPathRefused", "write_file", ("/tmp/x", "x")),
        ("AccessRefused", "write_file", ("../outside/new.txt", "x")),
        ("AccessRefused", "append_file", (".env", "x")),
        ("AccessRefused", "write_file", ("escape", "x")),
        ("AccessRefused", "write_file", ("hardlink.txt", "x")),
        ("NotFoundRefused", "write_file", ("missing/x.txt", "x")),
        ("IsADirectoryRefused", "write_file", ("docs", "x")),
        ("NotADirectoryRefused", "mkdir", ("notes.md/x",)),
        ("AlreadyExistsRefused", "mkdir", ("docs",)),
        ("NameTooLongRefused", "write_file", ("n" * 256, "x")),
        ("TooLargeRefused", "write_file", ("notes.md", "x" * 1025)),
        ("InvalidDataRefused", "write_file_base64", ("notes.md", "not base64!")),
        ("EntryLimitRefused", "write_file", ("two.txt", "2")),
    ]
    assert len(refusals) > Policy().failure_threshold
    for exc_type, function, args in refusals:
        assert caller.refused(function, *args).exc_type == exc_type, (function, args)
    breaker = caller.host.breaker("fs-write")
    assert (breaker.failures, breaker.closed) == (0, True)
    assert caller("append_file", "one.txt", "+")["size"] == 2
    # A base directory the plugin cannot open is no caller's mistake: every call fails
    # until the administrator fixes it, which is what the breaker is for.
    tree.chmod(0)
    try:
        for _ in range(Policy().failure_threshold):
            assert caller.message("append_file", "one.txt", "+", refusal=False) == (
                "OSError: the base directory cannot be opened (Permission denied); check the "
                "plugin's root setting"
            )
    finally:
        tree.chmod(0o755)
    assert not breaker.closed
    with pytest.raises(CircuitOpenError):
        caller("append_file", "one.txt", "+")
    assert (tree / "one.txt").read_text(encoding="utf-8") == "1+"
