"""Landlock: the kernel enforces the sandbox's path grants on every open (landlock(7)).

A worker calls :func:`apply_landlock` after its namespaces and mounts are in
place and before any plugin byte is imported. From then on the worker and
everything it starts may only reach the paths its :class:`PathGrant` list
names (read-only or read-write), may not bind or connect any TCP socket
(the network goes through the host's broker), and, where the ABI has
scoping, may neither signal nor reach the abstract unix sockets of processes
outside its own Landlock domain. Landlock checks the object that is finally
opened, so ``..`` components, symlinks and bind mounts cannot lead out of a
grant: it works even where user namespaces are unavailable.

The three syscalls are called through :mod:`caplet._syscall` (plain ctypes)
rather than the PyPI ``landlock`` package: that binding is still a
pre-release, and the handful of structs and constants involved are stable
UAPI (include/uapi/linux/landlock.h) that we would have to audit anyway.

This module runs inside workers: it imports only the standard library and
caplet base/_sandbox modules.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from caplet._errors import SandboxError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._resolve import GrantPathError, open_pinned
from caplet._syscall import (
    LandlockRulesetAttr,
    landlock_abi_version,
    landlock_add_path_rule,
    landlock_create_ruleset,
    landlock_restrict_self,
    set_no_new_privs,
)

__all__ = [
    "ACCESS_FS_EXECUTE",
    "ACCESS_FS_IOCTL_DEV",
    "ACCESS_FS_MAKE_BLOCK",
    "ACCESS_FS_MAKE_CHAR",
    "ACCESS_FS_MAKE_DIR",
    "ACCESS_FS_MAKE_FIFO",
    "ACCESS_FS_MAKE_REG",
    "ACCESS_FS_MAKE_SOCK",
    "ACCESS_FS_MAKE_SYM",
    "ACCESS_FS_READ_DIR",
    "ACCESS_FS_READ_FILE",
    "ACCESS_FS_REFER",
    "ACCESS_FS_REMOVE_DIR",
    "ACCESS_FS_REMOVE_FILE",
    "ACCESS_FS_TRUNCATE",
    "ACCESS_FS_WRITE_FILE",
    "ACCESS_NET_BIND_TCP",
    "ACCESS_NET_CONNECT_TCP",
    "SCOPE_ABSTRACT_UNIX_SOCKET",
    "SCOPE_SIGNAL",
    "LandlockReport",
    "apply_landlock",
    "handled_fs_access",
    "landlock_abi",
]

# -- access rights (include/uapi/linux/landlock.h, "Filesystem flags") -----------

ACCESS_FS_EXECUTE = 1 << 0
ACCESS_FS_WRITE_FILE = 1 << 1
ACCESS_FS_READ_FILE = 1 << 2
ACCESS_FS_READ_DIR = 1 << 3
ACCESS_FS_REMOVE_DIR = 1 << 4
ACCESS_FS_REMOVE_FILE = 1 << 5
ACCESS_FS_MAKE_CHAR = 1 << 6
ACCESS_FS_MAKE_DIR = 1 << 7
ACCESS_FS_MAKE_REG = 1 << 8
ACCESS_FS_MAKE_SOCK = 1 << 9
ACCESS_FS_MAKE_FIFO = 1 << 10
ACCESS_FS_MAKE_BLOCK = 1 << 11
ACCESS_FS_MAKE_SYM = 1 << 12
#: ABI 2: linking or renaming a file into another directory.
ACCESS_FS_REFER = 1 << 13
#: ABI 3: truncate(2), ftruncate(2), open(O_TRUNC).
ACCESS_FS_TRUNCATE = 1 << 14
#: ABI 5: ioctl(2) on character and block devices.
ACCESS_FS_IOCTL_DEV = 1 << 15

# "Network flags" (ABI 4) and "Scope flags" (ABI 6).
ACCESS_NET_BIND_TCP = 1 << 0
ACCESS_NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_FS_V1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM: the 13 rights of the first ABI

#: The rights landlock(7) accepts on a rule whose parent is not a directory;
#: anything else makes landlock_add_rule(2) fail with EINVAL.
_FILE_RIGHTS = (
    ACCESS_FS_EXECUTE
    | ACCESS_FS_WRITE_FILE
    | ACCESS_FS_READ_FILE
    | ACCESS_FS_TRUNCATE
    | ACCESS_FS_IOCTL_DEV
)

#: What a read-only grant allows: the Python runtime must be able to run.
_READ_ONLY_RIGHTS = ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR

# Landlock ABIs in which a feature appeared (landlock(7), "Versions").
_ABI_NET = 4
_ABI_SCOPE = 6


@dataclass(frozen=True, slots=True)
class LandlockReport:
    """What :func:`apply_landlock` actually made the kernel enforce.

    ``abi`` is the ABI the ruleset was built for; ``fs`` is always true once
    a ruleset is in force; ``tcp`` means TCP bind/connect are denied (ABI 4);
    ``scoped`` means signals and abstract unix sockets are confined to the
    domain (ABI 6).
    """

    abi: int
    fs: bool
    tcp: bool
    scoped: bool


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers, 0 when Landlock is unavailable (the doctor's probe)."""
    return landlock_abi_version()


