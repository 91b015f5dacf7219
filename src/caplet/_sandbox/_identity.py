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

**A real uid of its own (attack10).** The kernel keeps some counts per user,
not per process or namespace: epoll watches (``fs.epoll.max_user_watches``),
descriptors in flight over ``SCM_RIGHTS`` (refused with ETOOMANYREFS once the
user's count passes the sender's RLIMIT_NOFILE), pipe buffers
(``fs.pipe-user-pages-soft``). They are charged to the *real* uid's
``struct user_struct`` (``current_user()``, which set*uid(2) moves only when
the real uid changes), while files are reached with the effective and
filesystem uid. So on a root host every worker keeps the shared effective,
saved and filesystem uid above (its grants, what it creates, what an
administrator chowned), and takes a real uid of its own,
:data:`REAL_UID_BASE` plus the host pid of its jail's monitor: unique among
the live workers of the machine without any bookkeeping (of its pid
namespace, when caplet runs in a container with its own: two such
containers' workers may then share one), so one plugin hoarding a per-user
count no longer starves the others. The range is
``0x70000000`` to ``0x703FFFFF`` (PID_MAX_LIMIT is 2**22), inside what
systemd's UID table (docs/UIDS-GIDS.md) lists as unused, below the signed
32-bit boundary it warns about and far from its container and "foreign"
ranges. No account needs to exist for it; a collision with one would only
share those counts with it, as every worker shared them before.

A worker granted ``proc.exec`` keeps the shared real uid: with a real uid
other than its effective one, every program it starts runs in the kernel's
secure-exec mode (AT_SECURE: the dynamic loader drops ``TMPDIR`` and
``LD_*``) and bash tries to drop to the real uid on every start, printing
an error when seccomp refuses it (tests/_sandbox/test_real_uids.py).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from caplet._errors import PolicyError

__all__ = [
    "DEFAULT_WORKER_ID",
    "REAL_UID_BASE",
    "REAL_UID_SPAN",
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
#: A root host's workers take ``REAL_UID_BASE + pid`` as their real uid (see
#: the module's docstring); ``REAL_UID_SPAN`` is PID_MAX_LIMIT, the most
#: pids a 64-bit kernel hands out (include/linux/threads.h).
REAL_UID_BASE = 0x70000000
REAL_UID_SPAN = 1 << 22


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
    #: Whether each worker takes a real uid of its own (:meth:`real_uid`):
    #: a root host whose user namespace maps the whole range.
    own_real_uids: bool = False

    def describe(self) -> str:
        """``uid 65532, gid 65532 (the default for a root host)`` for messages."""
        return f"uid {self.uid}, gid {self.gid} ({self.source})"

    def real_uid(self, pid: int, *, may_exec: bool = False) -> int:
        """The real uid of the worker whose jail's monitor (or, without a jail, itself) is ``pid``.

        ``REAL_UID_BASE + pid`` where workers take real uids of their own,
        else the shared :attr:`uid` (a host that is not root, a namespace
        that does not map the range, a worker that may exec programs).
        """
        if not self.own_real_uids or may_exec:
            return self.uid
        if not 0 < pid < REAL_UID_SPAN:
            raise ValueError(f"pid {pid} is outside 1..{REAL_UID_SPAN - 1}")
        return REAL_UID_BASE + pid


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
        if label == "worker_uid" and _is_real_uid(value):
            raise PolicyError(
                f"policy worker_uid = {value}: {REAL_UID_BASE}-{REAL_UID_BASE + REAL_UID_SPAN - 1} "
                "are the workers' own real uids (one per worker); choose an id outside that "
                f"range (default {DEFAULT_WORKER_ID}) or leave it unset"
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
    account = _account()
    if uid is not None or gid is not None:
        chosen_uid = uid if uid is not None else (account[0] if account else DEFAULT_WORKER_ID)
        chosen_gid = gid if gid is not None else (account[1] if account else DEFAULT_WORKER_ID)
        source = "policy worker_uid/worker_gid"
    elif account is not None:
        chosen_uid, chosen_gid = account
        source = f"the {WORKER_ACCOUNT!r} account"
    else:
        chosen_uid = chosen_gid = DEFAULT_WORKER_ID
        source = "the default for a root host"
    # An account inside the range would collide with one worker's real uid
    # (overlapping id maps): its workers share the real uid instead.
    own = _maps_real_uids() and not _is_real_uid(chosen_uid)
    return WorkerIdentity(chosen_uid, chosen_gid, True, source, own)


def _uid_ranges() -> list[tuple[int, int]] | None:
    """This user namespace's uid map as (first inside id, count) ranges; None unreadable.

    user_namespaces(7): /proc/self/uid_map lists "inside outside count"
    ranges; the initial namespace shows ``0 0 4294967295``.
    """
    try:
        with open("/proc/self/uid_map", encoding="ascii") as handle:
            rows = [line.split() for line in handle if line.strip()]
    except OSError:
        return None
    return [
        (int(fields[0]), int(fields[2]))
        for fields in rows
        if len(fields) == 3 and all(field.isdigit() for field in fields)
    ]


def _maps_other_ids() -> bool:
    """Whether this process's user namespace maps more than one uid (the host's does)."""
    ranges = _uid_ranges()
    if ranges is None:
        return True  # no procfs: assume the ordinary case
    return sum(count for _, count in ranges) > 1


def _is_real_uid(uid: int) -> bool:
    """Whether ``uid`` lies in the workers' own real-uid range."""
    return REAL_UID_BASE <= uid < REAL_UID_BASE + REAL_UID_SPAN


def _maps_real_uids() -> bool:
    """Whether this user namespace maps every uid of the workers' real-uid range.

    The initial namespace does; a container's usually maps 65,536 ids and
    not the range, and then workers share the real uid as they did before.
    An unreadable map answers no: the shared real uid always works.
    """
    end = REAL_UID_BASE + REAL_UID_SPAN
    return any(
        first <= REAL_UID_BASE and end <= first + count for first, count in _uid_ranges() or ()
    )


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
