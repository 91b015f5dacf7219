"""How a worker ended, in words for the host's errors: what the kernel's OOM killer and the
zygote's CPU-time kill did to it, and the tail of its stderr.

Split out of :mod:`caplet._sandbox._channel_worker` (which talks to a live worker) when it
grew past 600 lines: these read a worker that is already reaped.
"""

from __future__ import annotations

import os
from typing import IO

from caplet._sandbox._child import ChildProcess
from caplet._sandbox._launcher import WorkerSpec

__all__ = ["death_notes", "read_tail", "tail_text"]

#: How much of the worker's stderr is quoted in errors.
_TAIL_BYTES = 2048


def death_notes(process: ChildProcess, spec: WorkerSpec) -> str:
    """What killed the worker besides its own exit, if one of its limits did (known once
    it is reaped): each note says which limit and how to raise it."""
    return _memory_note(process, spec) + _cpu_note(process, spec)


def _memory_note(process: ChildProcess, spec: WorkerSpec) -> str:
    """What the OOM killer did to the worker, if anything."""
    kills = process.oom_kills
    if not kills:
        return ""
    memory, tmp = spec.memory_mb, spec.tmp_size_mb
    if memory is None:  # no limit of its own: the machine (or a cgroup above) ran out
        return f"; the kernel's OOM killer stopped {kills} of its processes"
    return (
        f"; the kernel's OOM killer stopped {kills} of its processes at the worker's "
        f"memory limit of {memory + tmp} MiB (memory_mb {memory} + tmp_size_mb {tmp}); "
        "if the plugin needs more, raise its memory_mb"
    )


def _cpu_note(process: ChildProcess, spec: WorkerSpec) -> str:
    """Why the zygote killed the worker, when it was for its CPU time in all."""
    if not process.cpu_killed:
        return ""
    return (
        f"; its processes together used more than its CPU limit of "
        f"{spec.cpu_s} CPU seconds (cpu_s, counted over every process it "
        "started); if the plugin needs more, raise its cpu_s"
    )


def read_tail(log: IO[bytes]) -> str:
    """The last :data:`_TAIL_BYTES` of the worker's stderr log (empty if unreadable)."""
    try:
        fd = log.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, _TAIL_BYTES, max(0, size - _TAIL_BYTES))
    except (OSError, ValueError):
        return ""
    return data.decode("utf-8", "replace").strip()


def tail_text(tail: str) -> str:
    """The stderr tail as the end of an error message."""
    if not tail:
        return "; its stderr was empty"
    return f"; its stderr ends with:\n{tail}"
