"""A path and every directory above it, by identity (device, inode): how containment is judged.

Split from :mod:`caplet._host._grant_check` (round 19), which judges a grant
against caplet's own files with it, as :mod:`caplet._host._peer_code` judges
another process's writable grants against the folders this one runs code
from. By inode, so a second spelling of a directory (a bind mount, a link)
is caught as well as the first.

A grant's own chain is read from descriptors (:func:`chain_from_fd`, attack35): the
grant was opened without links, and its chain by *path* was the chain of whatever the
names led to a moment later, so a folder on the way moved aside (and a decoy put at its
name) between the open and the check judged the grant by the decoy's chain.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath

from caplet._errors import CapabilityError
from caplet._sandbox._resolve import GrantPathError, open_no_links

__all__ = ["Node", "chain_from_fd", "inode_chain"]


@dataclass(frozen=True, slots=True)
class Node:
    """One directory on the way up from a protected path: its identity and path."""

    device: int
    inode: int
    path: str
    #: Whether the directory holds a regular file of the marker's name, read through
    #: its descriptor (:func:`chain_from_fd`'s ``marker``); ``None``: not looked at.
    marked: bool | None = None


def inode_chain(path: Path) -> list[Node]:
    """(device, inode, path) of ``path`` resolved and of every directory above it, up to /.

    Empty when the path does not exist (nothing of it can be granted).
    """
    try:
        current = path.resolve()
    except OSError:
        return []
    nodes: list[Node] = []
    while True:
        try:
            info = current.stat()
        except OSError:
            return nodes
        nodes.append(Node(info.st_dev, info.st_ino, str(current)))
        if current == current.parent:
            return nodes
        current = current.parent


#: More directories above a grant than any path holds (PATH_MAX / 2): a loop of ``..``.
_MAX_DEPTH = 2048
_DIR_PATH = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def chain_from_fd(
    fd: int,
    path: str,
    *,
    marker: str | None = None,
    above: dict[tuple[int, int], list[Node]] | None = None,
) -> list[Node]:
    """The grant itself (its pinned descriptor ``fd``, opened at ``path``) and every
    directory above it, each known by a descriptor: a directory's parent is its ``..``
    (openat(2)), never a name looked up again (attack35).

    A file has no ``..``: the folder named by its path is opened without links and must
    hold this very inode under its name (a glob's match has one name), else
    CapabilityError (a folder on the way moved while it was checked). ``marker``: record
    in each directory whether it holds a regular file of that name; ``above`` caches
    the chains of folders by identity (256 matches of one folder share one).
    """
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        return _dir_chain(fd, path, marker)
    parent, name = str(PurePath(path).parent), PurePath(path).name
    changed = CapabilityError(
        f"{path} changed while caplet checked it (the folder {parent} now holds another "
        "file under its name, or was moved or replaced): try the enable again, and grant "
        "nothing in folders others may move"
    )
    try:
        folder = open_no_links(parent)
    except GrantPathError as exc:
        raise changed from exc
    try:
        try:
            there = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError as exc:
            raise changed from exc
        if (there.st_dev, there.st_ino) != (info.st_dev, info.st_ino):
            raise changed
        held = os.fstat(folder)
        key = (held.st_dev, held.st_ino)
        chain = above.get(key) if above is not None else None
        if chain is None:
            chain = _dir_chain(folder, parent, marker)
            if above is not None:
                above[key] = chain
    finally:
        os.close(folder)
    return [Node(info.st_dev, info.st_ino, path), *chain]


def _dir_chain(fd: int, path: str, marker: str | None) -> list[Node]:
    """The directory ``fd`` and each one above it, by ``..`` of the descriptor before;
    named after ``path``'s components (the names only say it; identities decide)."""
    names = [path, *(str(parent) for parent in PurePath(path).parents)]
    nodes: list[Node] = []
    current = _open_dir(".", fd, path)
    try:
        while len(nodes) < _MAX_DEPTH:
            info = os.fstat(current)
            name = names[min(len(nodes), len(names) - 1)]
            nodes.append(Node(info.st_dev, info.st_ino, name, _holds(current, marker)))
            parent = _open_dir("..", current, name)
            found = os.fstat(parent)
            os.close(current)
            current = parent
            if (found.st_dev, found.st_ino) == (info.st_dev, info.st_ino):
                return nodes  # the root: its '..' is itself
        raise CapabilityError(
            f"{path}: more than {_MAX_DEPTH} folders above it; grant a shallower path"
        )
    finally:
        os.close(current)


def _open_dir(name: str, folder: int, path: str) -> int:
    """``.`` or ``..`` of the directory ``folder`` (named ``path``), as an ``O_PATH``
    descriptor; CapabilityError when the kernel refuses it.

    A lookup in a directory, even of ``.`` or ``..``, needs its search (x) permission
    (path_resolution(7)): a folder granted that the host's user may list but not search
    (``0644``) made the enable end in a PermissionError traceback (attack36), where the
    chain by path had reached the worker's access check and its fix.
    """
    try:
        return os.open(name, _DIR_PATH, dir_fd=folder)
    except OSError as exc:
        raise CapabilityError(
            f"{path}: caplet cannot read the folders above it ({exc.strerror or exc}): "
            "a folder on the way may not be searched; make it searchable (chmod u+x, or "
            "a+x for the worker) or grant another path"
        ) from None


def _holds(folder: int, marker: str | None) -> bool | None:
    if marker is None:
        return None
    try:
        found = os.stat(marker, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode)
