"""The sandboxing launcher: workers forked by a warm zygote into their own jail.

Each worker gets, before a byte of plugin code is imported (design.md
section 5, issue 3): new user, mount, pid, net, ipc, uts and cgroup
namespaces with a minimal read-only root (:mod:`caplet._sandbox._jail`),
rlimits (:mod:`caplet._sandbox._rlimits`), Landlock path rules with all TCP
denied and signals/abstract sockets scoped (:mod:`caplet._sandbox._landlock`)
and a seccomp filter (:mod:`caplet._sandbox._seccomp`).

Why a zygote and not bubblewrap: bwrap plus a fresh interpreter costs
20-40 ms per worker here; forking a zygote that already imported the worker
runtime and then applying the same layers with unshare(2), mount(2) and
pivot_root(2) costs a few milliseconds (docs/benchmarks.md has the numbers).
The namespace setup is small enough to own, and owning it lets every layer
share one list of grants.

``strict`` (the policy default) refuses to start a worker when any layer is
missing on this machine, naming the layer and how to get it;
``best-effort`` runs with the layers that exist, and :attr:`isolation` says
which ones those are.

Seccomp denials are counted by the zygote where the kernel allows it
(SECCOMP_RET_USER_NOTIF, Linux >= 5.0) and reported after the worker's
exit status on its status pipe; :attr:`ZygoteChild.denials`
(:mod:`caplet._sandbox._zygote_client`, the host's side of the zygote) exposes them
once the worker has been reaped, and ``caplet doctor`` says whether
counting works here (``details["seccomp_counting"]``).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass

from caplet._errors import WorkerStartError
from caplet._sandbox._cgroup import CPU_RATE_FALLBACK, MEMORY_FALLBACK
from caplet._sandbox._identity import (
    REAL_UID_BASE,
    REAL_UID_SPAN,
    WorkerIdentity,
    worker_identity,
)
from caplet._sandbox._jail import DISABLE_LAYERS_ENV, disabled_layers
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._relocate import RUNTIME_ROOT
from caplet._sandbox._subprocess import (
    SubprocessLauncher,
    SubprocessWorker,
    init_frame,
    worker_log,
)
from caplet._sandbox._zygote import LAYERS, OPTIONAL_LAYERS
from caplet._sandbox._zygote_child import SNAPSHOT_FD
from caplet._sandbox._zygote_client import LayerReport, ZygoteChild, _Zygote

__all__ = [
    "LAYERS",
    "IsolationReport",
    "SandboxLauncher",
    "SandboxStartError",
    "default_launcher",
    "isolation_report",
    "layers_switch_banner",
]

#: Where a jailed worker sees its plugin's snapshot.
_SNAPSHOT_IN_JAIL = "/plugin"

#: How to get each layer when it is missing (shown by strict refusals and doctor).
FIXES: Mapping[str, str] = {
    "namespaces": (
        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on "
        "Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0)"
    ),
    "landlock": "boot a kernel >= 5.13 with landlock in its lsm= list",
    "seccomp": (
        "install libseccomp >= 2.5 (apt-get install libseccomp2) and use a kernel built "
        "with CONFIG_SECCOMP_FILTER"
    ),
    "rlimits": "",
    "cgroup": (
        "run caplet as root, or start it from a leaf of a cgroup v2 subtree delegated to its "
        "user with the pids and memory controllers enabled (docs/security.md, 'Memory and "
        "processes: the cgroup layer', has the systemd-run recipe)"
    ),
}


class SandboxStartError(WorkerStartError):
    """A sandboxed worker failed to start after its seccomp filter denied calls.

    ``denials`` (syscall name -> count, as :attr:`ZygoteChild.denials`) are
    what the zygote counted until the worker ended, for the host to log like
    the denials of a worker that ran; the message names them too.
    """

    def __init__(self, message: str, denials: Mapping[str, int] | None = None) -> None:
        counts = dict(denials or {})
        if counts:
            named = ", ".join(f"{name} {count} time(s)" for name, count in sorted(counts.items()))
            message = f"{message}\n(while it was starting, the sandbox denied: {named})"
        super().__init__(message)
        self.denials: Mapping[str, int] = types.MappingProxyType(counts)


class SandboxLauncher:
    """Starts workers in kernel sandboxes through a zygote (implements ``Launcher``)."""

    def __init__(
        self,
        *,
        strict: bool = True,
        count_denials: bool = True,
        identity: WorkerIdentity | None = None,
    ) -> None:
        self.strict = strict
        #: Who workers run as: never root (see :mod:`caplet._sandbox._identity`).
        self.identity = worker_identity() if identity is None else identity
        #: Ask the zygote to count seccomp denials (where the kernel allows it).
        self.count_denials = count_denials
        self._zygote: _Zygote | None = None
        self._lock = threading.Lock()

    def _get_zygote(self) -> _Zygote:
        with self._lock:
            if self._zygote is None or not self._zygote.alive:
                if self._zygote is not None:
                    # A dead zygote's socket and process handle are released,
                    # not left to the garbage collector (a ResourceWarning in
                    # whichever test happened to collect it).
                    self._zygote.close()
                self._zygote = _Zygote(self.identity)
            return self._zygote

    def layers(self) -> LayerReport:
        """Each layer -> "" if usable on this machine, else why not."""
        return dict(self._get_zygote().layers)

    def counting_problem(self) -> str:
        """ "" when workers' seccomp denials are counted here, else why not."""
        if not self.count_denials:
            return "turned off for this launcher (count_denials=False)"
        return self._get_zygote().counting

    def memory_cgroup_problem(self) -> str:
        """ "" when each worker's memory is bounded by a memory cgroup here, else why not."""
        return self._get_zygote().memory_cgroup

    def cpu_rate_problem(self) -> str:
        """ "" when each worker's CPU rate is capped by the cpu controller here, else why not."""
        return self._get_zygote().cpu_rate

    def relocation_problem(self) -> str:
        """ "" when the zygote runs the runtime from neutral paths (no host path of it
        inside a jail, see :mod:`._relocate`), else why not."""
        return self._get_zygote().relocation

    def active_layers(self) -> tuple[str, ...]:
        """The layers every worker of this launcher gets, optional ones included."""
        layers = self.layers()
        return tuple(
            layer for layer in (*LAYERS, *OPTIONAL_LAYERS) if not layers.get(layer, "missing")
        )

    @property
    def isolation(self) -> str:
        """``sandbox: namespaces, rlimits, landlock, seccomp`` (the layers in force), and the
        test-only switch when it is set (:func:`layers_switch_banner`)."""
        active = self.active_layers()
        missing = [layer for layer in LAYERS if layer not in active]
        text = f"sandbox: {', '.join(active) or 'no layers'}"
        if missing:
            text += f" (missing: {', '.join(missing)})"
        switched = " ".join(sorted(disabled_layers()))
        if switched:
            text += f" [TEST-ONLY: {DISABLE_LAYERS_ENV}={switched.replace(' ', ',')}]"
        return text

    @property
    def copies_snapshot(self) -> bool:
        """True where workers are jailed: the jail copies the snapshot into its own
        tmpfs and checks the copy's hash (:func:`._jail_copy.copy_grant`)."""
        return not self._get_zygote().layers.get("namespaces", "missing")

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        zygote = self._get_zygote()
        missing = {layer: zygote.layers[layer] for layer in LAYERS if zygote.layers.get(layer)}
        if missing and self.strict:
            layer, why = next(iter(missing.items()))
            raise WorkerStartError(
                f"plugin '{spec.plugin}': isolation 'strict' needs the {layer} layer, which this "
                f"machine lacks ({why}); {FIXES.get(layer) or 'see caplet doctor'}, or set the "
                "policy's isolation to 'best-effort' to run with the layers that exist"
            )
        # In a jail the snapshot is mounted at /plugin: neither INIT nor the
        # plugin's __file__ tells the worker where the host keeps it.
        jailed = "namespaces" not in missing
        if (spec.snapshot_hash or spec.workdir is None) and not jailed:
            # Only a jail checks its copy (the snapshot given is the enable's
            # own) and has a working directory of its own.
            raise WorkerStartError(
                f"plugin '{spec.plugin}': the sandbox has no namespace jail to copy and check "
                "the plugin's snapshot in; restart the host (the launcher's layers changed)"
            )
        snapshot_inside = _SNAPSHOT_IN_JAIL if jailed else str(spec.snapshot_dir)
        if not jailed and self.identity.privileged:
            # No jail and a root host: the worker's uid cannot walk the
            # host's private run directory, so it reads the snapshot
            # through a descriptor the zygote opens for it before the switch.
            snapshot_inside = f"/proc/self/fd/{SNAPSHOT_FD}"
        init = init_frame(spec, snapshot=snapshot_inside)
        # Copied, not bound, in a jail: a bind's root would name the host path.
        # The copy is checked against the approved hash there (copies_snapshot).
        grants: list[tuple[str, bool, bool, str, int, int, bool, str, bool, bool]] = [
            (
                str(spec.snapshot_dir),
                False,
                False,
                _SNAPSHOT_IN_JAIL if jailed else "",
                0,
                0,
                jailed,
                spec.snapshot_hash if jailed else "",
                False,
                False,
            )
        ]
        grants += [
            (
                g.path,
                g.writable,
                g.executable,
                "",
                g.device,
                g.inode,
                False,
                "",
                g.listing,
                g.one_name,
            )
            for g in spec.grants
        ]
        request = {
            "layers": [layer for layer in LAYERS if layer not in missing],
            "grants": grants,
            "masks": list(spec.masks),
            "snapshot": str(spec.snapshot_dir),
            "workdir": "" if spec.workdir is None else str(spec.workdir),
            "allow_exec": bool(spec.programs),
            "limits": {
                "memory_mb": spec.memory_mb,
                "cpu_s": spec.cpu_s,
                "open_files": spec.open_files,
                "processes": spec.processes,
                "file_size_mb": spec.file_size_mb,
                "cpu_millicores": spec.cpu_millicores,
            },
            "tmp_size_mb": spec.tmp_size_mb,
            "count_denials": self.count_denials,
        }
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        try:
            log = worker_log(spec.plugin)  # owned by the worker
        except BaseException:
            parent.close()
            os.close(status_r)
            os.close(status_w)
            child.close()
            raise
        try:
            try:
                pid, pidfd = zygote.spawn(request, [child.fileno(), log.fileno(), status_w])
            except BaseException:
                parent.close()
                os.close(status_r)
                log.close()
                raise
            finally:
                child.close()
                os.close(status_w)
            worker = SubprocessWorker(spec, ZygoteChild(pid, pidfd, status_r), parent, log)
            try:
                worker.handshake(init)
            except WorkerStartError as exc:
                # The failed worker is reaped by now, so what the sandbox denied
                # while it was starting is known: it travels with the error.
                denials = worker.denials
                if not denials:
                    raise
                raise SandboxStartError(str(exc), denials) from exc
        except BaseException:
            zygote.refill()  # this start is over: the next spare may prepare now
            raise
        # Started: the next spare prepares once the first call has been answered
        # (or the worker closed without one). Right after READY it took the CPU
        # and the kernel's locks from that call, which then took ~4 ms instead of
        # ~0.3 (measured on the 2-core VM); the zygote does not wait for ever
        # for it either (see REFILL).
        worker.after_first_call = zygote.refill
        return worker

    def close(self) -> None:
        """Stop the zygote (its workers die with it)."""
        with self._lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None


