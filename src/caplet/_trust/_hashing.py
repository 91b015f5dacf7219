"""The content hash of a whole plugin tree (design.md section 4, layer 8).

Approval and the cached audit are pinned to one SHA-256 over every file of
the plugin: its relative path, its executable bit, its length and its bytes.
Anything that could change what runs changes the hash: a byte moved between
files, a rename, ``chmod +x``, an added empty file.

The walk fails closed (:class:`~caplet._errors.PluginTreeError`) on anything
it cannot pin down: symbolic links (they could point outside the approved
content), FIFOs, sockets and devices, names that are not UTF-8 or contain a
newline or NUL, trees over the size limits, unreadable entries, and files
that change while they are read.

Only the executable bit of a file's mode enters the hash, as in git's
``100644``/``100755``: the load-time snapshot (:mod:`caplet._trust._snapshot`)
is deliberately read-only, so a hash over the full permission bits could
never match between the source tree and its snapshot, and a different
``umask`` on another machine must not revoke an approval either.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from caplet._errors import PluginTreeError
from caplet._tree_format import (
    EXCLUDED_DIRS,
    HASH_PREFIX,
    SIGNATURE_FILE,
    entry_header,
    hashed_mode,
    is_executable,
    new_digest,
    tree_digest,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "EXCLUDED_DIRS",
    "HASH_PREFIX",
    "MAX_DEPTH",
    "SIGNATURE_FILE",
    "TreeDigest",
    "TreeEntry",
    "hash_entries",
    "hashed_mode",
    "is_executable",
    "is_tree_hash",
    "list_tree",
    "open_entry",
    "read_entry",
    "tree_hash",
    "tree_hash_keeping",
]

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Folders nested deeper than this are refused: no plugin needs them, and
#: every copy of the tree (the snapshot, the jail's) walks them.
MAX_DEPTH = 64

_CHUNK = 1024 * 1024
_HEX_DIGITS = frozenset("0123456789abcdef")
_SHA256_HEX_LEN = 64

# O_NONBLOCK: opening a FIFO that replaced a listed file must not hang the host
# (open(2): "O_NONBLOCK ... the open() returns without waiting"); it has no
# effect on regular files (open(2), "Note that this flag has no effect for
# regular files").
_FILE_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
_DIR_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECTORY


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One regular file of a plugin tree.

    ``path`` is POSIX and relative to the root, ``mode`` is
    ``stat.S_IMODE`` as found on disk and ``size`` the length in bytes.
    """

    path: str
    mode: int
    size: int


def is_tree_hash(text: str) -> bool:
    """True when *text* looks like a value returned by :func:`tree_hash`."""
    if not text.startswith(HASH_PREFIX):
        return False
    digest = text[len(HASH_PREFIX) :]
    return len(digest) == _SHA256_HEX_LEN and set(digest) <= _HEX_DIGITS