def handled_fs_access(abi: int) -> int:
    """Every filesystem right ABI ``abi`` knows: all of them are denied unless a grant allows."""
    rights = _FS_V1 if abi >= 1 else 0
    if abi >= 2:
        rights |= ACCESS_FS_REFER
    if abi >= 3:
        rights |= ACCESS_FS_TRUNCATE
    if abi >= 5:
        rights |= ACCESS_FS_IOCTL_DEV
    return rights


def _attr_size(abi: int) -> int:
    # struct landlock_ruleset_attr grew one __u64 per feature: handled_access_net
    # in ABI 4 and scoped in ABI 6. Passing the size of the fields we fill in is
    # how landlock_create_ruleset(2) stays compatible with older kernels.
    if abi >= _ABI_SCOPE:
        return 24
    if abi >= _ABI_NET:
        return 16
    return 8


def _resolve_abi(requested: int | None) -> int:
    available = landlock_abi()
    abi = available if requested is None else min(requested, available)
    if abi <= 0:
        why = (
            f"the kernel offers ABI {available}"
            if requested is None or available <= 0
            else f"ABI {requested} was requested"
        )
        raise SandboxError(
            f"Landlock is not available ({why}); it needs kernel >= 5.13 with landlock in "
            "the lsm= boot list (CONFIG_SECURITY_LANDLOCK=y). Use isolation = "
            '"best-effort" to run without it.'
        )
    return abi


