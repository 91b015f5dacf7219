"""The seam between the host and a plugin's worker process.

The host asks a :class:`Launcher` for a worker and talks to it only through
the returned :class:`Worker`. The Foundation ships
:class:`caplet._sandbox._subprocess.SubprocessLauncher` (a plain child
process: new session, empty environment, no inherited descriptors); the
Sandbox issue adds kernel isolation behind the same Protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from caplet._config._schema import ConfigValue
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._protocol import ContextGrants, ContextRequest

__all__ = ["Launcher", "RequestHandler", "StartedWorker", "Worker", "WorkerSpec"]

#: Values that may cross the channel (msgpack-compatible, JSON-like).
WireValue = object


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Everything a worker needs to load one plugin, and nothing more.

    ``snapshot_dir`` is the private read-only copy whose hash the host has
    verified, or, with ``snapshot_hash`` (only for a launcher whose
    :attr:`Launcher.copies_snapshot` is true), the enable's own snapshot,
    which the launcher copies for the worker and refuses to start from
    unless the copy's tree hash is ``snapshot_hash``. ``modules`` maps each
    declared module to its declared function names, the only ones the
    worker may register. ``workdir`` is the worker's private, empty working
    directory (a plain-process launcher uses it; a sandboxing launcher gives
    the worker a private tmpfs instead, and is given None when it
    :attr:`~Launcher.copies_snapshot`: it jails every worker).

    The rest is what the sandbox enforces: ``grants`` are the host paths the
    approved ``fs.read``/``fs.write`` capabilities name (the launcher adds
    the runtime and the snapshot itself); ``programs`` the approved
    ``proc.exec`` programs (none: execve is denied); ``masks`` directories
    hidden inside the grants (caplet's own state under a broad read grant);
    the resource limits come from the manifest bounded by the policy, and
    ``cpu_millicores`` (the CPU rate, thousandths of a core) from the policy.

    ``context`` says which optional ``ctx`` attributes the plugin gets, and
    ``max_context_requests`` how many ``ctx`` requests one call may make
    before the host refuses the rest (a flood of them is bounded, not
    served for as long as the deadline lasts).
    """

    plugin: str
    snapshot_dir: Path
    entry: str
    config: Mapping[str, ConfigValue]
    modules: Mapping[str, tuple[str, ...]]
    workdir: Path | None
    snapshot_hash: str = ""
    start_timeout_s: float = 10.0
    max_frame_bytes: int = 8 * 1024 * 1024
    grants: tuple[PathGrant, ...] = ()
    masks: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    memory_mb: int | None = 512
    cpu_s: int | None = 60
    open_files: int = 256
    processes: int | None = 64
    env: Mapping[str, str] = field(default_factory=dict)
    file_size_mb: int = 64
    tmp_size_mb: int = 64
    cpu_millicores: int | None = 1000
    context: ContextGrants = field(default_factory=ContextGrants)
    max_context_requests: int = 10_000


@dataclass(frozen=True, slots=True)
class StartedWorker:
    """What the worker reported once ready: what it registered and rejected.

    ``rejected`` holds ``"module"`` or ``"module.function"`` strings the
    plugin returned from ``create_functions`` without declaring them.
    """

    registered: Mapping[str, tuple[str, ...]]
    rejected: tuple[str, ...]


class RequestHandler(Protocol):
    """Answers the ``ctx`` requests a worker sends while one of its calls is in flight.

    Called in the thread that made the call, with the call's ``deadline``
    (``time.monotonic()`` seconds) to bound what it does. It returns the
    value to send back, raises a :class:`~caplet._errors.ContextError` or
    :class:`~caplet._errors.BrokerError` to refuse (the worker raises the
    same class in the plugin), or :class:`~caplet._errors.ProtocolError`
    when the request itself is a violation (the worker is killed).
    """

    def __call__(self, request: ContextRequest, deadline: float) -> WireValue: ...


class Worker(Protocol):
    """A live worker: call its functions, then close it."""

    @property
    def pid(self) -> int: ...

    @property
    def started(self) -> StartedWorker: ...

    @property
    def alive(self) -> bool: ...

    @property
    def denials(self) -> Mapping[str, int]:
        """Syscall name -> times the kernel sandbox denied it to this worker.

        Known once the worker has ended (after :meth:`close`, a timeout or a
        crash); empty before, and always empty where denials are not counted
        (a plain process, or a kernel without seccomp user notification).
        """
        ...

    def call(
        self,
        module: str,
        function: str,
        args: Sequence[WireValue],
        kwargs: Mapping[str, WireValue],
        *,
        timeout_s: float,
        on_request: RequestHandler | None = None,
        cancel: threading.Event | None = None,
        wait_s: float | None = None,
    ) -> WireValue:
        """Run one call; ``on_request`` answers its ``ctx`` requests (none: all refused).

        ``wait_s`` bounds the wait for other threads' calls to this worker, and
        what it waited comes off ``timeout_s``: past it,
        :class:`~caplet.WorkerBusyError`, nothing sent (a nested call, attack31).

        Raises :class:`~caplet.WorkerGoneError` (nothing ran) when the worker
        had exited, or been closed, before the call was sent: callers need
        not check :attr:`alive` first, and a call that waited for another
        thread's call which ended the worker is not mistaken for a crash.
        ``cancel`` set before the call is sent raises
        :class:`~caplet.CallCancelledError` without sending it.
        """
        ...

    def interrupt(self, thread: int) -> bool:
        """From another thread: stop the call ``thread`` is making in this worker (the
        worker is stopped; that call raises :class:`~caplet.CallCancelledError`).
        False when that thread has no call here."""
        ...

    def close(self) -> None: ...


class Launcher(Protocol):
    """Starts workers; the isolation a worker gets is the launcher's business."""

    @property
    def isolation(self) -> str: ...

    @property
    def copies_snapshot(self) -> bool:
        """Whether :meth:`start` gives each worker a private copy of ``snapshot_dir``
        itself and checks it against ``spec.snapshot_hash`` before any plugin code
        runs (a jail copies it into its own tmpfs anyway). Then the host need not
        make a verified copy of the enable's snapshot for every start, nor a
        working directory (``spec.workdir`` None: the jail's tmpfs is one)."""
        ...

    def start(self, spec: WorkerSpec) -> Worker: ...

    def close(self) -> None:
        """Release what the launcher holds (a zygote); its workers die with it."""
        ...
