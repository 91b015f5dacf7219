"""The zygote's live children: status pipes, cgroups, seccomp listeners, reaping.

:class:`_Children` is what the zygote's loop polls for its children (their
listeners' denials) and what it writes when one ends (``_reap``: its status,
its denial counts and OOM kills, in one atomic pipe write). Apart from the
loop that owns it and from the child's own set-up, which never sees it.
"""

from __future__ import annotations

import math
import os
import select
import socket
import time
from dataclasses import dataclass, field

import msgpack

from caplet._sandbox._cgroup import CpuCount, WorkerCgroup
from caplet._sandbox._seccomp import (
    DenialCounter,
)
from caplet._sandbox._zygote_failures import _say
from caplet._sandbox._zygote_log import LogRelay
from caplet._sandbox._zygote_request import _PIPE_BUF, STATUS

__all__: list[str] = []

#: Seccomp notifications the zygote answers for one worker per second; past
#: them it stops polling that worker's listener until the second is over, and
#: the worker's denied calls wait (attack13: 77,000 a second took half of the
#: zygote's core, outside every cgroup and CPU count, and every other
#: worker's start queued behind them). Denials are rare in honest code.
NOTIFY_RATE = 4096
#: How often the zygote reads its workers' CPU counts (:meth:`_Children.enforce_cpu`):
#: a worker may pass its ``cpu_s`` by at most this much wall time per core.
CPU_CHECK_S = 0.5


