"""The jail's steps 1, 2 and 4: namespaces and id maps, the monitor and pid 1, dropping
privileges (see :mod:`caplet._sandbox._jail` for the whole sequence).
"""

from __future__ import annotations

import errno
import os
import select
import signal
from functools import cache
from typing import NoReturn

from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail_model import (
    EXIT_MONITOR_FAILED,
    EXIT_ORPHANED,
    JAIL_NAMESPACES,
    PR_SET_SECUREBITS,
    SECBIT_NO_SETUID_FIXUP,
    SECUREBITS,
    STOP_SIGNALS,
    Step,
    fail,
    read_small,
    write_proc,
)
from caplet._syscall import (
    PR_CAPBSET_DROP,
    clear_capabilities,
    close_fds_except,
    prctl,
    set_dumpable,
    set_no_new_privs,
    set_parent_death_signal,
    unshare,
)

__all__ = [
    "arm_parent_death",
    "become",
    "create_namespaces",
    "drop_privileges",
    "highest_capability",
    "monitor",
    "share_real_uid",
]


# -- step 1: namespaces and id maps -------------------------------------------------


def create_namespaces(identity: WorkerIdentity | None, real_uid: int | None = None) -> None:
    """unshare(2) every namespace and write the new user namespace's id maps.

    An unprivileged caller maps exactly its own ids (all it may map). A root
    caller whose workers run as another identity (:mod:`._identity`) needs
    a map it cannot write from inside the new namespace: see
    :func:`_create_namespaces_as_root`. ``real_uid`` is the worker's own
    real uid there (:meth:`WorkerIdentity.real_uid`), mapped as well.
    """
    uid, gid = os.geteuid(), os.getegid()  # before unshare: then they read as the overflow id
    if identity is not None and identity.privileged and uid == 0:
        _create_namespaces_as_root(identity, identity.uid if real_uid is None else real_uid)
        return
    try:
        unshare(JAIL_NAMESPACES)
    except OSError as exc:
        raise fail(Step.NAMESPACES, exc) from exc
    try:
        _write_id_maps(uid, gid)
    except OSError as exc:
        raise fail(Step.ID_MAPS, exc) from exc


def _create_namespaces_as_root(identity: WorkerIdentity, real_uid: int) -> None:
    """The namespaces of a root host's jail, mapping host root and the worker's ids.

    user_namespaces(7): a map naming ids other than the writer's own needs
    CAP_SETUID/CAP_SETGID in the *parent* user namespace, which a process
    loses the moment it enters a new one. So a helper forked first, still
    root in the host's namespace, writes the maps of this process once it
    has unshared. They hold two ids: host root (0), so that pid 1 can still
    open the runtime and the grants the way the host sees them while it
    builds the root (DAC override applies only to inodes whose owner is
    mapped), and the worker's own, which pid 1 and the monitor switch to
    (:func:`become`) before any plugin byte runs. No process of the jail
    keeps uid 0 or a capability after that, and none can get either back:
    set*id(2) needs CAP_SETUID, the bounding set is empty, the securebits
    are locked, no_new_privs is set and seccomp refuses set*id outright.
    Root's supplementary groups (group 0 among them) are dropped first.
    The worker's own real uid (:mod:`._identity`), when it has one, is the
    third id mapped: the same number inside and out.
    """
    uid, gid = identity.uid, identity.gid
    uids = f"0 0 1\n{uid} {uid} 1" + (f"\n{real_uid} {real_uid} 1" if real_uid != uid else "")
    try:
        os.setgroups([])
    except OSError as exc:
        raise fail(Step.ID_MAPS, exc) from exc
    parent = os.getpid()
    go_read, go_write = os.pipe2(os.O_CLOEXEC)
    done_read, done_write = os.pipe2(os.O_CLOEXEC)
    try:
        helper = os.fork()
    except OSError as exc:
        for fd in (go_read, go_write, done_read, done_write):
            os.close(fd)
        raise fail(Step.ID_MAPS, exc) from exc
    if helper == 0:  # pragma: no cover - the helper, observed through every root jail
        code = 1
        try:
            os.close(go_write)
            os.close(done_read)
            if os.read(go_read, 1) == b"g":
                try:
                    write_proc(f"/proc/{parent}/setgroups", "deny")
                    write_proc(f"/proc/{parent}/uid_map", uids)
                    write_proc(f"/proc/{parent}/gid_map", f"0 0 1\n{gid} {gid} 1")
                    code = 0
                except OSError as exc:
                    os.write(done_write, str(exc.errno or 0).encode())
        finally:
            os._exit(code)
    os.close(go_read)
    os.close(done_write)
    try:
        try:
            unshare(JAIL_NAMESPACES)
        except OSError as exc:
            raise fail(Step.NAMESPACES, exc) from exc
        os.write(go_write, b"g")
    finally:
        os.close(go_write)  # unshare failed: end of file tells the helper to go
        _, status = os.waitpid(helper, 0)
        with os.fdopen(done_read, "rb") as reader:
            report = reader.read()
    if os.waitstatus_to_exitcode(status) != 0:
        code = int(report) if report.isdigit() else errno.EPERM
        subject = f"uid {uid}, gid {gid}"
        if real_uid != uid:
            # The host checked that its namespace maps the range (_identity):
            # say which id, should a kernel or a container still refuse it.
            subject += (
                f" and real uid {real_uid} (one per worker), which this user namespace must map"
            )
        raise fail(Step.ID_MAPS, OSError(code, os.strerror(code)), subject)


