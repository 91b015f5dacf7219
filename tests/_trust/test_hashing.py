"""The plugin tree hash: what it covers, what it skips, and where it fails closed."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from caplet._errors import PluginTreeError
from caplet._trust._hashing import (
    HASH_PREFIX,
    MAX_DEPTH,
    TreeEntry,
    hash_entries,
    hashed_mode,
    is_tree_hash,
    list_tree,
    tree_hash,
)


def write(root: Path, rel: str, data: bytes = b"", mode: int = 0o644) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    write(root, "caplet.toml", b'name = "demo"\n')
    write(root, "demo/__init__.py", b"x = 1\n")
    write(root, "demo/tool.sh", b"#!/bin/sh\n", mode=0o755)
    return root


def reference_hash(files: list[tuple[str, int, bytes]]) -> str:
    """The encoding the brief specifies, written out independently."""
    digest = hashlib.sha256(b"caplet-tree-v1\0")
    for path, mode, data in sorted(files, key=lambda f: f[0].encode("utf-8")):
        encoded = path.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
        digest.update(mode.to_bytes(4, "big") + len(data).to_bytes(8, "big") + data)
    return "sha256-" + digest.hexdigest()


# -- the encoding ------------------------------------------------------------------


def test_hash_matches_the_specified_encoding(plugin: Path) -> None:
    expected = reference_hash(
        [
            ("caplet.toml", 0o644, b'name = "demo"\n'),
            ("demo/__init__.py", 0o644, b"x = 1\n"),
            ("demo/tool.sh", 0o755, b"#!/bin/sh\n"),
        ]
    )
    assert tree_hash(plugin) == expected


def test_hash_is_stable_across_releases(tmp_path: Path) -> None:
    # A golden value: changing the encoding silently would revoke every approval.
    write(tmp_path, "a.py", b"print('a')\n")
    write(tmp_path, "pkg/b.py", b"", mode=0o700)
    expected = "sha256-1797e29fdb527c1306323b71bf883bf156d5f5aeb7b6ae5cc9dfbbe1eea600e1"
    assert tree_hash(tmp_path) == expected
    assert reference_hash([("a.py", 0o644, b"print('a')\n"), ("pkg/b.py", 0o755, b"")]) == expected


def test_hash_format(plugin: Path) -> None:
    value = tree_hash(plugin)
    assert value.startswith(HASH_PREFIX)
    assert is_tree_hash(value)
    assert tree_hash(plugin) == value


@pytest.mark.parametrize(
    "text",
    ["", "sha256-", "sha256-" + "0" * 63, "sha256-" + "g" * 64, "sha1-" + "0" * 64, "0" * 64],
)
def test_is_tree_hash_rejects(text: str) -> None:
    assert not is_tree_hash(text)


def test_entries_sorted_by_utf8_bytes(tmp_path: Path) -> None:
    for name in ["b.py", "a/z.py", "a.py", "B.py", "é.py", "a-b.py"]:
        write(tmp_path, name)
    paths = [e.path for e in list_tree(tmp_path)]
    assert paths == sorted(paths, key=lambda p: p.encode("utf-8"))
    # '.' (0x2e) sorts before '/' (0x2f), and upper case before lower case.
    assert paths == ["B.py", "a-b.py", "a.py", "a/z.py", "b.py", "é.py"]


def test_entries_record_mode_and_size(plugin: Path) -> None:
    assert list_tree(plugin) == [
        TreeEntry("caplet.toml", 0o644, 14),
        TreeEntry("demo/__init__.py", 0o644, 6),
        TreeEntry("demo/tool.sh", 0o755, 10),
    ]


# -- what changes the hash, and what does not ----------------------------------------


def test_moving_a_byte_between_files_changes_the_hash(tmp_path: Path) -> None:
    write(tmp_path, "a.py", b"ab")
    write(tmp_path, "b.py", b"c")
    before = tree_hash(tmp_path)
    write(tmp_path, "a.py", b"a")
    write(tmp_path, "b.py", b"bc")
    assert tree_hash(tmp_path) != before


def test_rename_changes_the_hash(plugin: Path) -> None:
    before = tree_hash(plugin)
    (plugin / "demo" / "__init__.py").rename(plugin / "demo" / "other.py")
    assert tree_hash(plugin) != before


def test_chmod_plus_x_changes_the_hash(plugin: Path) -> None:
    before = tree_hash(plugin)
    (plugin / "caplet.toml").chmod(0o744)
    assert tree_hash(plugin) != before


def test_non_exec_permission_bits_do_not_change_the_hash(plugin: Path) -> None:
    # Only the execute bit is hashed, so the read-only snapshot and another
    # machine's umask hash the same as the source.
    before = tree_hash(plugin)
    (plugin / "caplet.toml").chmod(0o444)
    (plugin / "demo" / "tool.sh").chmod(0o500)
    assert tree_hash(plugin) == before
    assert hashed_mode(0o444) == 0o644
    assert hashed_mode(0o500) == 0o755


def test_added_empty_file_changes_the_hash(plugin: Path) -> None:
    before = tree_hash(plugin)
    write(plugin, "demo/empty.py")
    assert tree_hash(plugin) != before


def test_content_change_changes_the_hash(plugin: Path) -> None:
    before = tree_hash(plugin)
    write(plugin, "demo/__init__.py", b"x = 2\n")
    assert tree_hash(plugin) != before


def test_dotfiles_count(plugin: Path) -> None:
    before = tree_hash(plugin)
    write(plugin, ".env", b"TOKEN=1\n")
    assert ".env" in [e.path for e in list_tree(plugin)]
    assert tree_hash(plugin) != before


@pytest.mark.parametrize(
    "rel",
    [".git/HEAD", "sub/.hg/x", ".svn/x", ".bzr/x", "_darcs/x", ".jj/x", "a/b/__pycache__/m.pyc"],
)
def test_vcs_and_bytecode_folders_are_skipped(plugin: Path, rel: str) -> None:
    before = tree_hash(plugin)
    write(plugin, rel, b"anything")
    assert tree_hash(plugin) == before


def test_a_file_named_like_a_vcs_folder_counts(plugin: Path) -> None:
    before = tree_hash(plugin)
    write(plugin, ".git", b"gitdir: elsewhere\n")
    assert tree_hash(plugin) != before


def test_symlink_inside_excluded_folder_is_ignored(plugin: Path, tmp_path: Path) -> None:
    before = tree_hash(plugin)
    (plugin / ".git").mkdir()
    (plugin / ".git" / "link").symlink_to(tmp_path)
    assert tree_hash(plugin) == before


# -- failing closed --------------------------------------------------------------------


def test_symlink_to_file_is_refused(plugin: Path, tmp_path: Path) -> None:
    secret = write(tmp_path, "secret.txt", b"s")
    (plugin / "demo" / "link.py").symlink_to(secret)
    with pytest.raises(PluginTreeError) as info:
        tree_hash(plugin)
    message = str(info.value)
    assert str(plugin) in message
    assert "'demo/link.py' is a symbolic link" in message
    assert "replace it with a copy of the file" in message


def test_symlink_to_directory_is_refused(plugin: Path, tmp_path: Path) -> None:
    (plugin / "vendor").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(PluginTreeError, match=r"'vendor' is a symbolic link"):
        list_tree(plugin)


def test_dangling_symlink_is_refused(plugin: Path) -> None:
    (plugin / "gone.py").symlink_to(plugin / "nowhere")
    with pytest.raises(PluginTreeError, match=r"'gone.py' is a symbolic link"):
        list_tree(plugin)


def test_symlinked_root_is_refused(plugin: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(plugin, target_is_directory=True)
    with pytest.raises(PluginTreeError) as info:
        tree_hash(link)
    assert f"plugin directory {link} is a symbolic link" in str(info.value)
    assert "replace the link with a copy" in str(info.value)


def test_fifo_is_refused(plugin: Path) -> None:
    os.mkfifo(plugin / "demo" / "pipe")
    with pytest.raises(PluginTreeError) as info:
        tree_hash(plugin)
    assert "'demo/pipe' is not a regular file or directory" in str(info.value)
    assert "remove it from the plugin" in str(info.value)


def test_socket_is_refused(plugin: Path) -> None:
    os.mknod(plugin / "sock", stat.S_IFSOCK | 0o600)
    with pytest.raises(PluginTreeError, match=r"'sock' is not a regular file or directory"):
        list_tree(plugin)


def test_non_utf8_name_is_refused(plugin: Path) -> None:
    fd = os.open(os.fsencode(plugin) + b"/bad\xff.py", os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    with pytest.raises(PluginTreeError) as info:
        tree_hash(plugin)
    assert "'bad\\\\xff.py' is not valid UTF-8" in str(info.value)
    assert "rename it to a UTF-8 name" in str(info.value)


def test_newline_in_name_is_refused(plugin: Path) -> None:
    write(plugin, "evil\nname.py")
    with pytest.raises(PluginTreeError) as info:
        list_tree(plugin)
    assert "'evil\\nname.py' contains a newline or NUL" in str(info.value)
    assert "rename it" in str(info.value)


def test_too_many_files(plugin: Path) -> None:
    assert len(list_tree(plugin, max_files=3)) == 3
    with pytest.raises(PluginTreeError) as info:
        list_tree(plugin, max_files=2)
    assert f"plugin directory {plugin} holds more than 2 files" in str(info.value)
    assert "remove generated or vendored files" in str(info.value)


def test_too_many_bytes(plugin: Path) -> None:
    assert tree_hash(plugin, max_bytes=30) == tree_hash(plugin)
    with pytest.raises(PluginTreeError) as info:
        tree_hash(plugin, max_bytes=29)
    assert "holds more than 29 bytes" in str(info.value)
    assert "remove large data files" in str(info.value)


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(PluginTreeError) as info:
        tree_hash(tmp_path / "absent")
    assert f"plugin directory {tmp_path / 'absent'} does not exist" in str(info.value)


def test_root_is_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "file.py")
    with pytest.raises(PluginTreeError, match="is not a directory"):
        tree_hash(path)


@pytest.mark.usefixtures("obey_file_permissions")
def test_unreadable_file(plugin: Path) -> None:
    (plugin / "demo" / "__init__.py").chmod(0)
    with pytest.raises(PluginTreeError) as info:
        tree_hash(plugin)
    assert isinstance(info.value.__cause__, PermissionError)
    assert "cannot read 'demo/__init__.py'" in str(info.value)
    assert "chmod u+r" in str(info.value)


@pytest.mark.usefixtures("obey_file_permissions")
def test_unreadable_directory(plugin: Path) -> None:
    (plugin / "demo").chmod(0)
    try:
        with pytest.raises(PluginTreeError) as info:
            list_tree(plugin)
    finally:
        (plugin / "demo").chmod(0o755)
    assert isinstance(info.value.__cause__, PermissionError)
    assert "cannot list 'demo'" in str(info.value)


# -- files changing under the hasher ------------------------------------------------------


def test_file_grown_after_listing(plugin: Path) -> None:
    entries = list_tree(plugin)
    write(plugin, "demo/__init__.py", b"x = 1\nmore\n")
    with pytest.raises(PluginTreeError) as info:
        hash_entries(plugin, entries)
    assert "'demo/__init__.py' changed while being hashed; retry" in str(info.value)


def test_file_shrunk_after_listing(plugin: Path) -> None:
    entries = list_tree(plugin)
    write(plugin, "caplet.toml", b"")
    with pytest.raises(PluginTreeError, match=r"'caplet.toml' changed while being hashed"):
        hash_entries(plugin, entries)


def test_file_replaced_by_symlink_after_listing(plugin: Path, tmp_path: Path) -> None:
    entries = list_tree(plugin)
    target = write(tmp_path, "outside.py", b"x = 1\n")
    (plugin / "demo" / "__init__.py").unlink()
    (plugin / "demo" / "__init__.py").symlink_to(target)
    with pytest.raises(PluginTreeError, match="changed while being hashed"):
        hash_entries(plugin, entries)


def test_directory_replaced_by_symlink_after_listing(plugin: Path, tmp_path: Path) -> None:
    entries = list_tree(plugin)
    outside = tmp_path / "outside"
    (plugin / "demo").rename(outside)
    (plugin / "demo").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PluginTreeError, match="changed while being hashed"):
        hash_entries(plugin, entries)


def test_file_replaced_by_fifo_after_listing(plugin: Path) -> None:
    entries = list_tree(plugin)
    (plugin / "caplet.toml").unlink()
    os.mkfifo(plugin / "caplet.toml")
    with pytest.raises(PluginTreeError, match=r"'caplet.toml' changed while being hashed"):
        hash_entries(plugin, entries)


def test_exec_bit_changed_after_listing(plugin: Path) -> None:
    entries = list_tree(plugin)
    (plugin / "demo" / "tool.sh").chmod(0o644)
    with pytest.raises(PluginTreeError, match=r"'demo/tool.sh' changed while being hashed"):
        hash_entries(plugin, entries)


def _nest(root: Path, depth: int, name: str = "a") -> str:
    """``depth`` folders one inside the other under ``root`` (made relative to each
    other: the absolute path of the deepest may pass PATH_MAX); returns its path."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        data = os.open("x.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(data, b"x = 1\n")
        os.close(data)
    finally:
        os.close(fd)
    return "/".join([name] * depth)


