"""Resource limits: what one worker may consume (setrlimit(2), via :mod:`resource`).

A worker calls :func:`apply_rlimits` after its namespaces and mounts are in
place and before any plugin byte is imported (where it sits among Landlock
and seccomp does not matter: setrlimit(2) is allowed by both). Every limit
is set with soft == hard, and a hard limit is only ever lowered, never raised
(lowering needs no privilege, so this works for unprivileged hosts too, and a
plugin cannot raise the soft limit back up to a looser hard one).

The file-size limit makes an oversized write raise SIGXFSZ, whose default
action kills the process (signal(7)). CPython ignores SIGXFSZ at start-up so
that the write fails with ``OSError(EFBIG)`` instead; the worker must keep
SIGXFSZ at SIG_IGN (and restore it to SIG_IGN if anything, such as a zygote,
changed it) so a plugin sees the error and the host sees an error reply, not
a dead worker.

This module runs inside workers: it imports only the standard library and
caplet base modules.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, fields

from caplet._errors import SandboxError

__all__ = ["ResourceLimits", "apply_rlimits", "millicores", "rlimits_available"]

_MIB = 1024 * 1024
_OPTIONAL = frozenset({"memory_mb", "cpu_s", "processes", "cpu_millicores"})


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """The rlimits of one worker; ``None`` leaves that limit as inherited.

    - ``memory_mb``: RLIMIT_AS, the address space (virtual memory) in MiB; an
      allocation beyond it fails (``MemoryError`` in Python). It bounds each
      process's mappings only; the worker's memory cgroup
      (:mod:`caplet._sandbox._cgroup`) bounds the rest.
    - ``cpu_s``: RLIMIT_CPU, CPU seconds. Soft and hard are both ``cpu_s``:
      with no gap between them the kernel's hard-limit check fires first and
      the worker is killed with SIGKILL (setrlimit(2)); a plugin cannot
      catch SIGXCPU and keep going.
    - ``open_files``: RLIMIT_NOFILE, one more than the highest fd number.
    - ``processes``: RLIMIT_NPROC. It counts every process and thread of the
      worker's *real uid* system-wide and is not enforced at all for root or
      holders of CAP_SYS_RESOURCE/CAP_SYS_ADMIN, so it is only useful when
      the worker runs under a dedicated unprivileged uid. ``None`` (the
      default) leaves it alone; the pids cgroup (pids.max) and the pid
      namespace bound a worker's processes instead.
    - ``file_size_mb``: RLIMIT_FSIZE, the largest file the worker may write.
    - ``pending_signals``: RLIMIT_SIGPENDING, signals queued to the worker's
      processes (and POSIX timers, which reserve one each). Never inherited:
      a jail's pending signals are charged up the user-namespace tree to the
      uid that created it (kernel/ucount.c), so with the host's own limit a
      plugin queued all of host root's budget and sigqueue(3) failed for
      every root process on the machine (a red-team finding).

    - ``cpu_millicores``: not an rlimit: the rate at which the worker's
      processes together may use CPU, in thousandths of a core (1000: one
      core's worth of time, however many threads), capped by its cgroup's cpu
      controller where there is one (:mod:`caplet._sandbox._cgroup`); ``None``
      leaves the rate alone.

    RLIMIT_CORE is always 0: a core dump of a plugin could carry the host's
    data (inherited from the zygote) to disk.
    """

    memory_mb: int | None = 512
    cpu_s: int | None = 60
    open_files: int = 256
    processes: int | None = None
    file_size_mb: int = 64
    pending_signals: int = 1024
    cpu_millicores: int | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            optional = field.name in _OPTIONAL
            if value is None and optional:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                hint = " or None" if optional else ""
                raise SandboxError(
                    f"resource limit {field.name} must be a positive integer{hint}, "
                    f"got {value!r}; fix the worker's ResourceLimits."
                )


def millicores(cores: float) -> int:
    """A rate in cores (``cpu_cores``) as ``ResourceLimits.cpu_millicores``."""
    return max(round(cores * 1000), 1)


def _lowered(wanted: int, current_hard: int) -> int:
    # RLIM_INFINITY is the largest value; any finite hard limit may only shrink.
    if current_hard == resource.RLIM_INFINITY:
        return wanted
    return min(wanted, current_hard)


def _set(name: str, which: int, wanted: int) -> None:
    try:
        _, hard = resource.getrlimit(which)
        value = _lowered(wanted, hard)
        resource.setrlimit(which, (value, value))
    except (OSError, ValueError) as exc:
        raise SandboxError(f"setrlimit({name}, {wanted}) failed for the worker: {exc}") from exc


def apply_rlimits(limits: ResourceLimits) -> None:
    """Set the worker's rlimits (soft == hard, each capped by the current hard limit).

    Applies to the calling process and is inherited across fork and execve.
    Raises :class:`SandboxError` naming the limit the kernel refused.
    """
    if limits.memory_mb is not None:
        _set("RLIMIT_AS", resource.RLIMIT_AS, limits.memory_mb * _MIB)
    if limits.cpu_s is not None:
        _set("RLIMIT_CPU", resource.RLIMIT_CPU, limits.cpu_s)
    _set("RLIMIT_NOFILE", resource.RLIMIT_NOFILE, limits.open_files)
    if limits.processes is not None:
        _set("RLIMIT_NPROC", resource.RLIMIT_NPROC, limits.processes)
    _set("RLIMIT_FSIZE", resource.RLIMIT_FSIZE, limits.file_size_mb * _MIB)
    _set("RLIMIT_SIGPENDING", resource.RLIMIT_SIGPENDING, limits.pending_signals)
    _set("RLIMIT_CORE", resource.RLIMIT_CORE, 0)


def rlimits_available() -> bool:
    """Whether rlimits can be read on this system (the doctor's probe).

    setrlimit(2) exists on every POSIX system; the probe reads each limit
    caplet sets so a platform missing one of them reports False.
    """
    try:
        for which in (
            resource.RLIMIT_AS,
            resource.RLIMIT_CPU,
            resource.RLIMIT_NOFILE,
            resource.RLIMIT_NPROC,
            resource.RLIMIT_FSIZE,
            resource.RLIMIT_CORE,
        ):
            resource.getrlimit(which)
    except (OSError, ValueError, AttributeError):
        return False
    return True
