"""Grant paths resolved once, without links (issue 13, point 2), and who may use them.

Both ways of resolving are tested: openat2(2) with RESOLVE_NO_SYMLINKS and
the component walk used where openat2 is missing; they must agree.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from caplet._sandbox import _resolve
from caplet._sandbox._resolve import (
    GrantPathError,
    access_problem,
    open_no_links,
    open_pinned,
    resolve_no_links,
)

Opener = Callable[[str], int]


@pytest.fixture(params=["openat2", "walk"])
def opener(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Opener:
    if request.param == "walk":
        monkeypatch.setattr(_resolve, "_has_openat2", lambda: False)
    else:
        assert _resolve._has_openat2(), "this kernel has openat2 (Linux >= 5.6)"
    return open_no_links


def test_a_plain_path_resolves_to_its_inode(opener: Opener, tmp_path: Path) -> None:
    target = tmp_path / "data" / "projects"
    target.mkdir(parents=True)
    fd = opener(str(target))
    try:
        assert (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (
            target.stat().st_dev,
            target.stat().st_ino,
        )
    finally:
        os.close(fd)


def test_a_link_anywhere_on_the_path_is_refused_naming_it_and_its_target(
    opener: Opener, tmp_path: Path
) -> None:
    # The red team's move: /data/projects replaced with a link to / by another plugin.
    data = tmp_path / "data"
    data.mkdir()
    (data / "projects").symlink_to("/")
    with pytest.raises(GrantPathError) as info:
        opener(str(data / "projects"))
    message = str(info.value)
    assert f"{str(data / 'projects')!r} passes through a symbolic link" in message
    assert f"{str(data / 'projects')!r} -> '/'" in message
    assert "caplet does not follow links on a granted path" in message
    assert info.value.link == str(data / "projects")
    assert info.value.target == "/"
    # A link higher up is found just the same.
    (tmp_path / "up").symlink_to(data)
    (data / "real").mkdir()
    with pytest.raises(GrantPathError) as higher:
        opener(str(tmp_path / "up" / "real"))
    assert higher.value.link == str(tmp_path / "up")
    assert f"(here: {str(data / 'real')!r})" in str(higher.value)


def test_a_link_flipping_while_the_refusal_is_worded_is_still_a_grant_error(
    opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another plugin with fs.write on the share flips share/sub between a
    # directory and a link in a loop (renameat2 RENAME_EXCHANGE); a red-team
    # loop of enables got OSError: [Errno 22] out of host.enable. Here the
    # flip lands at the moment the error message reads the link a second time.
    share = tmp_path / "share"
    (share / "real").mkdir(parents=True)
    (share / "sub").symlink_to(share / "real")
    reads: list[str] = []
    real_readlink = os.readlink

    def flipping_readlink(path: str, *, dir_fd: int | None = None) -> str:
        reads.append(path)
        if len(reads) == 2:  # the first names the link; the second is realpath's
            (share / "sub").unlink()
            (share / "sub").mkdir()
        return real_readlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "readlink", flipping_readlink)
    with pytest.raises(GrantPathError) as info:
        opener(str(share / "sub" / "inner"))
    assert str(share / "sub") in str(info.value)


def test_a_missing_path_is_one_sentence_with_the_fix(opener: Opener, tmp_path: Path) -> None:
    with pytest.raises(GrantPathError) as info:
        opener(str(tmp_path / "missing" / "deeper"))
    assert str(info.value) == (
        f"{str(tmp_path / 'missing' / 'deeper')!r} does not exist: create it (or correct "
        "the configured path), then enable the plugin again"
    )


def test_proc_magic_links_are_refused_too(opener: Opener) -> None:
    with pytest.raises(GrantPathError):
        opener("/proc/self/root/etc")


def test_a_pinned_grant_replaced_by_another_directory_is_refused(tmp_path: Path) -> None:
    grant = tmp_path / "grant"
    grant.mkdir()
    pinned = resolve_no_links(str(grant))
    assert pinned.is_dir
    os.close(open_pinned(str(grant), pinned.device, pinned.inode))
    grant.rename(tmp_path / "moved")
    grant.mkdir()  # same name, another inode
    with pytest.raises(GrantPathError) as info:
        open_pinned(str(grant), pinned.device, pinned.inode)
    assert "was replaced since the plugin was enabled" in str(info.value)


def test_a_pinned_grant_opens_relative_to_a_directory(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    pinned = resolve_no_links(str(tmp_path / "a" / "b"))
    anchor = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        os.close(open_pinned("a/b", pinned.device, pinned.inode, dir_fd=anchor))
        (tmp_path / "c").symlink_to("a")
        with pytest.raises(GrantPathError):
            open_pinned("c/b", pinned.device, pinned.inode, dir_fd=anchor)
    finally:
        os.close(anchor)


@pytest.mark.parametrize(
    ("mode", "owner", "writable", "problem"),
    [
        (0o755, "other", False, ""),
        (0o700, "other", False, "may not search this directory"),
        (0o755, "other", True, "may not write this directory"),
        (0o700, "self", True, ""),
        (0o070, "group", True, ""),
        (0o705, "group", False, "may not search this directory"),  # group bits decide, not other's
    ],
)
def test_access_is_decided_from_the_mode_bits_as_the_kernel_does(
    tmp_path: Path, mode: int, owner: str, writable: bool, problem: str
) -> None:
    folder = tmp_path / "grant"
    folder.mkdir()
    folder.chmod(mode)
    info = folder.stat()
    uid = info.st_uid if owner == "self" else info.st_uid + 4242
    gid = info.st_gid if owner == "group" else info.st_gid + 4242
    fd = os.open(folder, os.O_PATH)
    try:
        found = access_problem(fd, uid, gid, writable=writable)
    finally:
        os.close(fd)
    if problem:
        assert problem in found
        assert f"(owner {info.st_uid}:{info.st_gid}, mode {mode:04o})" in found
    else:
        assert found == ""


def _acl(*entries: tuple[int, int, int]) -> bytes:
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def test_a_posix_acl_entry_for_the_worker_is_honoured(tmp_path: Path) -> None:
    folder = tmp_path / "grant"
    folder.mkdir()
    folder.chmod(0o700)
    worker = folder.stat().st_uid + 4242
    user_obj, user, group_obj, mask, other = 0x01, 0x02, 0x04, 0x10, 0x20
    try:
        os.setxattr(
            folder,
            "system.posix_acl_access",
            _acl(
                (user_obj, 7, 0), (user, 3, worker), (group_obj, 0, 0), (mask, 7, 0), (other, 0, 0)
            ),
        )
    except OSError as exc:  # pragma: no cover - a file system without ACLs
        pytest.fail(f"the test directory's file system refuses POSIX ACLs: {exc}")
    fd = os.open(folder, os.O_PATH)
    try:
        assert access_problem(fd, worker, worker, writable=True) == ""
        # The mask limits named entries, as in acl(5).
        os.setxattr(
            folder,
            "system.posix_acl_access",
            _acl(
                (user_obj, 7, 0), (user, 3, worker), (group_obj, 0, 0), (mask, 1, 0), (other, 0, 0)
            ),
        )
        assert "may not write" in access_problem(fd, worker, worker, writable=True)
        assert access_problem(fd, worker + 1, worker + 1, writable=False) != ""
    finally:
        os.close(fd)
