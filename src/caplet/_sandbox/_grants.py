"""What a sandbox lets a worker see: paths, each read-only or read-write.

Shared by the mount-namespace jail (what exists inside) and Landlock (what
may be opened), so both layers enforce the same list.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PathGrant"]


@dataclass(frozen=True, slots=True)
class PathGrant:
    """An absolute host path made visible inside the sandbox (at ``target`` if given).

    ``writable`` grants create/write/delete beneath it; otherwise it is
    read-only. ``executable`` allows execve(2) of the file (or of files
    beneath the directory): only approved ``proc.exec`` programs and their
    ELF interpreter get it, never a writable grant (W^X), and never the
    runtime (the worker never needs to exec Python again).
    """

    path: str
    writable: bool = False
    executable: bool = False
    #: Where the path appears inside a namespace jail ("" = at ``path``):
    #: the snapshot is mounted at /plugin so the worker learns no host path.
    target: str = ""
    #: The inode the path named when it was approved (0, 0: not pinned, as
    #: for the runtime). A pinned grant is opened without following any
    #: symbolic link and must still be that inode (:mod:`._resolve`).
    device: int = 0
    inode: int = 0
    #: Copied into a private read-only tmpfs at ``target`` instead of bound:
    #: a bind mount's root shows its host path in /proc/self/mountinfo.
    copy: bool = False
    #: For a copied grant: the tree hash (:func:`caplet._trust._hashing.tree_hash`)
    #: its copy must have, checked on the read-only copy before any plugin
    #: code runs ("" = not checked: the host verified the tree it copies).
    content_hash: str = ""
    #: A glob's folder (glob32): inside a jail a directory of the jail's own, listable,
    #: holding only the grants below it (its matches), never the host's folder; Landlock
    #: gives it the read-directory right alone. Without a jail it is no grant at all:
    #: listing the host's folder would show the names the glob does not match.
    listing: bool = False
    #: A glob's match (attack35): a file the glob may grant only while it has one name.
    #: Checked at every start, as the inode is: a second name made after enable (by the
    #: file's owner, a deduplicating tool) is content under a name the glob does not match.
    one_name: bool = False

    @property
    def pinned(self) -> bool:
        """Whether the grant must still name the inode approved at enable."""
        return self.inode != 0

    @property
    def inside(self) -> str:
        """The path as the worker sees it inside a jail."""
        return self.target or self.path