def _unnest(root: Path, depth: int, name: str = "a") -> None:
    """Remove what :func:`_nest` made, deepest first: ``shutil.rmtree`` (and so
    pytest's clean-up of old temporary folders) recurses once per level."""
    for level in range(depth, 0, -1):
        folder = root.joinpath(*[name] * level)
        (folder / "x.py").unlink(missing_ok=True)
        folder.rmdir()


def test_a_tree_nested_too_deep_is_refused_naming_the_folder(tmp_path: Path) -> None:
    # attack10: 1,100 nested folders hashed fine, then the snapshot's
    # mkdir(parents=True) recursed past Python's limit: RecursionError out of
    # audit, approve and enable (the CLI's "internal error", exit 70).
    root = tmp_path / "deep"
    root.mkdir()
    (root / "plugin.py").write_text("x = 1\n", encoding="utf-8")
    _nest(root, MAX_DEPTH)  # at the limit: fine
    assert len(list_tree(root)) == 2
    deeper = tmp_path / "deeper"
    deeper.mkdir()
    _nest(deeper, 1100)
    try:
        with pytest.raises(PluginTreeError) as caught:
            list_tree(deeper)
        message = str(caught.value)
        assert f"nested more than {MAX_DEPTH} folders deep" in message, message
        assert "'" + "/".join(["a"] * (MAX_DEPTH + 1)) + "'" in message, message
        with pytest.raises(PluginTreeError, match="folders deep"):
            tree_hash(deeper)
    finally:
        _unnest(deeper, 1100)


def test_folders_count_toward_the_file_limit(tmp_path: Path) -> None:
    # Empty folders held nothing the limits counted: a tree of a million of
    # them was walked whole by every discovery.
    root = tmp_path / "wide"
    root.mkdir()
    for index in range(12):
        (root / f"d{index}").mkdir()
    with pytest.raises(PluginTreeError, match="more than 10 folders"):
        list_tree(root, max_files=10)
    assert list_tree(root, max_files=12) == []
