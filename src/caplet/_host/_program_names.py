"""Whether an approved program can be rewritten through another of its names.

Split from :mod:`caplet._host._grant_check` (round 17 grew it past 600
lines): the check of point 4 that looks at the program's inode rather than
at the directories above its path.
"""

from __future__ import annotations

import os
import stat

from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._resolve import access_problem

__all__ = ["linked_and_writable"]


def linked_and_writable(program: str, identity: WorkerIdentity) -> str:
    """Why ``program`` cannot be granted when it has more than one hard link and the
    worker may write it, else "".

    Whether a path lies in a writable grant is decided by the directories above
    it, so a second *name* of the same inode in a writable grant is invisible to
    that check (red team, round 4: ``/data/alias``, a hard link to the approved
    ``/opt/tools/tool``, let the plugin writing ``/data`` rewrite the program).
    Finding every name of an inode means walking whole file systems; but a
    program the worker's uid neither owns nor may write (root's ``/usr/bin``)
    cannot be rewritten through any name (an owner may chmod it writable
    again), and one with a single name is reached only through the path
    checked above.
    """
    try:
        # O_PATH: a program swapped for a FIFO or device since program_grants
        # read it is neither waited on nor opened (red team round 17).
        fd = os.open(program, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return ""  # program_grants found it: vanished since, the start fails
    try:
        info = os.fstat(fd)
        if info.st_nlink < 2 or not stat.S_ISREG(info.st_mode):
            return ""
        groups = () if identity.privileged else tuple(os.getgroups())
        # The owner may chmod it writable again (through the other name too).
        owned = info.st_uid == identity.uid
        if not owned and access_problem(
            fd, identity.uid, identity.gid, writable=True, groups=groups
        ):
            return ""
    finally:
        os.close(fd)
    return (
        f"the program {program} has {info.st_nlink} hard links and the worker "
        f"({identity.describe()}) owns or may write it: through another name, in any "
        "writable grant, a plugin could rewrite the approved program; give it a single "
        "name, or an owner other than the worker without write access for it (e.g. "
        f"`chown root: {program}; chmod 755 {program}`)"
    )
