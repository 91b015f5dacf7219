"""The Foundation launcher: each worker is a plain child process.

No kernel isolation yet (:attr:`SubprocessLauncher.isolation` is
``"process"``); what a plain process can get is applied: an empty
environment, no inherited descriptors but the channel, a new session (so a
timeout kills the whole process group), a private working directory, stdin
and stdout on /dev/null and stderr in an anonymous in-memory file (a
memfd only the host holds) whose tail is quoted when the worker fails. The
sandboxing launcher stands beside this one behind the same
:class:`~caplet._sandbox._launcher.Launcher` Protocol.

Starting a worker (the bootstrap command, the INIT frame, the stderr log)
is :mod:`caplet._sandbox._worker_start`, shared with the sandboxing
launcher, as are the channel (:mod:`caplet._sandbox._channel_worker`) and
the :class:`~caplet._sandbox._child.ChildProcess` seam
(:mod:`caplet._sandbox._child`); this module adds the plain child process.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys

from caplet._errors import WorkerStartError
from caplet._sandbox._channel_worker import SubprocessWorker
from caplet._sandbox._child import ChildProcess, PopenChild
from caplet._sandbox._identity import WorkerIdentity, worker_identity
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._worker_start import bootstrap_command, init_frame, worker_command, worker_log

__all__ = [
    "ChildProcess",
    "PopenChild",
    "SubprocessLauncher",
    "SubprocessWorker",
    "bootstrap_command",
    "init_frame",
    "worker_command",
    "worker_log",
]


class SubprocessLauncher:
    """Starts each worker as a plain child process (implements ``Launcher``).

    On a root host the child runs as ``identity`` (default:
    :func:`~caplet._sandbox._identity.worker_identity`), never as root, with
    no supplementary groups; its working directory is given to it first.
    """

    __slots__ = ("identity",)

    def __init__(self, *, identity: WorkerIdentity | None = None) -> None:
        self.identity = worker_identity() if identity is None else identity

    @property
    def isolation(self) -> str:
        """``"process"``: a separate process, no kernel isolation."""
        return "process"

    @property
    def copies_snapshot(self) -> bool:
        """The worker runs from the host's verified copy, as given."""
        return False

    def close(self) -> None:
        """Nothing to release: each worker is closed on its own."""

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        """Start a worker for ``spec`` and wait until it is READY.

        WorkerStartError (with the plugin's message, or the exit status and
        the tail of stderr) when it cannot be started, fails to load the
        plugin, or is not ready within ``spec.start_timeout_s``.
        """
        if spec.snapshot_hash or spec.workdir is None:
            # Only a launcher that copies_snapshot is handed the enable's own
            # snapshot, and no working directory.
            raise WorkerStartError(
                f"plugin '{spec.plugin}': a plain-process worker cannot check the snapshot it "
                "is given and needs a working directory; the host must give it a verified "
                "copy and one (this is a bug in caplet)"
            )
        workdir = spec.workdir
        init = init_frame(spec)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            log = worker_log(spec.plugin)  # owned by the worker object from here on
        except BaseException:
            parent.close()
            child.close()
            raise
        user: int | None = None
        group: int | None = None
        extra_groups: list[int] | None = None
        try:
            if self.identity.privileged and os.geteuid() == 0:
                os.chown(workdir, self.identity.uid, self.identity.gid)
                user, group, extra_groups = self.identity.uid, self.identity.gid, []
            process = subprocess.Popen(
                worker_command(child.fileno()),
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                close_fds=True,
                pass_fds=(child.fileno(),),
                start_new_session=True,
                cwd=workdir,
                user=user,
                group=group,
                extra_groups=extra_groups,
            )
        except OSError as exc:
            parent.close()
            log.close()
            if user is not None and exc.errno == errno.EACCES:
                raise WorkerStartError(
                    f"plugin '{spec.plugin}': cannot start a worker process as "
                    f"{self.identity.describe()}: {exc}; caplet runs as root and never runs "
                    f"a worker as root, and that uid cannot execute {sys.executable} (a "
                    "directory on the way is private to root, e.g. /root): install Python "
                    "where that uid can read it, or use the sandboxing launcher on Linux"
                ) from exc
            raise WorkerStartError(
                f"plugin '{spec.plugin}': cannot start a worker process "
                f"({sys.executable or 'no Python executable'} in {workdir}): {exc}; "
                "check that the working directory exists"
            ) from exc
        finally:
            child.close()
        try:
            worker = SubprocessWorker(spec, PopenChild(process), parent, log)
        except BaseException:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
            parent.close()
            log.close()
            raise
        worker.handshake(init)
        return worker
