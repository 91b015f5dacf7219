"""The host's side of the zygote: its process and socket, and each worker it forked.

:class:`_Zygote` starts the fork server (through the relocating stage),
reads the layers it reports, sends spawn and refill requests;
:class:`ZygoteChild` is one forked worker as a ``ChildProcess``: waited on
through a pidfd, its exit status, seccomp denials and OOM kills read from
the status pipe the zygote writes once it has reaped it. The launcher that
uses both is :mod:`caplet._sandbox._sandboxed`.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Mapping

import msgpack

from caplet._errors import ProtocolError, WorkerStartError
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail import DISABLE_LAYERS_ENV, disabled_layers
from caplet._sandbox._relocate import RELOCATION, zygote_command
from caplet._sandbox._subprocess import bootstrap_command
from caplet._sandbox._zygote_request import REFILL
from caplet._sandbox._zygote_spare import DIES_AT_SPARE_ENV, LATE_SPARE_ENV

__all__ = [
    "LayerReport",
    "ZygoteChild",
]


_STATUS_BYTES = 4
_REAP_TIMEOUT_S = 5.0
#: Most bytes of denial report read after the status (the zygote sends < 4 KiB).
_MAX_REPORT_BYTES = 64 * 1024
_NO_DENIALS: Mapping[str, int] = types.MappingProxyType({})


LayerReport = dict[str, str]


class ZygoteChild:
    """A worker forked by the zygote (implements ``ChildProcess``).

    The host is not its parent, so it waits on a pidfd and learns the exit
    status from the status pipe the zygote writes once it has reaped it.
    Killing it kills the jail: the worker is pid 1 of its pid namespace (or
    the monitor of it), so the kernel takes every process in it down too.
    """

    __slots__ = (
        "_cpu_killed",
        "_denials",
        "_oom_kills",
        "_pid",
        "_pidfd",
        "_status",
        "_status_r",
    )

    def __init__(self, pid: int, pidfd: int, status_r: int) -> None:
        self._pid = pid
        self._pidfd = pidfd
        self._status_r = status_r
        self._status: int | None = None
        self._denials = _NO_DENIALS
        self._oom_kills = 0
        self._cpu_killed = False

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def denials(self) -> Mapping[str, int]:
        """Syscall name -> times the seccomp filter denied it (empty until reaped)."""
        return self._denials

    @property
    def oom_kills(self) -> int:
        """Processes the OOM killer took at the worker's memory cgroup limit (0 until reaped)."""
        return self._oom_kills

    @property
    def cpu_killed(self) -> bool:
        """Whether the zygote killed the worker for its CPU time in all (False until reaped)."""
        return self._cpu_killed

    def exited(self) -> bool:
        if self._status is not None:
            return True
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(0))

    def wait_exit(self, timeout_s: float) -> None:
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        poller.poll(max(0, round(timeout_s * 1000)))

    def kill_and_reap(self) -> int:
        if self._status is not None:
            return self._status
        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone; the zygote has (or will have) its status
        status, report = _read_report(self._status_r, time.monotonic() + _REAP_TIMEOUT_S)
        os.close(self._pidfd)
        os.close(self._status_r)
        self._status = -signal.SIGKILL if status is None else status
        self._denials, self._oom_kills, self._cpu_killed = report
        return self._status


_Report = tuple[Mapping[str, int], int, bool]


_NO_REPORT: _Report = (_NO_DENIALS, 0, False)


