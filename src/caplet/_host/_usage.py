"""What a worker uses: its CPU seconds and peak memory, read from ``/proc``.

A worker is a small process tree: with the namespaces layer, the pid the
host knows is the jail's monitor and the plugin runs in its child (pid 1
of the jail's pid namespace); without it, the worker is that one process.
So a sample reads ``/proc/<pid>/stat`` of the worker and of each of its
children (``/proc/<pid>/task/<pid>/children``, proc(5)): ``utime + stime``
of each, plus ``cutime + cstime`` (the children they have waited for, e.g.
a ``proc.exec`` program), and ``VmHWM`` (peak resident set) from
``/proc/<pid>/status``.

Those counters miss what a worker runs in processes it never waits for
(the jail's pid 1 is the monitor's only child; a child of pid 1 counts only
once reaped) and all of it when the worker ignores SIGCHLD: the kernel then
reaps a child without adding its times to the parent's, so a plugin that
spun in a child spent CPU no budget saw (attack13). Where the zygote gave
the worker cgroups, their own count is taken instead, which includes every
process that was ever in them (:func:`caplet._sandbox._cgroup.cpu_count`:
cgroup v2's ``cpu.stat``, v1's ``cpuacct``); ``/proc`` stays for a host
without them and for the peak memory. ``getrusage(RUSAGE_CHILDREN)`` would
count only children the host itself has waited for, and the zygote, not
the host, reaps workers.

The stat files stay open between samples: ``pread`` of an open ``/proc``
file re-reads it (a few microseconds), which is what lets a plugin with a
CPU budget be sampled after every call. A worker that is gone reads as
``None``: the caller keeps its last sample.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from caplet._sandbox._cgroup import CpuCount, cpu_count

__all__ = ["Usage", "WorkerUsage"]

_TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: stat(5) fields after the ``(comm)``: utime, stime, cutime, cstime are fields 14-17 of
#: the line, i.e. 11-14 of what follows ``) ``.
_CPU_FIELDS: Final = slice(11, 15)
_READ: Final = 4096
#: Children followed per worker (the monitor has one; a plain worker may have a few).
_MAX_CHILDREN: Final = 8


@dataclass(frozen=True, slots=True)
class Usage:
    """One sample: CPU seconds used so far, and the peak resident set in bytes (0: unknown)."""

    cpu_s: float
    peak_bytes: int


class WorkerUsage:
    """Samples one worker's process tree (module docstring). Not thread-safe: the caller
    serialises samples (:class:`caplet._host._metrics.PluginMeter` holds a lock)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        #: The worker's cgroup's own count, found while it surely runs (None: no cgroup).
        self._counted: CpuCount | None = cpu_count(pid)
        #: pid -> open descriptor of its /proc/<pid>/stat.
        self._stats: dict[int, int] = {}
        self.closed = False

    def sample(self) -> Usage | None:
        """The tree's usage now; None when the worker is gone (or /proc cannot be read)."""
        if self.closed:
            return None
        top = self._cpu(self.pid)
        if top is None:
            return None
        cpu = top
        peak = _peak(self.pid)
        for child in self._children():
            used = self._cpu(child)
            if used is not None:
                cpu += used
                peak = max(peak, _peak(child))
        counted = None if self._counted is None else self._counted.seconds()
        return Usage(cpu if counted is None else max(cpu, counted), peak)

    def close(self) -> None:
        """Close the open stat files (idempotent)."""
        self.closed = True
        for fd in self._stats.values():
            os.close(fd)
        self._stats.clear()

    def _children(self) -> list[int]:
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children", "rb") as handle:
                text = handle.read(_READ)
        except OSError:
            return []
        return [int(word) for word in text.split()[:_MAX_CHILDREN] if word.isdigit()]

    def _cpu(self, pid: int) -> float | None:
        fd = self._stats.get(pid)
        if fd is None:
            try:
                fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            self._stats[pid] = fd
        try:
            data = os.pread(fd, _READ, 0)
        except OSError:  # ESRCH: the process is gone
            os.close(self._stats.pop(pid))
            return None
        return _parse_cpu(data)


def _parse_cpu(data: bytes) -> float | None:
    """utime + stime + cutime + cstime of a stat line, in seconds (None if malformed).

    The command name in parentheses may hold spaces and parentheses (the
    plugin chooses its process name), so the fields are taken after the
    *last* ``)``.
    """
    end = data.rfind(b")")
    if end < 0:
        return None
    fields = data[end + 2 :].split()
    try:
        ticks = sum(int(value) for value in fields[_CPU_FIELDS])
    except ValueError:
        return None
    if len(fields) < _CPU_FIELDS.stop:
        return None
    return ticks / _TICKS


def _peak(pid: int) -> int:
    """VmHWM of ``pid`` in bytes (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            text = handle.read(_READ * 2)
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(b"VmHWM:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return 0