@dataclass(slots=True)
class _Children:
    """The zygote's live children: status pipe and cgroups of each, and
    the descriptors its loop polls for their seccomp denials."""

    status: dict[int, int] = field(default_factory=dict)
    cgroups: dict[int, WorkerCgroup] = field(default_factory=dict)
    #: Cgroups whose processes were still exiting when their leader was reaped.
    pending: list[WorkerCgroup] = field(default_factory=list)
    #: Every descriptor the loop waits on (control, wakeup pipe, the rest below).
    poller: select.poll = field(default_factory=select.poll)
    #: Handover socket fd -> (child pid, socket) until the child's listener arrives.
    handovers: dict[int, tuple[int, socket.socket]] = field(default_factory=dict)
    #: Listener fd -> its counter, until the listener hangs up.
    listeners: dict[int, DenialCounter] = field(default_factory=dict)
    #: Child pid -> its counter, until the child is reaped and its counts reported.
    denials: dict[int, DenialCounter] = field(default_factory=dict)
    #: Stderr pipe fd -> its relay into the child's log, until the child is reaped
    #: (:mod:`caplet._sandbox._zygote_log`).
    logs: dict[int, LogRelay] = field(default_factory=dict)
    #: Child pid -> its stderr pipe fd in ``logs``.
    log_of: dict[int, int] = field(default_factory=dict)
    #: Child pid -> where its cgroup counts CPU and its ``cpu_s``, while it runs.
    cpu_limits: dict[int, tuple[CpuCount, float]] = field(default_factory=dict)
    #: Children killed for passing their ``cpu_s`` (reported when reaped).
    cpu_killed: set[int] = field(default_factory=set)
    #: When :meth:`enforce_cpu` is due next (``time.monotonic()``).
    cpu_check_at: float = 0.0
    #: Descriptors not polled until the time given: a stderr pipe whose worker
    #: wrote faster than its relay's rate (:mod:`caplet._sandbox._zygote_log`), a
    #: listener past :data:`NOTIFY_RATE`.
    paused: dict[int, float] = field(default_factory=dict)
    #: Listener fd -> (when its rate window began, notifications answered in it).
    notify_windows: dict[int, tuple[float, int]] = field(default_factory=dict)

    def adopt(self, pid: int, cgroup: WorkerCgroup, cpu_s: float | None) -> None:
        """Keep the worker ``pid``'s cgroup, and hold it to ``cpu_s`` CPU seconds in all.

        RLIMIT_CPU counts each process alone: a child forked before its
        parent's count ran out starts again from zero, so only the cgroup's
        count bounds the worker as a whole (attack13).
        """
        self.cgroups[pid] = cgroup
        count = cgroup.cpu_count()
        if cpu_s is not None and count is not None:
            if not self.cpu_limits:
                self.cpu_check_at = time.monotonic() + CPU_CHECK_S
            self.cpu_limits[pid] = (count, cpu_s)

    def wait_ms(self, wait_ms: int | None) -> int | None:
        """``wait_ms`` cut to the next CPU check while a worker has a CPU limit, and to
        the first paused stderr pipe's resumption."""
        times = [self.cpu_check_at] if self.cpu_limits else []
        times += self.paused.values()
        if not times:
            return wait_ms
        due = max(0, math.ceil((min(times) - time.monotonic()) * 1000))
        return due if wait_ms is None else min(wait_ms, due)

    def enforce_cpu(self) -> None:
        """Kill every worker whose processes together used more than its ``cpu_s``, when due."""
        now = time.monotonic()
        if not self.cpu_limits or now < self.cpu_check_at:
            return
        self.cpu_check_at = now + CPU_CHECK_S
        for pid, (count, limit) in list(self.cpu_limits.items()):
            used = count.seconds()
            if used is None or used <= limit:
                continue
            del self.cpu_limits[pid]
            self.cpu_killed.add(pid)
            cgroup = self.cgroups.get(pid)
            if cgroup is not None:
                cgroup.kill_members()

    def relay_log(self, pid: int, relay: LogRelay) -> None:
        self.logs[relay.read_fd] = relay
        self.log_of[pid] = relay.read_fd
        self.poller.register(relay.read_fd, select.POLLIN)

    def serve_log(self, fd: int) -> None:
        """Copy what a child wrote to its stderr; at end of file stop polling it, and
        while its worker writes faster than the relay's rate, until the rate allows."""
        relay = self.logs[fd]
        if not relay.pump():
            self.poller.unregister(fd)
        elif relay.resume_at is not None:
            self._pause(fd, relay.resume_at)

    def _pause(self, fd: int, until: float) -> None:
        self.poller.unregister(fd)
        self.paused[fd] = until

    def _unpause(self, fd: int) -> None:
        """Forget ``fd``'s pause, or stop polling it (it is going away)."""
        if self.paused.pop(fd, None) is None:
            try:
                self.poller.unregister(fd)
            except KeyError:
                pass  # its end of file was seen already

    def resume_paused(self) -> None:
        """Poll again the descriptors whose rate window is over."""
        now = time.monotonic()
        for fd, until in list(self.paused.items()):
            if now >= until:
                del self.paused[fd]
                self.poller.register(fd, select.POLLIN)

    def close_log(self, pid: int) -> None:
        """Copy the rest of a reaped child's stderr into its log and let go of both."""
        fd = self.log_of.pop(pid, None)
        if fd is None:
            return
        relay = self.logs.pop(fd)
        relay.pump(drain=True)
        self._unpause(fd)
        relay.close()

    def expect_listener(self, pid: int, handover: socket.socket) -> None:
        handover.setblocking(False)
        self.handovers[handover.fileno()] = (pid, handover)
        self.poller.register(handover, select.POLLIN)

    def receive_listener(self, fd: int) -> None:
        """Take the listener a child sent (or its end-of-file: it never will)."""
        pid, handover = self.handovers.pop(fd)
        self.poller.unregister(fd)
        try:
            _, fds, _, _ = socket.recv_fds(handover, 64, 1)
        except OSError:
            fds = []  # nothing arrived: the child exits without running the plugin
        finally:
            handover.close()
        if not fds:
            return
        counter = DenialCounter(fds[0])
        for extra in fds[1:]:
            os.close(extra)
        self.listeners[fds[0]] = counter
        self.denials[pid] = counter
        self.poller.register(fds[0], select.POLLIN)

    def serve_listener(self, fd: int) -> None:
        """Answer a listener's pending notifications, at most :data:`NOTIFY_RATE` a second."""
        counter = self.listeners[fd]
        before = sum(counter.counts.values())
        try:
            open_ = counter.serve()
        except OSError as exc:
            # Closing makes the worker's denied calls fail with ENOSYS:
            # still denied, only no longer counted (seccomp_unotify(2)).
            _say(f"seccomp listener failed ({exc}); denials are no longer counted")
            open_ = False
        if not open_:
            self._unpause(fd)
            self.notify_windows.pop(fd, None)
            del self.listeners[fd]
            counter.close()
            return
        now = time.monotonic()
        start, answered = self.notify_windows.get(fd, (now, 0))
        if now - start >= 1.0:
            start, answered = now, 0
        answered += sum(counter.counts.values()) - before
        self.notify_windows[fd] = (start, answered)
        if answered >= NOTIFY_RATE and fd not in self.paused:
            self._pause(fd, start + 1.0)

    def report(self, pid: int, code: int, *, oom_kills: int = 0, cpu_killed: bool = False) -> bytes:
        """The status pipe payload for a reaped child: status, then a map of its
        denial counts, of the processes its memory cgroup's OOM killer took and
        of whether it was killed for its CPU time."""
        for fd, (owner, _) in list(self.handovers.items()):
            if owner == pid:
                self.receive_listener(fd)
        counter = self.denials.pop(pid, None)
        counts: dict[str, int] = {}
        if counter is not None:
            if counter.fd is not None:
                self.serve_listener(counter.fd)  # what its last moments left pending
            counts = counter.counts
        payload: bytes = STATUS.pack(code) + msgpack.packb(
            {"denials": counts, "oom_kills": oom_kills, "cpu_killed": cpu_killed}
        )
        if len(payload) > _PIPE_BUF:  # cannot happen with MAX_DENIAL_NAMES short names
            payload = STATUS.pack(code) + msgpack.packb(
                {"denials": {}, "oom_kills": oom_kills, "cpu_killed": cpu_killed}
            )
        return payload


def _reap(children: _Children) -> None:
    """Reap every exited child, write its status to its status pipe, drop its cgroup."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        code = os.waitstatus_to_exitcode(status)
        cgroup = children.cgroups.pop(pid, None)
        children.cpu_limits.pop(pid, None)
        cpu_killed = pid in children.cpu_killed
        children.cpu_killed.discard(pid)
        oom_kills = 0
        if cgroup is not None:
            oom_kills = cgroup.oom_kills()
            # Whatever the worker left running (possible without a pid
            # namespace) dies with it, before the host hears it has ended.
            cgroup.kill_members()
            children.pending.append(cgroup)
        payload = children.report(pid, code, oom_kills=oom_kills, cpu_killed=cpu_killed)
        # Its last words are in the log before the host hears it has ended.
        children.close_log(pid)
        status_fd = children.status.pop(pid, None)
        if status_fd is not None:
            try:
                os.write(status_fd, payload)
            except OSError:
                pass  # the host stopped listening; nothing to tell
            os.close(status_fd)
    children.pending[:] = [c for c in children.pending if not _remove_cgroup(c)]


def _remove_cgroup(cgroup: WorkerCgroup) -> bool:
    try:
        return cgroup.remove()
    except OSError:
        return True  # not ours to fix; forget it rather than retry for ever