def _show(name: str) -> str:
    """A printable form of a file name that may hold undecodable bytes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _check_name(root: Path, rel: str) -> None:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        # os.scandir decodes undecodable bytes as lone surrogates (PEP 383).
        raise PluginTreeError(
            f"plugin directory {root}: the file name {_show(rel)!r} is not valid UTF-8; "
            "rename it to a UTF-8 name"
        ) from None
    if "\n" in rel or "\0" in rel:
        raise PluginTreeError(
            f"plugin directory {root}: the file name {rel!r} contains a newline or NUL; rename it"
        )


def _check_root(root: Path) -> None:
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        raise PluginTreeError(
            f"plugin directory {root} does not exist; check the path or the plugin name"
        ) from None
    except OSError as exc:
        raise PluginTreeError(
            f"plugin directory {root} cannot be read ({exc.strerror}); check its permissions"
        ) from exc
    if stat.S_ISLNK(st.st_mode):
        raise PluginTreeError(
            f"plugin directory {root} is a symbolic link; caplet hashes only real "
            "directories, so the approved content cannot be redirected; "
            "replace the link with a copy of the directory"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise PluginTreeError(
            f"plugin directory {root} is not a directory; a plugin is a directory "
            "holding caplet.toml and its modules"
        )


def list_tree(
    root: Path,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[TreeEntry]:
    """Every regular file under *root*, sorted by the UTF-8 bytes of its path.

    Symbolic links are never followed; VCS folders and ``__pycache__`` are
    skipped (:data:`EXCLUDED_DIRS`), and so is the signature file at the top
    (:data:`SIGNATURE_FILE`); everything else counts, dotfiles too.
    Raises :class:`PluginTreeError` for anything that cannot be hashed safely.
    """
    _check_root(root)
    entries: list[TreeEntry] = []
    total = 0
    folders = 0
    # Iterative depth-first walk with os.scandir: os.walk would hide symlinks
    # to directories among the directory names and swallow listing errors.
    pending: list[str] = [""]
    while pending:
        rel_dir = pending.pop()
        directory = root / rel_dir if rel_dir else root
        try:
            with os.scandir(directory) as it:
                children = list(it)
        except OSError as exc:
            raise PluginTreeError(
                f"plugin directory {root}: cannot list {rel_dir or '.'!r} ({exc.strerror}); "
                "make it readable (chmod u+rx) or remove it"
            ) from exc
        for child in children:
            rel = f"{rel_dir}/{child.name}" if rel_dir else child.name
            _check_name(root, rel)
            try:
                st = child.stat(follow_symlinks=False)
            except OSError as exc:
                raise PluginTreeError(
                    f"plugin directory {root}: cannot stat {rel!r} ({exc.strerror}); "
                    "check its permissions"
                ) from exc
            if stat.S_ISLNK(st.st_mode):
                raise PluginTreeError(
                    f"plugin directory {root}: {rel!r} is a symbolic link; it could point "
                    "outside the approved content, so caplet refuses it; "
                    "replace it with a copy of the file"
                )
            if stat.S_ISDIR(st.st_mode):
                if child.name not in EXCLUDED_DIRS:
                    _check_folder(root, rel, folders := folders + 1, max_files)
                    pending.append(rel)
                continue
            if rel == SIGNATURE_FILE and stat.S_ISREG(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise PluginTreeError(
                    f"plugin directory {root}: {rel!r} is not a regular file or directory "
                    f"(a FIFO, socket or device: mode {stat.filemode(st.st_mode)}); "
                    "remove it from the plugin"
                )
            entries.append(TreeEntry(path=rel, mode=stat.S_IMODE(st.st_mode), size=st.st_size))
            total += st.st_size
            if len(entries) > max_files:
                raise PluginTreeError(
                    f"plugin directory {root} holds more than {max_files} files "
                    f"(reached at {rel!r}); remove generated or vendored files from it"
                )
            if total > max_bytes:
                raise PluginTreeError(
                    f"plugin directory {root} holds more than {max_bytes} bytes "
                    f"(reached at {rel!r}); remove large data files from it"
                )
    entries.sort(key=lambda e: e.path.encode("utf-8"))
    return entries


def _check_folder(root: Path, rel: str, folders: int, max_folders: int) -> None:
    """Bound what the walk and every copy of the tree go through (attack10).

    Folders hold no bytes and were not counted: a million empty ones were
    walked by every discovery. And a tree 1,100 folders deep hashed fine,
    then the snapshot's ``mkdir(parents=True)`` recursed past Python's
    limit: a ``RecursionError`` out of audit, approve and enable.
    """
    if rel.count("/") >= MAX_DEPTH:
        raise PluginTreeError(
            f"plugin directory {root}: {rel!r} is nested more than {MAX_DEPTH} folders deep; "
            "flatten the plugin's folders"
        )
    if folders > max_folders:
        raise PluginTreeError(
            f"plugin directory {root} holds more than {max_folders} folders (reached at "
            f"{rel!r}); remove generated or vendored folders from it"
        )


def _changed(root: Path, rel: str) -> PluginTreeError:
    return PluginTreeError(
        f"plugin directory {root}: {rel!r} changed while being hashed; "
        "retry once nothing is writing to the plugin"
    )


@contextmanager
def open_entry(root: Path, entry: TreeEntry) -> Iterator[int]:
    """Open *entry* below *root* for reading; yields the file descriptor.

    Every path component is opened relative to its parent with
    ``O_NOFOLLOW``, so a directory swapped for a symbolic link after the
    walk cannot redirect the read outside the tree (openat(2)). The opened
    file must still be a regular file with the listed execute bit.
    """
    parts = entry.path.split("/")
    dir_fds: list[int] = []
    fd = -1
    try:
        try:
            current = os.open(root, _DIR_FLAGS)
            dir_fds.append(current)
            for part in parts[:-1]:
                current = os.open(part, _DIR_FLAGS, dir_fd=current)
                dir_fds.append(current)
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=current)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.ENXIO):
                # ELOOP: a component became a symlink (open(2), O_NOFOLLOW);
                # ENXIO: a FIFO/socket appeared with O_NONBLOCK.
                raise _changed(root, entry.path) from exc
            raise PluginTreeError(
                f"plugin directory {root}: cannot read {entry.path!r} ({exc.strerror}); "
                "make it readable (chmod u+r)"
            ) from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or is_executable(st.st_mode) != is_executable(entry.mode):
            raise _changed(root, entry.path)
        yield fd
    finally:
        if fd >= 0:
            os.close(fd)
        for dir_fd in reversed(dir_fds):
            os.close(dir_fd)


def read_entry(root: Path, entry: TreeEntry, fd: int) -> Iterator[bytes]:
    """Yield the bytes of an opened *entry* in chunks; exactly ``entry.size`` of them.

    Raises :class:`PluginTreeError` ("changed while being hashed") when the
    file is shorter or longer than the walk recorded.
    """
    remaining = entry.size
    try:
        while remaining > 0:
            chunk = os.read(fd, min(_CHUNK, remaining))
            if not chunk:
                raise _changed(root, entry.path)
            remaining -= len(chunk)
            yield chunk
        # One more byte proves the file did not grow after the walk.
        if os.read(fd, 1):
            raise _changed(root, entry.path)
    except OSError as exc:
        raise PluginTreeError(
            f"plugin directory {root}: cannot read {entry.path!r} ({exc.strerror}); "
            "make it readable (chmod u+r)"
        ) from exc


class TreeDigest:
    """The tree hash taken one entry at a time: :meth:`entry`, then its bytes through
    :meth:`update`, for each entry in :func:`list_tree`'s order.

    Per entry: 8-byte big-endian path length, the UTF-8 path, 4-byte mode
    (:func:`hashed_mode`), 8-byte length, then the bytes. Every field is
    length-prefixed so no two different trees share an encoding. Also fed by
    :func:`~caplet._trust._snapshot.make_snapshot`, which hashes the bytes
    it writes as it copies them, so its copy is read once.
    """

    __slots__ = ("_digest",)

    def __init__(self) -> None:
        self._digest = new_digest()

    def entry(self, entry: TreeEntry) -> None:
        self._digest.update(entry_header(entry.path, entry.mode, entry.size))

    def update(self, chunk: bytes) -> None:
        self._digest.update(chunk)

    def hexdigest(self) -> str:
        return tree_digest(self._digest)


def hash_entries(root: Path, entries: Iterable[TreeEntry]) -> str:
    """Hash the listed *entries* of *root* (in the order given; see :func:`list_tree`
    and :class:`TreeDigest` for the encoding)."""
    return _hash_keeping(root, entries, (), 0)[0]


def tree_hash(
    root: Path,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> str:
    """The content hash (``"sha256-" + hex``) of the plugin tree at *root*."""
    return hash_entries(root, list_tree(root, max_files=max_files, max_bytes=max_bytes))


def tree_hash_keeping(
    root: Path, keep: Collection[str], *, max_kept: int
) -> tuple[str, dict[str, bytes]]:
    """:func:`tree_hash`, and the bytes it hashed of the entries named in *keep*.

    A reader that parses one of those files from the bytes returned parses
    exactly what the hash covers: reading the file by name before or after
    the hash could meet other content (attack13d: a manifest read, the
    folder swapped, then hashed, paired one content's manifest with
    another's hash). Of an entry larger than *max_kept*, only its first
    *max_kept* bytes are kept: enough for a reader with a smaller limit to
    refuse it as too large.
    """
    return _hash_keeping(root, list_tree(root), keep, max_kept)


def _hash_keeping(
    root: Path, entries: Iterable[TreeEntry], keep: Collection[str], max_kept: int
) -> tuple[str, dict[str, bytes]]:
    """The hash of *entries* and the first *max_kept* bytes it read of those in *keep*."""
    digest = TreeDigest()
    kept: dict[str, bytes] = {}
    for entry in entries:
        digest.entry(entry)
        keeping = entry.path in keep
        chunks: list[bytes] = []
        size = 0
        with open_entry(root, entry) as fd:
            for chunk in read_entry(root, entry, fd):
                digest.update(chunk)
                if keeping and size < max_kept:
                    chunks.append(chunk[: max_kept - size])
                    size += len(chunks[-1])
        if keeping:
            kept[entry.path] = b"".join(chunks)
    return digest.hexdigest(), kept
