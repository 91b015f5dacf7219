"""seccomp-bpf: the allowlist filter every worker installs before plugin code runs.

A worker calls :func:`apply_seccomp` after its namespaces, mounts, rlimits
and Landlock ruleset are in place. What the filter lets through is
:mod:`caplet._sandbox._seccomp_policy`: a reviewed allowlist, each system
call in a group that says why CPython or a common extension module needs
it, a few calls allowed only with certain arguments, and everything else
refused. The program is compiled here; the zygote compiles each variant
once (:func:`prepare_filters`) and every worker installs the cached bytes
with one prctl(2) or seccomp(2): a worker start makes no libseccomp call.

Why libseccomp (through ctypes, :class:`caplet._syscall.SeccompCompiler`)
and not hand-assembled BPF: an allowlist of 219 calls (186 on arm64, which
lacks the legacy ones) with argument rules on two architectures is a few
hundred instructions whose jump offsets, 64-bit argument halves and
syscall tables would all be ours to get right; libseccomp is the compiler
runc, Docker, podman/crun and systemd use for exactly this, ships with
every distribution (Debian: ``libseccomp2``), knows each architecture's
numbers, and its binary-tree layout (SCMP_FLTATR_CTL_OPTIMIZE = 2) reaches
any call in ~8 jumps instead of walking a list. Its maintained Python
bindings are not on PyPI (the ``seccomp`` module ships only inside
libseccomp's source tree; ``pyseccomp`` was last released in 2021), so the
C library is bound in :mod:`caplet._syscall` like every other foreign
call. Only compilation uses it: installing stays our own two calls, so no
worker's start depends on it. Without libseccomp (or older than 2.5.0)
the layer is reported missing with the fix (``apt-get install
libseccomp2``): strict isolation refuses to run, best-effort runs without
the filter and says so.

What the program does, in order:

1. the architecture in ``seccomp_data.arch`` must be the one the filter was
   built for, otherwise the process is killed (SECCOMP_RET_KILL_PROCESS,
   libseccomp's "bad arch" action): a syscall number means something else
   under another ABI (i386 via ``int 0x80``, 32-bit ARM compat);
2. on x86_64 the x32 ABI (``nr >= __X32_SYSCALL_BIT``) is refused: x32 is
   added to the context after every rule, so each of its calls meets only
   the default action;
3. allowed calls (:data:`~caplet._sandbox._seccomp_policy.ALLOWED`) return
   SECCOMP_RET_ALLOW, conditional ones
   (:data:`~caplet._sandbox._seccomp_policy.CONDITIONAL`) only when an
   argument rule holds, ``execve``/``execveat`` only with ``allow_exec``;
   ``memfd_create`` never
   (:data:`~caplet._sandbox._seccomp_policy.WITHOUT_EXEC`: an anonymous
   file is the one file a worker could write and map executable, memfd29);
   without ``memory_bounded`` (a worker with a memory limit but no memory
   cgroup, see :mod:`caplet._sandbox._cgroup`) ``splice``, ``setsockopt``
   and ``sendfile`` are narrowed
   (:data:`~caplet._sandbox._seccomp_policy.UNBOUNDED_MEMORY`);
4. a few calls that ordinary code makes and whose failure it handles are
   refused with RET_ERRNO, uncounted
   (:data:`~caplet._sandbox._seccomp_policy.QUIET_REFUSALS`): ``clone3``
   and ``openat2`` with ENOSYS (their arguments are in memory BPF cannot
   read; glibc and callers fall back to ``clone``/``openat``, which are
   checked), AF_UNIX ``socket()`` and the ``chown`` family with EPERM;
5. everything else meets the default action: refused and counted.

EPERM or ENOSYS for a refused call: a call this allowlist was reviewed
against (any number up to :data:`~caplet._sandbox._seccomp_numbers.NEWEST_REVIEWED`
that names a syscall) was considered and left out, so it fails with EPERM,
"not permitted"; a number above that (a kernel interface newer than the
review) or with no syscall behind it fails with ENOSYS, exactly as on a
kernel that lacks it, so that glibc and libraries take the fallback they
already have for older kernels instead of failing hard. That is the line
Docker, runc and systemd draw too. x32 numbers get EPERM, as before.

Counting denials: built with ``notify=True`` the default action is
SECCOMP_RET_USER_NOTIF and :func:`apply_seccomp` installs the program with
SECCOMP_FILTER_FLAG_NEW_LISTENER, returning the listener fd. The worker
hands it to the zygote, whose :class:`DenialCounter` answers every
notification with EPERM or ENOSYS as above (never
SECCOMP_USER_NOTIF_FLAG_CONTINUE: the call is not run) and counts it by
name. RET_TRAP with a SIGSYS handler was the alternative, rejected: the
plugin could replace the handler. Where the kernel lacks user notification
(:func:`seccomp_notify_problem`) the default action is RET_ERRNO(EPERM) for
every refused number (newer ones included: such kernels predate them) and
denials go uncounted.

This module runs inside workers: it imports only the standard library and
caplet base and sandbox modules.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import select
import sys
from pathlib import Path

from caplet._errors import SandboxError
from caplet._sandbox._seccomp_numbers import (
    ARCH_TOKEN,
    AUDIT_ARCH,
    SYSCALL_NUMBERS,
    denial_errno,
    machine_or_native,
    syscall_names,
    syscall_number,
)
from caplet._sandbox._seccomp_policy import (
    ALLOWED,
    CONDITIONAL,
    EXEC,
    NEVER_ALLOWED,
    QUIET_REFUSALS,
    UNBOUNDED_MEMORY,
    UNBOUNDED_MEMORY_REFUSALS,
    WITH_EXEC,
    WORKER_UMASK_BITS,
)
from caplet._syscall import (
    LIBSECCOMP_MIN_VERSION,
    LIBSECCOMP_SONAME,
    SCMP_ACT_ALLOW,
    SCMP_ACT_KILL_PROCESS,
    SCMP_ACT_NOTIFY,
    SCMP_ARCH_X32,
    SCMP_CMP_MASKED_EQ,
    SCMP_FLTATR_ACT_BADARCH,
    SCMP_FLTATR_CTL_OPTIMIZE,
    SECCOMP_FILTER_FLAG_NEW_LISTENER,
    SeccompCompiler,
    SeccompNotif,
    install_seccomp_filter,
    install_seccomp_listener,
    libseccomp_native_arch,
    libseccomp_syscall_number,
    libseccomp_version,
    scmp_act_errno,
    seccomp_action_available,
    seccomp_filter_flag_supported,
    seccomp_notif_recv,
    seccomp_notif_send,
    seccomp_notif_sizes,
    set_no_new_privs,
)

__all__ = [
    "AUDIT_ARCH",
    "DENIED_SYSCALLS",
    "LIBSECCOMP_FIX",
    "MAX_DENIAL_NAMES",
    "SERVE_BATCH",
    "SYSCALL_NUMBERS",
    "DenialCounter",
    "apply_seccomp",
    "build_filter",
    "denial_errno",
    "prepare_filters",
    "seccomp_available",
    "seccomp_enforced",
    "seccomp_notify_problem",
    "seccomp_problem",
    "syscall_names",
    "syscall_number",
    "wait_with_poll",
]

#: Calls that are never on the allowlist (a tripwire the tests check).
DENIED_SYSCALLS: tuple[str, ...] = NEVER_ALLOWED

#: What to tell the user when libseccomp cannot be used.
LIBSECCOMP_FIX = (
    "install libseccomp >= 2.5 (Debian/Ubuntu: apt-get install libseccomp2; Fedora/RHEL: "
    "dnf install libseccomp; Alpine: apk add libseccomp)"
)

#: SCMP_FLTATR_CTL_OPTIMIZE: 2 lays the calls out as a binary tree by number.
_OPTIMIZE_BINARY_TREE = 2
#: Why prepare_filters could not compile the filter, when it could not.
_PREPARE_PROBLEM: str | None = None


def _compile(machine: str, *, allow_exec: bool, notify: bool, memory_bounded: bool) -> bytes:
    arch = ARCH_TOKEN[machine]
    deny = SCMP_ACT_NOTIFY if notify else scmp_act_errno(errno.EPERM)
    with SeccompCompiler(deny) as compiler:
        compiler.set_attribute(SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)
        compiler.set_attribute(SCMP_FLTATR_CTL_OPTIMIZE, _OPTIMIZE_BINARY_TREE)
        native = libseccomp_native_arch()
        if native != arch:  # only tests build another machine's filter
            compiler.add_arch(arch)
            compiler.remove_arch(native)

        def number(name: str) -> int | None:
            if native == arch:
                return syscall_number(name, machine)
            # Another machine (tests only): libseccomp takes *native* numbers
            # and translates them by name (arch_syscall_translate), so a call
            # newer than its native table, or absent there, cannot be added.
            target = libseccomp_syscall_number(arch, name)
            return None if target is None else libseccomp_syscall_number(native, name)

        plain = [name for group in ALLOWED for name in group.syscalls]
        conditionals = list(CONDITIONAL)
        refusals = list(QUIET_REFUSALS)
        if not memory_bounded:
            narrowed = {c.syscall for c in UNBOUNDED_MEMORY}
            narrowed |= {r.syscall for r in UNBOUNDED_MEMORY_REFUSALS}
            plain = [name for name in plain if name not in narrowed]
            conditionals += UNBOUNDED_MEMORY
            refusals += UNBOUNDED_MEMORY_REFUSALS
        if allow_exec:
            plain += (*EXEC, *WITH_EXEC.syscalls)
        # WITHOUT_EXEC (memfd_create) is on no worker's list (memfd29).
        for name in plain:
            found = number(name)
            if found is not None:  # absent on this architecture (arm64 has no open(2))
                compiler.add_rule(SCMP_ACT_ALLOW, found)
        for conditional in conditionals:
            found = number(conditional.syscall)
            if found is None:
                continue
            for rule in conditional.rules:
                compiler.add_rule(
                    SCMP_ACT_ALLOW,
                    found,
                    [(c.arg, SCMP_CMP_MASKED_EQ, c.mask, c.value) for c in rule],
                )
        for refusal in refusals:
            found = number(refusal.syscall)
            action = scmp_act_errno(refusal.errno)
            if found is None or action == deny:
                continue  # without counting, the default action is this very refusal
            for rule in refusal.rules or ((),):
                compiler.add_rule(
                    action, found, [(c.arg, SCMP_CMP_MASKED_EQ, c.mask, c.value) for c in rule]
                )
        if machine == "x86_64":
            # After every rule, so no rule applies to it: x32 meets the default.
            compiler.add_arch(SCMP_ARCH_X32)
        return compiler.export()


@functools.cache
def build_filter(
    *,
    allow_exec: bool,
    machine: str | None = None,
    notify: bool = False,
    memory_bounded: bool = True,
) -> bytes:
    """The seccomp program (``struct sock_filter`` entries, 8 bytes each) for ``machine``.

    ``machine`` defaults to ``os.uname().machine``; an architecture caplet
    has no table for raises :class:`SandboxError` (fail closed), as does a
    missing or failing libseccomp. With ``notify`` the default action is
    SECCOMP_RET_USER_NOTIF instead of RET_ERRNO(EPERM), for a supervisor to
    answer and count. ``memfd_create`` meets the default action in every
    variant (memfd29). Without ``memory_bounded`` (no memory cgroup charges
    the worker), ``splice`` meets the default action
    (refused and counted) whatever its arguments, ``setsockopt`` may not
    size a socket's buffers, and ``sendfile`` fails quietly with EPERM. The result depends
    only on the arguments, so it is cached: the zygote builds each variant
    once (:func:`prepare_filters`) and every worker inherits them.
    """
    machine = machine_or_native(machine)
    if machine not in ARCH_TOKEN:
        raise SandboxError(
            f"seccomp: no syscall table for machine {machine!r} (supported: "
            f"{', '.join(sorted(ARCH_TOKEN))}); refusing to run a worker with a "
            'filter that cannot be built. Use isolation = "best-effort" to run without it.'
        )
    problem = _libseccomp_problem()
    if problem is not None:
        raise SandboxError(f"seccomp: {problem}")
    try:
        return _compile(
            machine, allow_exec=allow_exec, notify=notify, memory_bounded=memory_bounded
        )
    except OSError as exc:
        raise SandboxError(
            f"seccomp: libseccomp could not compile the worker's filter ({exc.strerror}); "
            f'report it, or use isolation = "best-effort" to run without the filter'
        ) from exc


def prepare_filters() -> None:
    """Build every variant of the filter now (in the zygote, before it forks).

    Never raises: a failure is remembered and reported by
    :func:`seccomp_problem`, so the layer shows as missing (strict isolation
    then refuses to start workers) instead of the zygote dying.
    """
    global _PREPARE_PROBLEM
    if _libseccomp_problem() is not None or _kernel_problem() is not None:
        return
    syscall_names()
    try:
        for allow_exec, notify, memory_bounded in itertools.product((False, True), repeat=3):
            if notify and seccomp_notify_problem() is not None:
                continue
            build_filter(allow_exec=allow_exec, notify=notify, memory_bounded=memory_bounded)
    except SandboxError as exc:
        _PREPARE_PROBLEM = str(exc).removeprefix("seccomp: ")


def wait_with_poll() -> None:
    """Make this interpreter's selectors and asyncio wait with poll(2), never epoll.

    The filter of a worker that cannot exec refuses ``epoll_create``
    (:data:`~caplet._sandbox._seccomp_policy.WITH_EXEC`: the kernel counts
    epoll watches per uid, shared with the host's user or every other
    worker, attack10). ``select.epoll`` goes, so ``from select import epoll``
    fails plainly and a later ``import selectors`` picks the poll selector
    without probing a refused call; a ``selectors`` the zygote already
    imported chose epoll at its import, so its default is set back here.
    asyncio's event loops take ``selectors.DefaultSelector`` when they are
    made, so they wait with poll too.
    """
    if hasattr(select, "epoll"):
        del select.epoll
    selectors = sys.modules.get("selectors")
    if selectors is not None:
        selectors.DefaultSelector = selectors.PollSelector  # type: ignore[attr-defined]


def apply_seccomp(
    *, allow_exec: bool, notify: bool = False, memory_bounded: bool = True
) -> int | None:
    """Install the filter on the calling thread; it is inherited and never removed.

    Sets no_new_privs first (seccomp(2): without CAP_SYS_ADMIN a filter may
    only be installed under no_new_privs, which also stops a set-uid program
    from gaining privileges the filter was written against). The filter
    covers the calling thread and everything it creates afterwards, not
    threads that already exist: call it before any thread is started.

    Without ``notify`` the filter is installed with prctl(PR_SET_SECCOMP)
    and None is returned. With ``notify`` it is the counting program,
    installed with seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER), and the
    listener fd is returned: until a supervisor serves it, a refused call
    blocks (and once every copy of the fd is closed it fails with ENOSYS,
    seccomp_unotify(2)), so the caller must hand it over before making any
    refused call and must never run plugin code if that fails.

    ``memory_bounded=False`` refuses what only a memory cgroup would bound
    (see :func:`build_filter`).

    Without ``allow_exec`` the filter refuses epoll instances and inotify (WITH_EXEC),
    so this interpreter is switched to poll(2) first: see :func:`wait_with_poll`.
    """
    program = build_filter(allow_exec=allow_exec, notify=notify, memory_bounded=memory_bounded)
    if not allow_exec:
        wait_with_poll()
    # The filter refuses a umask without others' write bit, so the worker must start
    # with it whatever the host's (a service's umask 0 made every file a worker
    # created writable by every local user: attack34); the rest stays the host's.
    os.umask(os.umask(0) | WORKER_UMASK_BITS)
    try:
        set_no_new_privs()
        if notify:
            return install_seccomp_listener(program)
        install_seccomp_filter(program)
    except OSError as exc:
        raise SandboxError(
            f"seccomp: the kernel refused the worker's filter ({exc.strerror}); it needs "
            "CONFIG_SECCOMP_FILTER (and Linux >= 5.0 to count denials). Use isolation = "
            '"best-effort" to run without it.'
        ) from exc
    return None


def _libseccomp_problem() -> str | None:
    try:
        version = libseccomp_version()
    except (OSError, AttributeError) as exc:
        return f"libseccomp cannot be loaded ({LIBSECCOMP_SONAME}: {exc}); {LIBSECCOMP_FIX}"
    if version < LIBSECCOMP_MIN_VERSION:
        shown = ".".join(map(str, version))
        return f"libseccomp {shown} is too old (caplet needs >= 2.5.0); {LIBSECCOMP_FIX}"
    return None


def _kernel_problem() -> str | None:
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError as exc:
        return f"/proc/self/status is unreadable ({exc.strerror})"
    if not any(line.startswith("Seccomp:") for line in status.splitlines()):
        return "the kernel has no seccomp (CONFIG_SECCOMP)"
    if os.uname().machine not in ARCH_TOKEN:
        return f"no syscall table for machine {os.uname().machine!r}"
    for action, name in (
        (SCMP_ACT_KILL_PROCESS, "SECCOMP_RET_KILL_PROCESS"),
        (scmp_act_errno(0) & 0xFFFF0000, "SECCOMP_RET_ERRNO"),
        (SCMP_ACT_ALLOW, "SECCOMP_RET_ALLOW"),
    ):
        if not seccomp_action_available(action):
            return f"the kernel's seccomp filters lack {name} (needs CONFIG_SECCOMP_FILTER)"
    return None


def seccomp_problem() -> str | None:
    """None when workers can get the filter here, else why not, with the fix (``caplet doctor``).

    The cheap, in-process probe (the zygote calls it at start-up): the
    kernel (``Seccomp:`` in ``/proc/self/status``, proc(5);
    SECCOMP_GET_ACTION_AVAIL for every action the filter returns), a
    syscall table for this machine, libseccomp >= 2.5.0, and, in a zygote,
    whether :func:`prepare_filters` compiled the filter. Nothing is
    installed; :func:`seccomp_enforced` is the thorough check.
    """
    return _kernel_problem() or _libseccomp_problem() or _PREPARE_PROBLEM


def seccomp_available() -> bool:
    """Whether workers can get the filter here (:func:`seccomp_problem` finds nothing)."""
    return seccomp_problem() is None


def seccomp_notify_problem() -> str | None:
    """None when denials can be counted here, else why not (``caplet doctor`` shows it).

    Side-effect free: SECCOMP_GET_ACTION_AVAIL for SECCOMP_RET_USER_NOTIF,
    the NEW_LISTENER flag probed with a NULL program (see
    :func:`caplet._syscall.seccomp_filter_flag_supported`), and the kernel's
    struct seccomp_notif and seccomp_notif_resp sizes, which must be the
    ones the RECV and SEND ioctl numbers were built from.
    """
    if _kernel_problem() is not None or _libseccomp_problem() is not None:
        return "seccomp filters are not available"
    if not seccomp_action_available(SCMP_ACT_NOTIFY):
        return "the kernel has no SECCOMP_RET_USER_NOTIF (needs Linux >= 5.0)"
    if not seccomp_filter_flag_supported(SECCOMP_FILTER_FLAG_NEW_LISTENER):
        return "the kernel refuses SECCOMP_FILTER_FLAG_NEW_LISTENER (needs Linux >= 5.0)"
    sizes = seccomp_notif_sizes()
    if sizes is None or (sizes.seccomp_notif, sizes.seccomp_notif_resp) != (80, 24):
        return "the kernel's struct seccomp_notif layout is not the one caplet knows"
    return None


#: Most notifications one listener gets answered per turn of the zygote's loop,
#: so a plugin flooding denied syscalls delays spawn requests and other
#: workers' notifications by at most this many round trips (each a few µs).
SERVE_BATCH = 16
#: Most distinct names counted per worker; the rest are counted as "other".
#: Names come from a fixed table, but a number without one (any value with
#: __X32_SYSCALL_BIT set, or above the review) is counted under its own
#: number, and a plugin must not be able to grow the zygote's memory or the
#: status report with them.
MAX_DENIAL_NAMES = 64
_OVERFLOW_NAME = "other"


class DenialCounter:
    """The supervisor side of one worker's listener: refuse (EPERM or ENOSYS), count by name.

    Runs in the zygote, which polls :attr:`fd` with its other descriptors and
    calls :meth:`serve` when it is ready. Never blocks: each RECV follows a
    poll that reported POLLIN, and with one supervisor thread a pending
    notification cannot be taken by anyone else (a target killed in
    between makes RECV fail with ENOENT, it does not block).
    """

    __slots__ = ("_machine", "_names", "_notification", "_poller", "counts", "fd")

    def __init__(self, fd: int, *, machine: str | None = None) -> None:
        self._machine = machine_or_native(machine)
        self.fd: int | None = fd
        #: Syscall name -> times denied (kept after the listener is closed).
        self.counts: dict[str, int] = {}
        self._names = syscall_names(machine)
        self._notification = SeccompNotif()
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)

    def serve(self, limit: int = SERVE_BATCH) -> bool:
        """Answer up to ``limit`` pending notifications; False once the listener hung up.

        POLLHUP means no process uses the filter any more (seccomp_unotify(2)):
        the caller then closes the listener. OSError for anything but the
        target's death (the caller closes the listener; the worker's denied
        calls then fail with ENOSYS, still denied).
        """
        if self.fd is None:
            return False
        for _ in range(limit):
            events = self._poller.poll(0)
            if not events:
                return True
            revents = events[0][1]
            if revents & select.POLLIN:
                self._answer(self.fd)
            elif revents & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return False
        return True

    def _answer(self, fd: int) -> None:
        notification = self._notification
        try:
            seccomp_notif_recv(fd, notification)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EINTR):
                return  # the target died (or a signal came) before we took it
            raise
        number = int(notification.data.nr)
        self._count(number)
        try:
            # error = -errno, val = 0, flags = 0: the syscall fails as with
            # RET_ERRNO and never runs (no USER_NOTIF_FLAG_CONTINUE).
            error = denial_errno(number, self._machine)
            seccomp_notif_send(fd, int(notification.id), error=-error)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: the target died waiting
                raise

    def _count(self, number: int) -> None:
        name = self._names.get(number)
        if name is None:
            name = f"syscall {number}"
        counts = self.counts
        if name not in counts and len(counts) >= MAX_DENIAL_NAMES - 1:
            name = _OVERFLOW_NAME
        counts[name] = counts.get(name, 0) + 1

    def close(self) -> None:
        """Close the listener (idempotent); :attr:`counts` stays readable."""
        if self.fd is not None:
            self._poller.unregister(self.fd)
            os.close(self.fd)
            self.fd = None


# The thorough probe applies the real filter in a throwaway interpreter and
# checks that a refused call (an AF_INET socket) is refused: seccomp is never
# tried on the calling process, and a fork from a possibly threaded host is
# avoided. The package root comes first on sys.path so that the probe runs
# this very copy of caplet.
_PROBE = """
import socket, sys
sys.path.insert(0, sys.argv[1])
from caplet._sandbox._seccomp import apply_seccomp
apply_seccomp(allow_exec=False)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
except PermissionError:
    sys.exit(0)
sys.exit(3)
"""


def seccomp_enforced() -> bool:
    """Whether a child interpreter under this module's filter is really refused a refused call.

    Costs one interpreter start (tens of milliseconds): meant for ``caplet
    doctor``, not for every worker start.
    """
    import subprocess

    if not seccomp_available():
        return False
    package_root = str(Path(__file__).resolve().parents[2])
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, package_root],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={},
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0
