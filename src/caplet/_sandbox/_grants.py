"""What a sandbox lets a worker see: paths, each read-only or read-write.

Shared by the mount-namespace jail (what exists inside) and Landlock (what
may be opened), so both layers enforce the same list.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PathGrant"]


@dataclass(frozen=True, slots=True)
class PathGrant:
    """An absolute host path made visible at the same path inside the sandbox.

    ``writable`` grants create/write/delete beneath it; otherwise it is
    read-only (and executable: the Python runtime needs that).
    """

    path: str
    writable: bool = False