class UnsupportedLauncher:
    """Where the kernel sandbox cannot exist (not Linux) and the policy is strict."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    @property
    def isolation(self) -> str:
        return f"none ({self.reason})"

    @property
    def copies_snapshot(self) -> bool:
        """No worker starts here."""
        return False

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        raise WorkerStartError(
            f"plugin '{spec.plugin}': isolation 'strict' cannot be met: {self.reason}; run "
            "caplet on Linux, or set the policy's isolation to 'best-effort' to run plugins "
            "as plain processes"
        )

    def close(self) -> None:
        """Nothing to release."""


def layers_switch_banner() -> str:
    """The warning a host gives when ``CAPLET_TEST_DISABLE_LAYERS`` is set, else "".

    The switch exists for tests; strict isolation refuses a worker without a required
    layer, but an optional one (the cgroup), seccomp's denial counting and the runtime's
    relocation went off without a word (steer22), for every worker of the host.
    """
    switched = sorted(disabled_layers())
    if not switched:
        return ""
    named = ",".join(switched)
    return (
        f"TEST-ONLY LAYERS OFF: {DISABLE_LAYERS_ENV}={named} turns off {', '.join(switched)} "
        "for every worker of this host (strict isolation still refuses a worker without a "
        "required layer; the cgroup's memory, CPU-rate and process limits, seccomp's denial "
        "counting and the runtime's relocation are not required). It exists for caplet's "
        f"own tests: unset {DISABLE_LAYERS_ENV}."
    )


def default_launcher(
    *, strict: bool, identity: WorkerIdentity | None = None
) -> SandboxLauncher | SubprocessLauncher | UnsupportedLauncher:
    """The launcher a PluginHost uses unless it is given one.

    Linux gets the zygote sandbox (strict or best-effort as the policy says);
    elsewhere strict refuses every start with the reason, and best-effort
    falls back to plain processes (``isolation`` says so). ``identity`` is
    who workers run as (default: :func:`~caplet._sandbox._identity.worker_identity`).
    """
    if sys.platform != "linux":
        reason = f"the kernel sandbox needs Linux, this is {sys.platform}"
        return UnsupportedLauncher(reason) if strict else SubprocessLauncher(identity=identity)
    return SandboxLauncher(strict=strict, identity=identity)


@dataclass(frozen=True, slots=True)
class IsolationReport:
    """What `caplet doctor` tells: each layer, whether it works here, and why not.

    ``layers`` maps a layer to "" when usable, else the reason; ``fixes``
    says how to get each missing one; ``details`` are facts worth showing
    (kernel, Landlock ABI, the strict verdict).
    """

    layers: Mapping[str, str]
    fixes: Mapping[str, str]
    details: Mapping[str, str]

    @property
    def complete(self) -> bool:
        """True when every required layer is usable: strict isolation can run plugins here."""
        return not any(self.layers.get(layer, "missing") for layer in LAYERS)


def _real_uids(identity: WorkerIdentity) -> str:
    """Whose epoll watches, descriptors in flight and pipe buffers a worker's count (_identity)."""
    if identity.own_real_uids:
        return (
            f"each worker's own (real uid {REAL_UID_BASE} + its monitor's pid); workers granted "
            f"proc.exec share uid {identity.uid}'s"
        )
    last = REAL_UID_BASE + REAL_UID_SPAN - 1
    if identity.privileged and REAL_UID_BASE <= identity.uid <= last:
        # An account there would collide with one worker's real uid (_identity).
        return (
            f"shared by every worker (uid {identity.uid}): {identity.source}'s uid lies in "
            f"{REAL_UID_BASE}-{last}, the workers' own real uids; give it a uid outside "
            "that range"
        )
    if identity.privileged:
        return (
            f"shared by every worker (uid {identity.uid}): this user namespace does not map "
            f"uids {REAL_UID_BASE}-{REAL_UID_BASE + REAL_UID_SPAN - 1}"
        )
    return (
        f"shared by every worker and caplet's own user (uid {identity.uid}); "
        "run as root to separate them"
    )


