"""Who a worker is on the host: never root (issue 13, point 1).

A worker runs plugin code with the host user's identity when caplet runs as
an ordinary user: the kernel layers bound what that identity can reach, and
nothing the worker creates can carry more privilege than the user already
has. When caplet runs as root that identity would be root's: a file a plugin
made set-uid in a writable grant would be a set-uid-root program on the host,
and root-owned files, capability xattrs and device nodes would follow. So a
root host runs its workers as an unprivileged host uid and gid instead:

* ``Policy.worker_uid``/``worker_gid`` when set;
* else the account named ``caplet`` when the user database has one (``useradd
  --system --no-create-home caplet`` makes it: then ``chown caplet`` is how
  an administrator gives it a writable grant);
* else :data:`DEFAULT_WORKER_ID` for both, a number no distribution assigns
  (Debian reserves 65000-65533, base-passwd(5)), so no other program on the
  machine shares it (``nobody`` is shared by NFS squashing and many daemons).

The worker can then read what that uid may read and write what it may
write: a writable grant must be writable by it (``chown -R 65532:65532
/data``, or group-writable by its gid). caplet checks this at enable and
refuses with that fix (:func:`caplet._sandbox._resolve.check_access`), and
never changes ownership itself: an administrator's files are not caplet's
to re-own. Supplementary groups are dropped (root's group 0 would otherwise
open every group-writable root file).

A host that is not root runs workers as itself: an unprivileged process can
only map its own ids into a user namespace (user_namespaces(7)), so a
configured identity other than its own is refused with the reason.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from caplet._errors import PolicyError

__all__ = [
    "DEFAULT_WORKER_ID",
    "WORKER_ACCOUNT",
    "WorkerIdentity",
    "hand_over",
    "worker_identity",
]

#: uid and gid of workers of a root host when neither the policy nor a
#: ``caplet`` account names one.
DEFAULT_WORKER_ID = 65532
#: The account whose ids a root host's workers take when it exists.
WORKER_ACCOUNT = "caplet"
#: The largest valid id: (uid_t)-1 means "unchanged" to set*id(2).
_MAX_ID = 0xFFFFFFFE


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    """The host uid and gid a worker runs as.

    ``privileged`` (the host is root, with other ids to switch to) means the
    jail's id maps are written from outside the new user namespace and the
    worker switches to ``uid``/``gid`` before plugin code runs; otherwise
    ``uid``/``gid`` are the host process's own and nothing is switched.
    """

    uid: int
    gid: int
    privileged: bool = False
    #: Where the ids came from, for ``caplet doctor`` and error messages.
    source: str = "the host's own ids"

    def describe(self) -> str:
        """``uid 65532, gid 65532 (the default for a root host)`` for messages."""
        return f"uid {self.uid}, gid {self.gid} ({self.source})"


def worker_identity(uid: int | None = None, gid: int | None = None) -> WorkerIdentity:
    """The identity workers of this process run as, given the policy's ``worker_uid``/``gid``.

    Raises :class:`PolicyError` for an identity that would be root, that is
    out of range, or that this process cannot take.
    """
    host_uid, host_gid = os.geteuid(), os.getegid()
    for label, value in (("worker_uid", uid), ("worker_gid", gid)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_ID:
            raise PolicyError(
                f"policy {label} = {value!r}: expected a host id between 1 and {_MAX_ID}"
            )
        if value == 0:
            raise PolicyError(
                f"policy {label} = 0: workers never run as root; choose an unprivileged id "
                f"(default {DEFAULT_WORKER_ID}) or leave it unset"
            )
    if host_uid == 0 and not _maps_other_ids():
        # uid 0 of a user namespace that maps nothing else (`unshare -r`, some
        # rootless containers): not the host's root, and there is no other id
        # to switch to. Workers run as this process, as for any user.
        if uid is not None or gid is not None:
            raise PolicyError(
                f"policy worker_uid/worker_gid = {uid}/{gid}: caplet runs as uid 0 of a user "
                "namespace that maps no other id (/proc/self/uid_map), so there is no other "
                "uid to run workers as; leave them unset"
            )
        return WorkerIdentity(0, host_gid, source="the only id of this user namespace")
    if host_uid != 0:
        if (uid is not None and uid != host_uid) or (gid is not None and gid != host_gid):
            raise PolicyError(
                f"policy worker_uid/worker_gid = {uid}/{gid}: caplet runs as uid {host_uid}, "
                f"gid {host_gid}, and an unprivileged process can run workers only as itself "
                "(user_namespaces(7)); leave them unset, or run caplet as root"
            )
        return WorkerIdentity(host_uid, host_gid)
    if uid is not None or gid is not None:
        account = _account()
        chosen_uid = uid if uid is not None else (account[0] if account else DEFAULT_WORKER_ID)
        chosen_gid = gid if gid is not None else (account[1] if account else DEFAULT_WORKER_ID)
        return WorkerIdentity(chosen_uid, chosen_gid, True, "policy worker_uid/worker_gid")
    account = _account()
    if account is not None:
        return WorkerIdentity(account[0], account[1], True, f"the {WORKER_ACCOUNT!r} account")
    return WorkerIdentity(DEFAULT_WORKER_ID, DEFAULT_WORKER_ID, True, "the default for a root host")


def _maps_other_ids() -> bool:
    """Whether this process's user namespace maps more than one uid (the host's does).

    user_namespaces(7): /proc/self/uid_map lists "inside outside count"
    ranges; the initial namespace shows ``0 0 4294967295``.
    """
    try:
        with open("/proc/self/uid_map", encoding="ascii") as handle:
            ranges = [line.split() for line in handle if line.strip()]
    except OSError:
        return True  # no procfs: assume the ordinary case
    return sum(int(fields[2]) for fields in ranges if len(fields) == 3) > 1


def _account() -> tuple[int, int] | None:
    """(uid, gid) of the ``caplet`` account, unless missing or root."""
    try:
        entry = pwd.getpwnam(WORKER_ACCOUNT)
    except KeyError:
        return None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        return None  # never root, whatever the user database says
    return entry.pw_uid, entry.pw_gid


def hand_over(path: str | os.PathLike[str], identity: WorkerIdentity) -> None:
    """Make the directory ``path`` (not what is in it) the worker's own, on a root host.

    What an administrator does once for a writable grant, done by caplet's
    own harnesses (``caplet selftest``'s arena, ``caplet demo``) for the
    directories they create themselves; never for a user's path. A host
    that is not root has nothing to hand over: the worker is its own user.
    """
    if identity.privileged and os.geteuid() == 0:
        os.chown(path, identity.uid, identity.gid, follow_symlinks=False)
