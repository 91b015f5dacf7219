"""Load-time verification: a private, read-only snapshot (design.md layer 9).

Checking the source tree's hash and then importing from the source leaves a
window in which the files can change (a time-of-check/time-of-use race). So
the tree is copied, once, into a fresh directory only this user can reach,
the copy is made read-only, and the *copy* is hashed: what was checked is
exactly what will be loaded, and nobody else can write to it in between.

The copy is hashed as it is written, from the very bytes written (each
file created new, ``O_EXCL``, in a directory made for this copy, mode
``0700``): reading it back would only read what this process just wrote,
which nothing else can have changed, and cost a second pass over the tree
(~0.06 ms of each of an enable's two snapshots for a small plugin).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from caplet._errors import PluginTreeError, StoreError
from caplet._trust._hashing import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    TreeDigest,
    is_executable,
    list_tree,
    open_entry,
    read_entry,
)

__all__ = ["Snapshot", "make_snapshot", "remove_snapshot"]

_FILE_MODE_RO = 0o444
_FILE_MODE_RX = 0o555
_DIR_MODE_RO = 0o555
_FILE_MODE_RW = 0o644
_FILE_MODE_RWX = 0o755
_DIR_MODE_RW = 0o755
_PRIVATE_DIR = 0o700
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A read-only copy of a plugin tree and the hash of that copy.

    ``container`` is the private directory made to hold ``path`` when the
    copy keeps the plugin's own folder name (``named``): removing the
    snapshot removes it too.
    """

    path: Path
    content_hash: str
    container: Path | None = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_tree(
    source: Path, dest: Path, *, max_files: int, max_bytes: int, read_only: bool = True
) -> tuple[set[Path], str]:
    """Copy every hashable file of *source* into *dest*; return the directories made and
    the tree hash of the copy (of the bytes written, in :func:`list_tree`'s order)."""
    made: set[Path] = set()
    digest = TreeDigest()
    for entry in list_tree(source, max_files=max_files, max_bytes=max_bytes):
        target = dest.joinpath(*entry.path.split("/"))
        parent = target.parent
        if parent != dest and not parent.is_dir():
            # Only directories that hold files are recreated: an empty
            # directory carries no content the hash could pin.
            parent.mkdir(mode=_PRIVATE_DIR, parents=True)
            made.update(p for p in (parent, *parent.parents) if dest in p.parents)
        if read_only:
            final_mode = _FILE_MODE_RX if is_executable(entry.mode) else _FILE_MODE_RO
        else:
            final_mode = _FILE_MODE_RWX if is_executable(entry.mode) else _FILE_MODE_RW
        digest.entry(entry)
        with open_entry(source, entry) as src_fd:
            out = os.open(target, _WRITE_FLAGS, 0o600)
            try:
                for chunk in read_entry(source, entry, src_fd):
                    _write_all(out, chunk)
                    digest.update(chunk)
                os.fchmod(out, final_mode)
            finally:
                os.close(out)
    return made, digest.hexdigest()


def make_snapshot(
    source: Path,
    parent: Path,
    *,
    expected_hash: str | None = None,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    read_only: bool = True,
    named: bool = False,
) -> Snapshot:
    """Copy the plugin at *source* into a new private read-only directory under *parent*.

    The copy follows the rules of :func:`~caplet._trust._hashing.list_tree`
    (no symlinks, no special files, VCS folders and ``__pycache__`` left
    out). Files become ``0o444`` (``0o555`` if executable), directories
    ``0o555``, and the copy is hashed. When *expected_hash* is given and the
    copy's hash differs, the copy is removed and :class:`PluginTreeError`
    says the plugin changed since it was approved.

    ``read_only=False`` makes an ordinary copy instead (files ``0o644`` or
    ``0o755``, directories ``0o755``): an update stages the new version this
    way, because the staged copy becomes the plugin folder users edit.

    ``named`` keeps the plugin's folder name (the copy is ``<private
    dir>/<name>``), so that its manifest loads from the copy itself (a
    manifest's ``name`` must equal its folder's).
    """
    try:
        parent.mkdir(mode=_PRIVATE_DIR, parents=True, exist_ok=True)
        # mkdtemp creates the directory with mode 0700 (tempfile docs), so
        # no other user can race us while it is still writable.
        container = None
        if named:
            container = Path(tempfile.mkdtemp(prefix="snapshot-", dir=parent))
            path = container / source.name
            path.mkdir(mode=_PRIVATE_DIR)
        else:
            path = Path(tempfile.mkdtemp(prefix=f"{source.name}-", dir=parent))
    except OSError as exc:
        raise PluginTreeError(
            f"cannot create a snapshot of plugin {source.name!r} under {parent} "
            f"({exc.strerror}); make that directory writable or choose another state dir"
        ) from exc
    try:
        try:
            made, content_hash = _copy_tree(
                source, path, max_files=max_files, max_bytes=max_bytes, read_only=read_only
            )
            for directory in [*made, path]:
                directory.chmod(_DIR_MODE_RO if read_only else _DIR_MODE_RW)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                # A full state disk is a state error (exit 3), like any other write there.
                raise StoreError(
                    f"{path}: copying plugin {source.name!r} for its snapshot failed: no space "
                    f"left on device; free space on the file system holding {parent} and run "
                    "the command again"
                ) from exc
            raise PluginTreeError(
                f"cannot copy plugin {source.name!r} from {source} into the snapshot "
                f"{path} ({exc.strerror}); check free space and permissions, then retry"
            ) from exc
        if expected_hash is not None and content_hash != expected_hash:
            raise PluginTreeError(
                f"plugin {source.name!r} at {source} changed since it was audited and "
                f"approved: approved hash {expected_hash}, current hash {content_hash}; "
                f"review the change, then re-audit and re-approve it "
                f"(caplet audit {source.name} && caplet approve {source.name})"
            )
    except BaseException:
        remove_snapshot(container or path)
        raise
    return Snapshot(path=path, content_hash=content_hash, container=container)


def _make_writable(top: Path) -> None:
    """Give every directory under *top* back its owner write bit, never following links."""

    # os.fwalk with follow_symlinks=False never descends into a symlink and
    # hands us a descriptor per directory, so fchmod cannot be redirected.
    def fail(exc: OSError) -> None:
        raise exc

    for _dirpath, _dirs, _files, dir_fd in os.fwalk(top, follow_symlinks=False, onerror=fail):
        os.fchmod(dir_fd, _PRIVATE_DIR)


def remove_snapshot(snapshot_or_path: Snapshot | Path) -> None:
    """Remove a snapshot made by :func:`make_snapshot`; removing it twice is fine.

    Symbolic links are never followed (``shutil.rmtree`` uses the
    descriptor-based walk on Linux, ``rmtree.avoids_symlink_attacks``).
    """
    if isinstance(snapshot_or_path, Snapshot):
        path = snapshot_or_path.container or snapshot_or_path.path
    else:
        path = snapshot_or_path
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PluginTreeError(
            f"cannot remove the snapshot {path} ({exc.strerror}); remove it by hand"
        ) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise PluginTreeError(
            f"cannot remove the snapshot {path}: it is not a directory (a symbolic link "
            "or file took its place); caplet will not follow it, inspect and remove it by hand"
        )
    try:
        _make_writable(path)
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PluginTreeError(
            f"cannot remove the snapshot {path} ({exc.strerror}); "
            f"remove it by hand (chmod -R u+w {path} && rm -rf {path})"
        ) from exc