def _open_grant(grant: PathGrant) -> int:
    if not grant.path.startswith("/"):
        raise SandboxError(
            f"Landlock grant {grant.path!r} is not an absolute path; grants are resolved "
            "without a working directory, so give the full path."
        )
    if grant.pinned:
        # A plugin's fs grant without a jail (inside one, grants are the jail's own
        # mounts, not pinned): the inode approved at enable, reached through no link,
        # as the jail opens it (glob32: a glob's match swapped for a link between
        # enable and start would be ruled as the link's target).
        try:
            return open_pinned(grant.path, grant.device, grant.inode, one_name=grant.one_name)
        except GrantPathError as exc:
            raise SandboxError(f"Landlock grant: {exc}") from exc
    try:
        # O_PATH opens the object itself without reading it (open(2)); following
        # symlinks here is deliberate for the runtime's grants: Landlock ties the
        # rule to the inode the path resolves to now, so a symlinked grant covers
        # its target only.
        return os.open(grant.path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise SandboxError(
            f"Landlock grant {grant.path!r} does not exist; create it before starting the "
            "worker or remove the capability that names it."
        ) from exc
    except OSError as exc:
        raise SandboxError(
            f"Landlock grant {grant.path!r} cannot be opened ({exc.strerror}); the host "
            "must be able to reach every path it grants."
        ) from exc


def _rule_rights(grant: PathGrant, fd: int, handled: int) -> int:
    if grant.listing:
        # A glob's folder in the jail: its names, which are its matches (glob32).
        return ACCESS_FS_READ_DIR & handled
    rights = handled if grant.writable else _READ_ONLY_RIGHTS & handled
    # execve is allowed only where a proc.exec grant says so; a writable
    # grant never executes (what the plugin wrote must not run as code).
    if grant.executable and not grant.writable:
        rights |= ACCESS_FS_EXECUTE & handled
    else:
        rights &= ~ACCESS_FS_EXECUTE
    if not stat.S_ISDIR(os.fstat(fd).st_mode):
        # landlock_add_rule(2): "EINVAL ... parent_fd ... is not a directory and
        # allowed_access has directory-only rights" (READ_DIR, REMOVE_*, MAKE_*, REFER).
        rights &= _FILE_RIGHTS
    return rights


def apply_landlock(grants: Sequence[PathGrant], *, abi: int | None = None) -> LandlockReport:
    """Confine the calling thread (and every process it later starts) to ``grants``.

    ``abi`` caps the ABI used (``None``: the highest the kernel offers; a
    higher request is lowered to what the kernel has). Every filesystem right
    the ABI knows is handled, so anything a grant does not allow is denied;
    read-only grants allow read file and read directory, writable grants
    every handled right but execute (a grant that is not a directory only the
    file rights); execute is added only for ``executable`` read-only grants.

    With ABI >= 4 TCP bind and connect are denied on every port; with
    ABI >= 6 signals and abstract unix socket connections to processes
    outside the new domain are denied.

    Order: every grant is opened and its rule added (one descriptor open at a
    time) *before* anything irreversible happens, so a bad grant (:class:`SandboxError` naming it)
    leaves the process untouched. Then this function sets no_new_privs itself
    (landlock_restrict_self(2) requires it without CAP_SYS_ADMIN, and it can
    never be unset) and enforces the ruleset. Only the calling thread is
    restricted (threads started earlier are not): call it before any thread
    exists. Raises :class:`SandboxError` when Landlock is unavailable; the
    caller decides whether that is fatal (strict) or reported (best-effort).
    """
    effective = _resolve_abi(abi)
    handled = handled_fs_access(effective)
    net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP if effective >= _ABI_NET else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if effective >= _ABI_SCOPE else 0
    ruleset_fd = -1
    try:
        # Handling a network right without adding any net_port rule denies it on
        # every port (landlock(7), "Network flags").
        attr = LandlockRulesetAttr(handled, net, scoped)
        try:
            ruleset_fd = landlock_create_ruleset(attr, _attr_size(effective))
        except OSError as exc:
            raise SandboxError(
                f"Landlock refused a ruleset for ABI {effective} ({exc.strerror}); "
                "the kernel's ABI probe and its ruleset support disagree."
            ) from exc
        for grant in grants:
            # One descriptor at a time: a glob's files are a rule each (glob32), and
            # holding them all open met the worker's RLIMIT_NOFILE (EMFILE).
            fd = _open_grant(grant)
            try:
                rights = _rule_rights(grant, fd, handled)
                try:
                    landlock_add_path_rule(ruleset_fd, rights, fd)
                except OSError as exc:
                    raise SandboxError(
                        f"Landlock refused the rule for grant {grant.path!r} "
                        f"(rights {rights:#x}: {exc.strerror})."
                    ) from exc
            finally:
                os.close(fd)
        try:
            set_no_new_privs()
            landlock_restrict_self(ruleset_fd)
        except OSError as exc:
            raise SandboxError(
                f"Landlock could not restrict the worker ({exc.strerror}); the kernel "
                "refused landlock_restrict_self after no_new_privs was set."
            ) from exc
    finally:
        if ruleset_fd >= 0:
            os.close(ruleset_fd)
    return LandlockReport(
        abi=effective, fs=True, tcp=effective >= _ABI_NET, scoped=effective >= _ABI_SCOPE
    )