def become(
    identity: WorkerIdentity | None, real_uid: int | None = None, *, keep_capabilities: bool = False
) -> None:
    """Switch to the worker's ids (root hosts only): ``real_uid`` (default: the
    shared uid) as the real uid, the shared uid as effective, saved and
    filesystem uid (:mod:`._identity`).

    pid 1 switches right after the fork, with ``keep_capabilities``
    (SECBIT_NO_SETUID_FIXUP, capabilities(7)): it still needs them to build
    the root, and :func:`drop_privileges` clears them before plugin code
    runs. Everything pid 1 creates from here on (the scaffolding, /tmp/work)
    is the worker's uid's, never host root's; DAC override still reaches
    root's files through the capability while it lasts, since host root is
    mapped. The monitor switches without keeping anything.
    """
    if identity is None or not identity.privileged:
        return
    if keep_capabilities:
        prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP)
    os.setresgid(identity.gid, identity.gid, identity.gid)
    os.setresuid(identity.uid if real_uid is None else real_uid, identity.uid, identity.uid)


def share_real_uid(identity: WorkerIdentity | None) -> None:
    """Give pid 1 the shared real uid back, for a worker that may exec programs.

    Before :func:`drop_privileges`: pid 1 still holds CAP_SETUID in its
    namespace. Only the real uid changes, so neither the parent-death
    signal nor dumpability is touched (commit_creds() resets them on a
    change of the effective or filesystem ids only).
    """
    if identity is None or not identity.privileged or not identity.own_real_uids:
        return
    os.setresuid(identity.uid, -1, -1)


def _write_id_maps(uid: int, gid: int) -> None:
    # user_namespaces(7): an unprivileged process may map exactly its own ids,
    # and for gid_map only after "deny" was written to setgroups. The same ids
    # inside keep the runtime (e.g. under /root/.pyenv) readable; the
    # capabilities root-inside holds are dropped before enter_jail returns.
    write_proc("/proc/self/setgroups", "deny")
    write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
    write_proc("/proc/self/gid_map", f"{gid} {gid} 1")


# -- step 2: the monitor and pid 1 ------------------------------------------------------


def monitor(
    child: int, alive_write: int, identity: WorkerIdentity | None, real_uid: int | None = None
) -> NoReturn:
    """Wait for the jailed child and exit with its status; never returns."""
    code = EXIT_MONITOR_FAILED
    parent = os.getppid()
    try:
        # Python's C handler writes each signal number to the wakeup fd, which
        # is about to be closed (and its number reused).
        signal.set_wakeup_fd(-1)
        # Hold nothing of the zygote's (channel, pipes): the host must see the
        # channel close when the worker dies, not when the monitor does. Only
        # stderr (the worker's log) stays, to explain a failure of the monitor.
        close_fds_except({2, alive_write})
        for number in signal.valid_signals():
            if callable(signal.getsignal(number)) or number in STOP_SIGNALS:
                # A Python handler (SIGINT's KeyboardInterrupt) would raise out
                # of waitpid into the caller's code, and an inherited SIG_IGN
                # would make the monitor unstoppable; with default actions a
                # signal ends the monitor, and PR_SET_PDEATHSIG then the jail.
                signal.signal(number, signal.SIG_DFL)
        # The monitor holds every capability in the new user namespace and
        # needs none: give them up (capabilities(7)), and on a root host
        # host root's uid too (it only waits for its child).
        become(identity, real_uid)
        if identity is not None and identity.privileged:
            # The uid change cleared the monitor's own PR_SET_PDEATHSIG (the
            # zygote's death must still end it, and with it the jail): re-arm
            # it, then make sure the zygote did not die in between.
            set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != parent:
                os.kill(child, signal.SIGKILL)
                os._exit(EXIT_ORPHANED)
        clear_capabilities()
        set_no_new_privs()
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            code = 128 - code
    except BaseException as exc:
        try:
            os.write(2, f"caplet jail monitor failed: {type(exc).__name__}: {exc}\n".encode())
        except BaseException:  # noqa: S110 - nothing is left to report to
            pass
    finally:
        os._exit(code)


def arm_parent_death(alive_read: int) -> None:
    try:
        set_parent_death_signal(signal.SIGKILL)
        # The monitor may have died before the signal was armed. getppid()
        # cannot tell: pid 1 of a new pid namespace always sees 0 as its
        # parent (pid_namespaces(7)). The pipe's write end lives only in the
        # monitor, so end-of-file here means the monitor is gone.
        readable, _, _ = select.select([alive_read], [], [], 0)
    except OSError as exc:
        raise fail(Step.PARENT_DEATH, exc) from exc
    finally:
        os.close(alive_read)
    if readable:
        os._exit(EXIT_ORPHANED)


# -- step 4: privileges -----------------------------------------------------------------


def drop_privileges(last_capability: int | None) -> None:
    try:
        prctl(PR_SET_SECUREBITS, SECUREBITS)
        # capabilities(7): the bounding set limits what execve can ever grant
        # again; it needs CAP_SETPCAP, so it goes before capset empties the rest.
        for capability in range(64 if last_capability is None else last_capability + 1):
            try:
                prctl(PR_CAPBSET_DROP, capability)
            except OSError as exc:
                # Without cap_last_cap, EINVAL marks the first unknown capability.
                if last_capability is None and exc.errno == errno.EINVAL:
                    break
                raise
        clear_capabilities()
        set_no_new_privs()
        # Not dumpable: no core file, and other processes of the same uid in
        # the jail cannot ptrace it or read its /proc/<pid>/mem; the process
        # itself still reads its own /proc/self (proc(5)).
        set_dumpable(False)
    except OSError as exc:
        raise fail(Step.CAPABILITIES, exc) from exc


@cache
def highest_capability() -> int | None:
    """The highest capability this kernel knows (capabilities(7)); None if unreadable."""
    try:
        return int(read_small("/proc/sys/kernel/cap_last_cap"))
    except (OSError, ValueError):
        return None
