"""A path and every directory above it, by identity (device, inode): how containment is judged.

Split from :mod:`caplet._host._grant_check` (round 19), which judges a grant
against caplet's own files with it, as :mod:`caplet._host._peer_code` judges
another process's writable grants against the folders this one runs code
from. By inode, so a second spelling of a directory (a bind mount, a link)
is caught as well as the first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Node", "chain_from_fd", "inode_chain"]


@dataclass(frozen=True, slots=True)
class Node:
    """One directory on the way up from a protected path: its identity and path."""

    device: int
    inode: int
    path: str


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


def chain_from_fd(fd: int, path: str) -> list[Node]:
    """The grant itself (its pinned descriptor) and the directories above its path."""
    info = os.fstat(fd)
    nodes = [Node(info.st_dev, info.st_ino, path)]
    if path != "/":
        nodes += inode_chain(Path(path).parent)
    return nodes
