"""Second spellings of a directory *below* a grant: mounts that show it again there.

Containment in :mod:`caplet._host._grant_check` is decided by inode, walking
up from each protected path, which catches a grant that is (or lies inside)
a second spelling of caplet's state directory. It cannot see a bind mount
*below* a grant: red team, round 4, with ``/data/mirror`` a bind of the state
directory and ``fs.write:/data`` granted, the jail bound ``/data``
recursively and the plugin rewrote ``caplet.db`` (an unprivileged host: the
worker is its user). A mount is a file system's directory shown at a mount
point, and ``/proc/self/mountinfo`` names both (proc(5): the device, the
root of the mount within its file system, the mount point), so the overlap
is decided there: a mount below the grant whose file-system root contains,
or lies inside, the protected path's place in the same file system.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["MountTable", "read_mount_table"]

#: mountinfo escapes space, tab, newline and backslash as \\ooo (proc(5)).
_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def _contains(outer: str, inner: str) -> bool:
    return outer in ("/", inner) or inner.startswith(outer.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class _Mount:
    device: str
    root: str
    point: str
    fstype: str = ""


@dataclass(frozen=True, slots=True)
class MountTable:
    """This process's mounts, in mountinfo's order (a later mount covers an earlier)."""

    mounts: tuple[_Mount, ...]

    def _place(self, path: str) -> tuple[str, str] | None:
        """(device, path within its file system) of the resolved ``path``."""
        covering = [m for m in self.mounts if _contains(m.point, path)]
        if not covering:
            return None
        mount = max(covering, key=lambda m: len(m.point))  # the last of the longest: on top
        for candidate in reversed(covering):
            if candidate.point == mount.point:
                mount = candidate
                break
        rest = path[len(mount.point.rstrip("/")) :] if mount.point != "/" else path
        return mount.device, os.path.normpath(mount.root.rstrip("/") + "/" + rest.lstrip("/"))

    def file_system(self, device: int) -> str:
        """The type of the file system ``device`` (an ``st_dev``) is ("" when unknown)."""
        wanted = f"{os.major(device)}:{os.minor(device)}"
        return next((m.fstype for m in self.mounts if m.device == wanted), "")

    def mirror_below(self, grant: str, protected: str, *, inside_too: bool) -> str:
        """The mount point below ``grant`` that shows ``protected`` (or, with
        ``inside_too``, part of it) again, or "" when there is none."""
        place = self._place(os.path.realpath(protected))
        if place is None:
            return ""
        device, where = place
        for mount in self.mounts:
            if mount.point == grant or not _contains(grant, mount.point):
                continue
            if mount.device != device:
                continue
            if _contains(mount.root, where) or (inside_too and _contains(where, mount.root)):
                return mount.point
        return ""


def read_mount_table() -> MountTable:
    """The mounts of this process (empty when /proc cannot be read: nothing to compare)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return MountTable(())
    mounts = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        # proc(5): optional fields end at a lone '-', then the file system's type.
        tail = fields.index("-", 6) + 1 if "-" in fields[6:] else len(fields)
        fstype = _unescape(fields[tail]) if tail < len(fields) else ""
        mounts.append(_Mount(fields[2], _unescape(fields[3]), _unescape(fields[4]), fstype))
    return MountTable(tuple(mounts))