def _read_report(fd: int, deadline: float) -> tuple[int | None, _Report]:
    """The status, denial counts and OOM kills the zygote wrote to a status pipe.

    Reads until the report is complete, end-of-file, the size limit or the
    deadline, whichever comes first; the status is None when it never came.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    data = b""
    report: _Report | None = None
    while len(data) < _STATUS_BYTES + _MAX_REPORT_BYTES:
        if len(data) > _STATUS_BYTES:
            report = _decode_report(data[_STATUS_BYTES:])
            if report is not None:
                break
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(max(0, round(remaining * 1000))):
            break
        chunk = os.read(fd, _STATUS_BYTES + _MAX_REPORT_BYTES - len(data))
        if not chunk:
            break  # the zygote closed its end: nothing more is coming
        data += chunk
    if len(data) < _STATUS_BYTES:
        return None, _NO_REPORT
    status = int.from_bytes(data[:_STATUS_BYTES], sys.byteorder, signed=True)
    return status, report or _NO_REPORT


def _decode_report(data: bytes) -> _Report | None:
    """``{"denials": {syscall name: count}, "oom_kills": N, "cpu_killed": bool}``; None
    while incomplete or when malformed."""
    try:
        report = msgpack.unpackb(data, raw=False, max_map_len=1024, max_str_len=256)
    except (ValueError, TypeError):
        return None
    if not isinstance(report, dict) or not isinstance(report.get("denials"), dict):
        return None
    oom_kills = report.get("oom_kills")
    denials = types.MappingProxyType(
        {
            name: count
            for name, count in report["denials"].items()
            if isinstance(name, str) and type(count) is int and count > 0
        }
    )
    return (
        denials,
        oom_kills if type(oom_kills) is int and oom_kills > 0 else 0,
        report.get("cpu_killed") is True,
    )


class _Zygote:
    """The host's handle on one zygote process."""

    def __init__(self, identity: WorkerIdentity) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The zygote's environment is only the test-only switches it reads.
        env = {
            name: os.environ[name]
            for name in (DISABLE_LAYERS_ENV, LATE_SPARE_ENV, DIES_AT_SPARE_ENV)
            if os.environ.get(name)
        }
        extra = (
            str(identity.uid),
            str(identity.gid),
            "privileged" if identity.privileged else "own",
            "own-real-uids" if identity.own_real_uids else "shared-real-uid",
        )
        # Started through the relocating stage: the zygote runs from neutral
        # paths, so no jail shows where the runtime lives (_relocate).
        argv, env = zygote_command(
            "caplet._sandbox._zygote",
            child.fileno(),
            extra,
            bootstrap_command("caplet._sandbox._zygote", child.fileno(), *extra),
            env,
            disabled=(
                f"disabled by {DISABLE_LAYERS_ENV} (test-only)"
                if RELOCATION in disabled_layers()
                else ""
            ),
        )
        try:
            self.process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
                pass_fds=(child.fileno(),),
                start_new_session=True,
                cwd="/",
            )
        except OSError as exc:
            parent.close()
            raise WorkerStartError(f"cannot start the sandbox zygote: {exc}") from exc
        finally:
            child.close()
        self.sock = parent
        self.lock = threading.Lock()
        hello = self._receive(timeout_s=30.0)[0]
        layers = hello.get("layers") if isinstance(hello, dict) else None
        if not isinstance(layers, dict):
            self.close()
            raise WorkerStartError("the sandbox zygote did not report its layers; see its stderr")
        self.layers: LayerReport = {str(k): str(v) for k, v in layers.items()}
        #: "" when the zygote counts seccomp denials, else why it cannot.
        counting = hello.get("seccomp_counting") if isinstance(hello, dict) else None
        self.counting = "not reported by the zygote" if counting is None else str(counting)
        #: "" when workers get a memory cgroup, else why not.
        memory = hello.get("memory_cgroup") if isinstance(hello, dict) else None
        self.memory_cgroup = "not reported by the zygote" if memory is None else str(memory)
        #: "" when the cpu controller caps each worker's CPU rate, else why not.
        rate = hello.get("cpu_rate") if isinstance(hello, dict) else None
        self.cpu_rate = "not reported by the zygote" if rate is None else str(rate)
        #: "" when the zygote runs from neutral paths (_relocate), else why not.
        relocation = hello.get("relocation") if isinstance(hello, dict) else None
        self.relocation = "not reported by the zygote" if relocation is None else str(relocation)

    def _receive(self, *, timeout_s: float) -> tuple[object, list[int]]:
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        if not poller.poll(round(timeout_s * 1000)):
            raise WorkerStartError(f"the sandbox zygote did not answer within {timeout_s:g} s")
        message, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 1)
        if not message:
            raise WorkerStartError(
                f"the sandbox zygote exited (status {self.process.poll()}); see its stderr"
            )
        try:
            return msgpack.unpackb(message, raw=False), fds
        except Exception as exc:
            for fd in fds:
                os.close(fd)
            raise ProtocolError(f"malformed message from the sandbox zygote: {exc}") from exc

    def spawn(self, request: Mapping[str, object], fds: list[int]) -> tuple[int, int]:
        """Send a spawn request; returns (pid, pidfd)."""
        with self.lock:
            socket.send_fds(self.sock, [msgpack.packb(request)], fds)
            reply, received = self._receive(timeout_s=30.0)
        if not isinstance(reply, dict) or "pid" not in reply or len(received) != 1:
            for fd in received:
                os.close(fd)
            error = reply.get("error") if isinstance(reply, dict) else reply
            raise WorkerStartError(f"the sandbox zygote refused to spawn a worker: {error}")
        return int(reply["pid"]), received[0]

    def refill(self) -> None:
        """Tell the zygote the start it served is over: it forks its next spare now.

        Not at the claim: the next spare's set-up would compete with the
        worker that is still finishing its jail (see :data:`REFILL`).
        """
        with self.lock:
            try:
                self.sock.send(REFILL)
            except OSError:
                pass  # the zygote is gone: the next start finds that out and says so

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.sock.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
