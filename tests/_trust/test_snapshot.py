"""Load-time snapshots: private, read-only copies hashed as they are copied."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from caplet._errors import PluginTreeError
from caplet._trust import _snapshot as snapshot_module
from caplet._trust._hashing import list_tree, tree_hash
from caplet._trust._snapshot import Snapshot, make_snapshot, remove_snapshot


def write(root: Path, rel: str, data: bytes = b"", mode: int = 0o644) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    root = tmp_path / "plugins" / "demo"
    write(root, "caplet.toml", b'name = "demo"\n')
    write(root, "demo/__init__.py", b"x = 1\n", mode=0o664)
    write(root, "demo/sub/deep.py", b"y = 2\n")
    write(root, "bin/run", b"#!/bin/sh\n", mode=0o775)
    write(root, ".git/HEAD", b"ref\n")
    write(root, "demo/__pycache__/x.pyc", b"\0")
    (root / "empty").mkdir()
    return root


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    return tmp_path / "run"


def test_snapshot_hash_equals_source_hash(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    assert snap.content_hash == tree_hash(plugin)
    assert snap.content_hash == tree_hash(snap.path)
    assert snap.path.parent == parent


def test_snapshot_copies_exactly_the_hashed_files(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    copied = sorted(str(p.relative_to(snap.path)) for p in snap.path.rglob("*") if p.is_file())
    assert copied == ["bin/run", "caplet.toml", "demo/__init__.py", "demo/sub/deep.py"]
    assert not (snap.path / ".git").exists()
    assert not (snap.path / "demo" / "__pycache__").exists()
    assert not (snap.path / "empty").exists()
    for entry in list_tree(plugin):
        assert (snap.path / entry.path).read_bytes() == (plugin / entry.path).read_bytes()


def test_snapshot_is_read_only(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    assert mode_of(snap.path / "caplet.toml") == 0o444
    assert mode_of(snap.path / "demo" / "__init__.py") == 0o444
    assert mode_of(snap.path / "bin" / "run") == 0o555
    for directory in [snap.path, snap.path / "demo", snap.path / "demo" / "sub", snap.path / "bin"]:
        assert mode_of(directory) == 0o555


def test_parent_is_created_private(plugin: Path, parent: Path) -> None:
    make_snapshot(plugin, parent / "nested")
    assert mode_of(parent / "nested") == 0o700


def test_later_source_changes_do_not_reach_the_snapshot(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    write(plugin, "demo/__init__.py", b"import os\n")
    assert (snap.path / "demo" / "__init__.py").read_bytes() == b"x = 1\n"
    assert tree_hash(snap.path) == snap.content_hash


def test_expected_hash_accepted(plugin: Path, parent: Path) -> None:
    expected = tree_hash(plugin)
    snap = make_snapshot(plugin, parent, expected_hash=expected)
    assert snap.content_hash == expected


def test_changed_plugin_is_refused_and_snapshot_removed(plugin: Path, parent: Path) -> None:
    approved = tree_hash(plugin)
    write(plugin, "demo/__init__.py", b"x = 1  # changed\n")
    current = tree_hash(plugin)
    with pytest.raises(PluginTreeError) as info:
        make_snapshot(plugin, parent, expected_hash=approved)
    message = str(info.value)
    assert "plugin 'demo'" in message
    assert "changed since it was audited and approved" in message
    assert f"approved hash {approved}" in message
    assert f"current hash {current}" in message
    assert "re-audit and re-approve" in message
    assert list(parent.iterdir()) == []


def test_symlink_in_source_is_refused_without_leftovers(
    plugin: Path, parent: Path, tmp_path: Path
) -> None:
    (plugin / "demo" / "link.py").symlink_to(tmp_path / "elsewhere.py")
    with pytest.raises(PluginTreeError, match=r"'demo/link.py' is a symbolic link"):
        make_snapshot(plugin, parent)
    assert list(parent.iterdir()) == []


def test_two_snapshots_are_distinct(plugin: Path, parent: Path) -> None:
    first = make_snapshot(plugin, parent)
    second = make_snapshot(plugin, parent)
    assert first.path != second.path
    assert first.content_hash == second.content_hash


def test_remove_snapshot_is_idempotent(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    remove_snapshot(snap)
    assert not snap.path.exists()
    remove_snapshot(snap)
    remove_snapshot(snap.path)
    assert list(parent.iterdir()) == []


def test_remove_snapshot_accepts_a_path(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    remove_snapshot(snap.path)
    assert not snap.path.exists()


def test_remove_snapshot_does_not_follow_links_inside(
    plugin: Path, parent: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    keep = write(outside, "keep.txt", b"keep")
    outside.chmod(0o755)
    snap = make_snapshot(plugin, parent)
    snap.path.chmod(0o700)
    (snap.path / "escape").symlink_to(outside, target_is_directory=True)
    remove_snapshot(snap)
    assert not snap.path.exists()
    assert keep.read_bytes() == b"keep"
    assert mode_of(outside) == 0o755


def test_remove_snapshot_refuses_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    keep = write(target, "keep.txt", b"keep")
    link = tmp_path / "snap"
    link.symlink_to(target, target_is_directory=True)
    with pytest.raises(PluginTreeError) as info:
        remove_snapshot(Snapshot(path=link, content_hash="sha256-" + "0" * 64))
    assert f"cannot remove the snapshot {link}" in str(info.value)
    assert "will not follow it" in str(info.value)
    assert keep.exists()


@pytest.mark.usefixtures("obey_file_permissions")
def test_snapshot_files_cannot_be_written(plugin: Path, parent: Path) -> None:
    snap = make_snapshot(plugin, parent)
    with pytest.raises(PermissionError):
        (snap.path / "caplet.toml").write_bytes(b"tampered")
    with pytest.raises(PermissionError):
        (snap.path / "new.py").write_bytes(b"")


def test_the_hash_taken_while_copying_is_the_copys_own(tmp_path: Path, parent: Path) -> None:
    # Hashed as written, in list_tree's order: names where a per-directory
    # walk and the sorted path bytes disagree ("a.txt" sorts before "a/b").
    root = tmp_path / "order"
    write(root, "a/b.py", b"b\n")
    write(root, "a.txt", b"t\n")
    write(root, "a-b", b"", mode=0o755)
    write(root, "a/c/d", b"d" * 70_000)
    snap = make_snapshot(root, parent)
    assert snap.content_hash == tree_hash(snap.path) == tree_hash(root)


def test_a_file_rewritten_while_the_snapshot_is_taken_is_refused(
    plugin: Path, parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attack on hashing while copying: the source changes (same size,
    # so no length check sees it) after the walk, before its bytes are read.
    # The hash is of the bytes the copy holds, so the approved hash refuses it.
    approved = tree_hash(plugin)
    written: list[bytes] = []
    real = snapshot_module._write_all

    def write_and_tamper(fd: int, data: bytes) -> None:
        real(fd, data)
        if not written:
            (plugin / "demo" / "sub" / "deep.py").write_bytes(b"y = 3\n")
        written.append(data)

    monkeypatch.setattr(snapshot_module, "_write_all", write_and_tamper)
    with pytest.raises(PluginTreeError, match="changed since it was audited"):
        make_snapshot(plugin, parent, expected_hash=approved)
    assert list(parent.iterdir()) == []
    snap = make_snapshot(plugin, parent)  # without an expected hash: the copy's own
    assert (snap.path / "demo" / "sub" / "deep.py").read_bytes() == b"y = 3\n"
    assert snap.content_hash == tree_hash(snap.path) != approved