def isolation_report(identity: WorkerIdentity | None = None) -> IsolationReport:
    """Probe every layer the way a real worker start would (through a zygote).

    ``identity`` is who workers run as (default: what a host with the
    default policy would use); the report says so.
    """
    if identity is None:
        identity = worker_identity()
    details = {
        "platform": sys.platform,
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "workers run as": identity.describe()
        + ("" if identity.privileged else ", caplet's own user: never root on the host"),
        "per-user kernel counts": _real_uids(identity),
    }
    if sys.platform != "linux":
        reason = f"the kernel sandbox needs Linux, this is {sys.platform}"
        return IsolationReport(dict.fromkeys(LAYERS, reason), FIXES, details)
    launcher = SandboxLauncher(strict=True, identity=identity)
    try:
        layers = dict(launcher.layers())
        counting = launcher.counting_problem()
        memory = launcher.memory_cgroup_problem()
        rate = launcher.cpu_rate_problem()
        relocation = launcher.relocation_problem()
    finally:
        launcher.close()
    details["seccomp_counting"] = (
        "yes (SECCOMP_RET_USER_NOTIF: each denial is answered with EPERM and logged)"
        if not counting
        else f"no ({counting}): denied syscalls still fail with EPERM but are not counted"
    )
    from caplet._sandbox._landlock import landlock_abi
    from caplet._sandbox._seccomp import seccomp_enforced

    details["memory"] = (
        "bounded per worker: a memory cgroup holds all its processes, shared memory (memfd, "
        "its /tmp), pipe and socket buffers to memory_mb + tmp_size_mb, without swap"
        if not memory
        else f"{MEMORY_FALLBACK} (no memory cgroup: {memory})"
    )
    details["cpu rate"] = (
        "capped per worker: the cpu controller holds all its threads and processes to cpu_cores"
        if not rate
        else f"{CPU_RATE_FALLBACK} (no cpu controller: {rate})"
    )
    details["runtime paths"] = (
        f"neutral ({RUNTIME_ROOT}/...): no host path of the interpreter, its packages or "
        "caplet shows inside a jail"
        if not relocation
        else f"the host's own ({relocation}): a plugin can read where the runtime lives"
    )
    details["landlock_abi"] = str(landlock_abi())
    if not layers.get("seccomp") and not seccomp_enforced():
        layers["seccomp"] = "a filter installed in a probe process did not refuse a denied call"
    return IsolationReport(layers, FIXES, details)
