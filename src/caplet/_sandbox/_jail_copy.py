"""The plugin's snapshot copied into the jail: a private read-only tmpfs, its hash checked.

Part of the jail's mounts (:mod:`caplet._sandbox._jail_fs`, step 3 of
:mod:`caplet._sandbox._jail`): the copy is taken by pid 1 from the
snapshot the host verified, before any plugin code exists, leaving out what
a tree hash leaves out; a copy that is not the approved tree refuses the
start.
"""

from __future__ import annotations

import os
import stat

from caplet._errors import SandboxError
from caplet._sandbox._jail_fs import _make_mountpoint, remount_flags
from caplet._sandbox._jail_model import Mount, Step, fail
from caplet._syscall import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, mount
from caplet._tree_format import EXCLUDED_DIRS, SIGNATURE_FILE, entry_header, new_digest, tree_digest

__all__ = [
    "copy_grant",
    "copy_hash",
]


def copy_grant(target: str, entry: Mount) -> None:
    """Copy the tree of ``entry.fd`` into a fresh tmpfs at ``target``, then seal it read-only.

    Used for the plugin's snapshot: a bind mount would show the snapshot's
    host path as its root in /proc/self/mountinfo (issue 13, point 7), a
    private copy shows ``/``. The copy is taken from the snapshot the host
    verified, by this process, before any plugin code exists. Modes keep
    their read and execute bits only (never write, set-uid or set-gid).
    Sealed ``noexec``: no file of a plugin is mapped as code (the danger
    gate refuses native libraries in a plugin tree, so none needs to be), and
    an ELF file shipped under another name (``helper.dat``) is not run by the
    approved program's loader either (red team, round 4: ``ld.so
    /plugin/helper.dat`` ran a shipped ``id`` on an approval of
    ``proc.exec:true``).

    With ``entry.content_hash`` the source is the enable's own snapshot,
    which the host no longer copies for each start (~0.3 ms of file
    creation on the state directory's disk, and its removal): the copy is
    hashed here, read-only already, and a copy that is not the approved
    tree refuses the start before any plugin code runs (issue 13, points 4
    and 5: what the worker imports is what was approved). Nothing the hash
    leaves out (VCS folders, ``__pycache__``, the signature file) is copied:
    a byte-code file planted there would be imported unhashed.
    """
    try:
        _make_mountpoint(target, directory=True)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        source = os.open(f"/proc/self/fd/{entry.fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            destination = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                _copy_tree(source, destination)
                os.fchmod(destination, stat.S_IMODE(os.fstat(source).st_mode) & 0o555)
            finally:
                os.close(destination)
        finally:
            os.close(source)
        mount(None, target, None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        raise fail(Step.GRANT, exc, entry.path) from exc
    remount_flags(target, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, Step.GRANT, entry.path)
    if entry.content_hash:
        _verify_copy(target, entry)


def copy_hash(root: str) -> str:
    """The tree hash of the copy at ``root`` (:mod:`caplet._tree_format`'s encoding).

    The copy holds directories and regular files only, and nothing the hash
    leaves out (:func:`_copy_tree`), so every file counts. Not the trust
    layer's walk: pid 1 becomes the worker, which must hold no host class.
    """
    files: list[tuple[bytes, str, int, int]] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        with os.scandir(os.path.join(root, relative) if relative else root) as listing:  # noqa: PTH118
            for item in listing:
                name = f"{relative}/{item.name}" if relative else item.name
                info = item.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(name)
                else:
                    files.append((name.encode("utf-8"), name, info.st_mode, info.st_size))
    digest = new_digest()
    for _, name, mode, size in sorted(files):
        digest.update(entry_header(name, mode, size))
        fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # noqa: PTH118
        try:
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
        finally:
            os.close(fd)
    return tree_digest(digest)


def _verify_copy(target: str, entry: Mount) -> None:
    """Refuse unless the read-only copy at ``target`` has the tree hash ``entry.content_hash``."""
    try:
        found = copy_hash(target)
    except (OSError, UnicodeEncodeError) as exc:
        raise SandboxError(
            f"namespace jail: the plugin's snapshot {entry.path} cannot be verified ({exc}); "
            "nothing of it was loaded; disable and enable the plugin again"
        ) from exc
    if found != entry.content_hash:
        raise SandboxError(
            f"namespace jail: the plugin's snapshot {entry.path} changed after it was "
            f"approved (approved hash {entry.content_hash}, its copy's {found}); nothing of "
            "it was loaded; disable and enable the plugin again (its snapshot is taken afresh)"
        )


#: Most bytes one sendfile(2) call moves (its own limit is about 2 GiB).
_COPY_CHUNK = 1 << 30


def _copy_tree(source: int, destination: int, *, top: bool = True) -> None:
    """Copy regular files and directories from directory fd ``source`` into ``destination``,
    leaving out what a tree hash leaves out (:func:`caplet._trust._hashing.list_tree`)."""
    for entry in os.scandir(source):
        if entry.name in EXCLUDED_DIRS or (top and entry.name == SIGNATURE_FILE):
            continue  # never in a snapshot the host made; never imported unhashed
        info = entry.stat(follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode) & 0o555
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(entry.name, 0o700, dir_fd=destination)
            inner_source = os.open(
                entry.name,
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=source,
            )
            try:
                inner = os.open(
                    entry.name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=destination,
                )
                try:
                    _copy_tree(inner_source, inner, top=False)
                    os.fchmod(inner, mode)
                finally:
                    os.close(inner)
            finally:
                os.close(inner_source)
        elif stat.S_ISREG(info.st_mode):
            reader = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
            try:
                writer = os.open(
                    entry.name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=destination,
                )
                try:
                    offset, size = 0, os.fstat(reader).st_size
                    while offset < size:
                        sent = os.sendfile(writer, reader, offset, min(size - offset, _COPY_CHUNK))
                        if sent == 0:
                            break  # shrank: not the sealed snapshot (no worker writes it)
                        offset += sent
                    os.fchmod(writer, mode)
                finally:
                    os.close(writer)
            finally:
                os.close(reader)
