"""plugins/fs-read in the real sandbox: reads, chunks, listings, stat and every jail rule."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from caplet import CircuitOpenError, LifecycleError, Policy
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.plugins.conftest import Caller, install, reference_host

BINARY = bytes(range(256)) * 4
#: 'h', 'é' (2 bytes), 'llo', '€' (3 bytes): 9 bytes, characters split by small chunks.
UTF8 = "héllo€"

FsRead = Callable[..., Caller]


@pytest.fixture
def tree(base: Path, outside: Path) -> Path:
    """A base directory with every kind of entry the jail must handle."""
    (base / "notes.md").write_text("hello\n", encoding="utf-8")
    (base / "utf8.txt").write_text(UTF8, encoding="utf-8")
    (base / "data.bin").write_bytes(BINARY)
    (base / "docs").mkdir()
    (base / "docs" / "guide.txt").write_text("guide\n", encoding="utf-8")
    (base / ".env").write_text("TOKEN=1\n", encoding="utf-8")
    (base / "docs" / ".git").mkdir()
    (base / "docs" / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (base / "link.md").symlink_to(base / "notes.md")
    (base / "linkdir").symlink_to(base / "docs")
    (base / "escape").symlink_to(outside / "secret.txt")
    (base / "escapedir").symlink_to(outside)
    os.link(outside / "secret.txt", base / "hardlink.txt")
    os.mkfifo(base / "fifo")
    return base


@pytest.fixture
def fsread(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    tree: Path,
    tmp_path: Path,
) -> Iterator[FsRead]:
    """Enable fs-read on ``tree`` with extra ``key=value`` settings; returns its caller."""
    install(plugins_dir, "fs-read")
    with ExitStack() as stack:

        def start(*settings: str) -> Caller:
            host = stack.enter_context(reference_host(plugins_dir, state_dir, launcher))
            host.discover()
            outcome = host.enable("fs-read", [f"root={tree}", *settings], consent=True)
            assert outcome, outcome.reason
            return Caller(host, "fs-read", "fsread", hidden=(str(tmp_path),))

        yield start


def test_the_capability_is_the_configured_base(fsread: FsRead, tree: Path) -> None:
    caller = fsread()
    info = caller.host.manager.require_plugin("fs-read")
    assert [str(c) for c in info.capabilities] == [f"fs.read:{tree}"]


def test_reads_text_and_binary_files(fsread: FsRead) -> None:
    caller = fsread()
    assert caller("read_file", "notes.md") == "hello\n"
    assert caller("read_file", "./docs//guide.txt") == "guide\n", "'.' and '//' are harmless"
    assert caller("read_file", "utf8.txt") == UTF8
    assert base64.b64decode(caller("read_file_base64", "data.bin")) == BINARY
    assert caller.message("read_file", "data.bin").startswith(
        "NotTextRefused: not UTF-8 text: 'data.bin' at byte 128; read it with read_file_base64"
    )


def test_chunks_follow_next_offset_and_never_split_a_character(fsread: FsRead) -> None:
    caller = fsread()
    first = caller("read_file_chunk", "utf8.txt", 0, 2)
    assert first == {
        "path": "utf8.txt",
        "offset": 0,
        "size": 9,
        "content": "h",
        "length": 1,
        "next_offset": 1,
        "eof": False,
    }, "the chunk stops before the 2-byte 'é' instead of splitting it"
    text, offset = "", 0
    while True:
        chunk = caller("read_file_chunk", "utf8.txt", offset, 3)
        text += chunk["content"]
        offset = chunk["next_offset"]
        if chunk["eof"]:
            break
    assert (text, offset) == (UTF8, 9)
    tail = caller("read_file_chunk", "utf8.txt", 9)
    assert (tail["content"], tail["length"], tail["eof"]) == ("", 0, True)
    beyond = caller("read_file_chunk", "utf8.txt", 100, 5)
    assert (beyond["content"], beyond["next_offset"], beyond["eof"]) == ("", 100, True)
    assert caller.message("read_file_chunk", "utf8.txt", 2, 5).startswith(
        "NotTextRefused: not UTF-8 text: 'utf8.txt' at byte 2;"
    ), "an offset inside a character"
    assert caller.message("read_file_chunk", "utf8.txt", 6, 1) == (
        "InvalidArgumentRefused: invalid length: the character at byte 6 of 'utf8.txt' is "
        "longer than the 1 bytes asked for; ask for at least 4"
    )


def test_binary_chunks(fsread: FsRead) -> None:
    caller = fsread()
    chunk = caller("read_file_chunk_base64", "data.bin", 1000, 100)
    assert base64.b64decode(chunk.pop("content")) == BINARY[1000:1024]
    assert chunk == {
        "path": "data.bin",
        "offset": 1000,
        "size": 1024,
        "length": 24,
        "next_offset": 1024,
        "eof": True,
    }


def test_size_limits_per_call_and_per_file(fsread: FsRead, tree: Path) -> None:
    (tree / "big.txt").write_bytes(b"x" * 3000)
    (tree / "huge.txt").write_bytes(b"y" * 5000)
    caller = fsread("max_read_kb=2", "max_file_kb=4")
    assert caller.message("read_file", "big.txt") == (
        "TooLargeRefused: too large: 'big.txt' is 3000 bytes, above the 2 KiB one call returns "
        "(max_read_kb); read it in pieces with read_file_chunk"
    )
    first = caller("read_file_chunk", "big.txt")
    assert (first["length"], first["next_offset"], first["eof"]) == (2048, 2048, False), (
        "a chunk without a length, or a longer one, is cut to max_read_kb"
    )
    assert caller("read_file_chunk", "big.txt", 2048, 10_000)["length"] == 952
    for function in ("read_file", "read_file_chunk", "read_file_base64"):
        assert caller.message(function, "huge.txt") == (
            "TooLargeRefused: too large: 'huge.txt' is 5000 bytes, above the 4 KiB this plugin "
            "reads (max_file_kb)"
        )


def test_list_dir_leaves_out_dotfiles_and_shows_links_as_links(fsread: FsRead) -> None:
    caller = fsread()
    listing = caller("list_dir", ".")
    assert listing == {
        "path": ".",
        "entries": [
            {"name": "data.bin", "type": "file", "size": 1024},
            {"name": "docs", "type": "directory"},
            {"name": "escape", "type": "symlink"},
            {"name": "escapedir", "type": "symlink"},
            {"name": "fifo", "type": "other"},
            {"name": "hardlink.txt", "type": "file", "size": 11},
            {"name": "link.md", "type": "symlink"},
            {"name": "linkdir", "type": "symlink"},
            {"name": "notes.md", "type": "file", "size": 6},
            {"name": "utf8.txt", "type": "file", "size": 9},
        ],
        "truncated": False,
    }
    assert caller("list_dir", "docs")["entries"] == [
        {"name": "guide.txt", "type": "file", "size": 6}
    ]
    short = fsread("max_list_entries=2")("list_dir", ".")
    assert [e["name"] for e in short["entries"]] == ["data.bin", "docs"]
    assert short["truncated"] is True


def test_stat_has_type_and_size_and_no_times(fsread: FsRead) -> None:
    caller = fsread()
    assert caller("stat", "notes.md") == {"path": "notes.md", "type": "file", "size": 6}
    assert caller("stat", "docs") == {"path": "docs", "type": "directory"}
    assert caller("stat", ".") == {"path": ".", "type": "directory"}
    assert caller("stat", "fifo") == {"path": "fifo", "type": "other"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", "InvalidPathRefused: invalid path: must be a non-empty string"),
        ("a\0b", "InvalidPathRefused: invalid path: contains a NUL character"),
        (
            "x" * 4097,
            "InvalidPathRefused: invalid path: 4097 characters, more than the 4096 allowed",
        ),
        (
            "/etc/hostname",
            "InvalidPathRefused: invalid path: absolute paths are not accepted; give a path "
            "relative to the base directory, such as 'notes/todo.md'",
        ),
        ("../outside/secret.txt", "AccessRefused: access denied: '..': '..' (path "),
        ("docs/../notes.md", "AccessRefused: access denied: 'docs/..': '..' (path traversal)"),
        (".env", "AccessRefused: access denied: '.env': dotfiles are not permitted"),
        (
            "docs/.git/config",
            "AccessRefused: access denied: 'docs/.git': dotfiles are not permitted",
        ),
        (
            "link.md",
            "AccessRefused: access denied: 'link.md' is a symbolic link; symlinks are not "
            "permitted",
        ),
        ("escape", "AccessRefused: access denied: 'escape' is a symbolic link;"),
        ("linkdir/guide.txt", "AccessRefused: access denied: 'linkdir' is a symbolic link;"),
        ("escapedir/secret.txt", "AccessRefused: access denied: 'escapedir' is a symbolic link"),
        (
            "hardlink.txt",
            "AccessRefused: access denied: 'hardlink.txt' has 2 hard links; hard-linked files "
            "are not permitted",
        ),
        ("fifo", "AccessRefused: access denied: 'fifo' is not a regular file (other)"),
        ("missing.md", "NotFoundRefused: not found: 'missing.md'"),
        ("docs/missing/x", "NotFoundRefused: not found: 'docs/missing'"),
        ("docs", "IsADirectoryRefused: is a directory: 'docs'"),
        (".", "IsADirectoryRefused: is a directory: '.'"),
        ("notes.md/x", "NotADirectoryRefused: not a directory: 'notes.md'"),
    ],
)
def test_the_jail_refuses_with_a_relative_message(fsread: FsRead, path: str, expected: str) -> None:
    caller = fsread()
    for function in ("read_file", "read_file_base64", "read_file_chunk"):
        assert caller.message(function, path).startswith(expected)


@pytest.mark.parametrize(
    ("function", "path", "expected"),
    [
        ("stat", "link.md", "AccessRefused: access denied: 'link.md' is a symbolic link"),
        ("stat", "linkdir/guide.txt", "AccessRefused: access denied: 'linkdir' is a symbolic"),
        ("stat", ".env", "AccessRefused: access denied: '.env': dotfiles are not permitted"),
        ("stat", "../base", "AccessRefused: access denied: '..': '..' (path traversal)"),
        ("stat", "missing", "NotFoundRefused: not found: 'missing'"),
        ("list_dir", "linkdir", "AccessRefused: access denied: 'linkdir' is a symbolic link"),
        ("list_dir", "escapedir", "AccessRefused: access denied: 'escapedir' is a symbolic"),
        ("list_dir", "docs/.git", "AccessRefused: access denied: 'docs/.git': dotfiles are"),
        ("list_dir", "notes.md", "NotADirectoryRefused: not a directory: 'notes.md'"),
        ("list_dir", "/", "InvalidPathRefused: invalid path: absolute paths are not accepted"),
    ],
)
def test_stat_and_list_dir_use_the_same_jail(
    fsread: FsRead, function: str, path: str, expected: str
) -> None:
    assert fsread().message(function, path).startswith(expected)


def test_arguments_are_checked_against_the_declared_schema(fsread: FsRead) -> None:
    caller = fsread()
    with pytest.raises(LifecycleError, match="fs-read"):
        caller("read_file", 42)
    with pytest.raises(LifecycleError, match="fs-read"):
        caller("read_file_chunk", "notes.md", -1)


def test_refusals_in_a_row_leave_the_breaker_closed_and_failures_count(
    fsread: FsRead, tree: Path
) -> None:
    caller = fsread("max_file_kb=1")
    (tree / "big.txt").write_bytes(b"x" * 2000)
    refusals = [
        ("InvalidPathRefused", "read_file", ("/etc/hostname",)),
        ("AccessRefused", "read_file", ("../outside/secret.txt",)),
        ("AccessRefused", "read_file", (".env",)),
        ("AccessRefused", "read_file", ("escape",)),
        ("AccessRefused", "read_file", ("hardlink.txt",)),
        ("AccessRefused", "stat", ("link.md",)),
        ("NotFoundRefused", "read_file", ("missing.md",)),
        ("IsADirectoryRefused", "read_file", ("docs",)),
        ("NotADirectoryRefused", "list_dir", ("notes.md",)),
        ("NameTooLongRefused", "read_file", ("n" * 256,)),
        ("TooLargeRefused", "read_file", ("big.txt",)),
        ("NotTextRefused", "read_file", ("data.bin",)),
        ("InvalidArgumentRefused", "read_file_chunk", ("utf8.txt", 6, 1)),
    ]
    assert len(refusals) > Policy().failure_threshold
    for exc_type, function, args in refusals:
        assert caller.refused(function, *args).exc_type == exc_type, (function, args)
    assert caller.message("read_file", "n" * 256) == (
        f"NameTooLongRefused: cannot access '{'n' * 197}...': File name too long"
    )
    breaker = caller.host.breaker("fs-read")
    assert (breaker.failures, breaker.closed) == (0, True)
    assert caller("read_file", "notes.md") == "hello\n"
    # A base directory the plugin cannot open is no caller's mistake: every call fails
    # until the administrator fixes it, which is what the breaker is for.
    tree.chmod(0)
    try:
        for _ in range(Policy().failure_threshold):
            assert caller.message("read_file", "notes.md", refusal=False) == (
                "OSError: the base directory cannot be opened (Permission denied); check the "
                "plugin's root setting"
            )
    finally:
        tree.chmod(0o755)
    assert not breaker.closed
    with pytest.raises(CircuitOpenError):
        caller("read_file", "notes.md")
