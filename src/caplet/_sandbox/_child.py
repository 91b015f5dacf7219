"""The process behind a worker, however it was started: the :class:`ChildProcess` seam.

A plain child (:class:`PopenChild`, :mod:`caplet._sandbox._subprocess`) and a
worker forked by the zygote into its own namespaces
(:mod:`caplet._sandbox._sandboxed`) differ only in how they are waited for
and killed; the channel (:mod:`caplet._sandbox._channel_worker`) is shared.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import types
from collections.abc import Mapping
from typing import Protocol

__all__ = ["ChildProcess", "PopenChild", "describe_status"]

_NO_DENIALS: Mapping[str, int] = types.MappingProxyType({})


def describe_status(returncode: int) -> str:
    """How a process ended, from a :attr:`subprocess.Popen.returncode` ("exited with code 3")."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    return f"was killed by signal {number} ({name})"


def _open_pidfd(pid: int) -> int | None:
    """A pidfd lets the host wait for exit *without* reaping (Linux >= 5.3).

    While the leader is unreaped its pid, and so its process-group id, cannot
    be reused, which makes the killpg that follows race-free. Elsewhere the
    worker is reaped first and the group killed after (a tiny reuse window).
    """
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class ChildProcess(Protocol):
    """The process behind a worker, however it was started.

    A plain child (:class:`PopenChild`) and a worker forked by the zygote
    into its own namespaces (:mod:`caplet._sandbox._sandboxed`) differ only in
    how they are waited for and killed; the channel logic is shared.
    """

    @property
    def pid(self) -> int: ...

    def exited(self) -> bool:
        """True once the process has exited (it may not be reaped yet)."""
        ...

    def wait_exit(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the process to exit, without reaping it."""
        ...

    def kill_and_reap(self) -> int:
        """Kill the process and everything it started; return its status.

        The status has :attr:`subprocess.Popen.returncode` semantics: the
        exit code, or minus the signal number.
        """
        ...

    @property
    def denials(self) -> Mapping[str, int]:
        """Syscall name -> times seccomp denied it (known once reaped; may stay empty)."""
        ...

    @property
    def oom_kills(self) -> int:
        """Processes of the worker the OOM killer took (known once reaped; 0 if none)."""
        ...

    @property
    def cpu_killed(self) -> bool:
        """Whether it was killed for its processes' CPU time in all (known once reaped)."""
        ...


class PopenChild:
    """A worker started with :class:`subprocess.Popen` in a session of its own."""

    __slots__ = ("_pidfd", "_process")

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._pidfd = _open_pidfd(process.pid)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def denials(self) -> Mapping[str, int]:
        """Always empty: a plain process has no seccomp filter to count denials of."""
        return _NO_DENIALS

    @property
    def oom_kills(self) -> int:
        """Always 0: a plain process has no memory cgroup of its own to report them."""
        return 0

    @property
    def cpu_killed(self) -> bool:
        """Always False: a plain process has no cgroup counting its CPU (RLIMIT_CPU only)."""
        return False

    def exited(self) -> bool:
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def wait_exit(self, timeout_s: float) -> None:
        if self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            poller.poll(max(0, round(timeout_s * 1000)))
            return
        try:
            self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass

    def kill_and_reap(self) -> int:
        # The group is killed even when the worker exited by itself, so
        # nothing it spawned survives it (it is its own session leader).
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is already empty
        returncode = self._process.wait()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return returncode
