"""A plugin's running worker as the host's call path sees it, and what starting one needs:
the programs and environment variables its approved capabilities grant, and the
declared functions a started worker did not provide.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from caplet._capabilities._model import (
    Capability,
    EnvReadCapability,
    ProcExecCapability,
)
from caplet._host._breaker import CircuitBreaker
from caplet._host._context import PluginRequests
from caplet._host._grant_check import GrantPlan
from caplet._host._metrics import PluginMeter
from caplet._host._policy import Policy
from caplet._host._records import PluginInfo
from caplet._host._validate import FunctionValidator
from caplet._sandbox._launcher import Worker, WorkerSpec
from caplet._sandbox._protocol import ContextGrants, WireValue
from caplet._sandbox._rlimits import millicores
from caplet._trust._snapshot import Snapshot

__all__ = [
    "REJECTED_LOGGED",
    "CallTarget",
    "RunningWorker",
    "approved_environment",
    "not_provided",
    "worker_spec",
]

#: ``(module, function, schemas or None)`` for one declared ``"module.function"``.
CallTarget = tuple[str, str, FunctionValidator | None]


class RunningWorker:
    """A live worker, the snapshot it was started from, and what the call path needs.

    ``targets`` maps each declared ``"module.function"`` to its parts (and its
    compiled schemas, if it declares any) and ``timeout_s`` is the per-call
    deadline, both computed once at start so a warm call does no lookups
    beyond one dict access. ``breaker`` is the plugin's circuit breaker (it
    outlives the worker: the host keeps it across restarts).
    """

    __slots__ = (
        "breaker",
        "generation",
        "meter",
        "on_request",
        "refresh_at",
        "snapshot",
        "targets",
        "timeout_s",
        "workdir",
        "worker",
    )

    def __init__(
        self,
        worker: Worker,
        snapshot: Snapshot | None,
        workdir: Path | None,
        targets: dict[str, CallTarget],
        timeout_s: float,
        *,
        breaker: CircuitBreaker,
        on_request: PluginRequests,
        meter: PluginMeter,
    ) -> None:
        self.worker = worker
        #: The plugin's metrics and budget (kept across restarts, like the breaker).
        self.meter = meter
        #: Answers the worker's ctx requests (built from its granted capabilities).
        self.on_request = on_request
        #: The host's verified copy the worker started from; None when the
        #: launcher copied the enable's snapshot itself (Launcher.copies_snapshot),
        #: whose jail's own tmpfs is the worker's working directory (workdir None).
        self.snapshot = snapshot
        self.workdir = workdir
        self.targets = targets
        self.timeout_s = timeout_s
        self.breaker = breaker
        #: The manager's lifecycle generation this worker was last validated at.
        self.generation = -1
        #: When (host clock) the warm path must re-read the shared state (quarantine
        #: recorded by another process or node): ``Policy.state_refresh_s`` after
        #: the last validation.
        self.refresh_at = 0.0

    def call(
        self,
        module: str,
        function: str,
        args: Sequence[WireValue],
        kwargs: Mapping[str, WireValue],
        *,
        timeout_s: float,
        cancel: threading.Event | None = None,
        wait_s: float | None = None,
    ) -> WireValue:
        """One call into the worker, its ``ctx`` requests answered by ``on_request``;
        whatever the call fetched and left unread is forgotten when it ends, however it
        ends (a body is sent only within the call that fetched it)."""
        try:
            return self.worker.call(
                module,
                function,
                args,
                kwargs,
                timeout_s=timeout_s,
                on_request=self.on_request,
                cancel=cancel,
                wait_s=wait_s,
            )
        finally:
            self.on_request.end_call()


#: Rejected registrations logged one by one per worker start; the rest in one row.
REJECTED_LOGGED = 20


def not_provided(info: PluginInfo, registered: Mapping[str, Sequence[str]]) -> list[str]:
    """The declared ``module.function`` names the worker did not register."""
    return [
        f"{module.name}.{function}"
        for module in info.manifest.modules
        for function in module.function_names
        if function not in registered.get(module.name, ())
    ]


#: Never passed to a worker, even if approved: they change how the runtime
#: itself loads code (ld.so(8), python(1)).
_FORBIDDEN_ENV_PREFIXES = ("LD_", "PYTHON")


def approved_environment(capabilities: Sequence[Capability]) -> dict[str, str]:
    """The values of the approved ``env.read`` variables set in the host's environment."""
    env: dict[str, str] = {}
    for capability in capabilities:
        if not isinstance(capability, EnvReadCapability):
            continue
        name = capability.name
        if name.startswith(_FORBIDDEN_ENV_PREFIXES):
            continue
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    return env


def worker_spec(
    info: PluginInfo,
    snapshot_dir: Path,
    workdir: Path | None,
    plan: GrantPlan,
    policy: Policy,
    *,
    context: ContextGrants,
    snapshot_hash: str = "",
) -> WorkerSpec:
    """What the launcher starts for the enabled plugin ``info``: its snapshot copy, the
    grants the enable pinned and the programs it may run, its approved environment,
    and the limits of its tier."""
    limits = info.manifest.limits
    return WorkerSpec(
        plugin=info.name,
        snapshot_dir=snapshot_dir,
        entry=info.manifest.entry,
        config=dict(info.config),
        modules={m.name: m.function_names for m in info.manifest.modules},
        workdir=workdir,
        snapshot_hash=snapshot_hash,
        start_timeout_s=policy.start_timeout_s,
        # The frame limit is what bounds the size of a result.
        max_frame_bytes=policy.max_output_bytes(limits.max_output_kb, info.tier),
        # The programs as the enable resolved and checked them (never re-resolved here).
        grants=plan.grants + plan.programs,
        masks=plan.masks,
        programs=tuple(c.program for c in info.capabilities if isinstance(c, ProcExecCapability)),
        memory_mb=policy.memory_limit_mb(limits.memory_mb, info.tier),
        cpu_s=policy.cpu_limit_s(limits.cpu_s, info.tier),
        cpu_millicores=millicores(policy.cpu_cores_limit(info.tier)),
        processes=policy.processes_limit(info.tier),
        env=approved_environment(info.capabilities),
        context=context,
        max_context_requests=policy.context.max_requests_per_call,
    )
