"""Host policy: the administrator's limits that bind every plugin."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from caplet._broker._policy import NetworkPolicy
from caplet._findings import RiskLevel

__all__ = ["Isolation", "Policy"]


class Isolation(enum.Enum):
    """How much kernel isolation a worker must have before a plugin byte runs.

    ``STRICT`` (the default) refuses to start a plugin when any layer
    (namespaces, rlimits, Landlock, seccomp) is missing on this machine;
    ``BEST_EFFORT`` runs with the layers that exist and says which ones
    (``caplet info``, ``caplet doctor``, the decision log).
    """

    STRICT = "strict"
    BEST_EFFORT = "best-effort"


@dataclass(frozen=True, slots=True)
class Policy:
    """What the embedding application or administrator allows.

    ``max_risk_level``: approval (and enabling) of a plugin whose audit is
    above it is refused; the approved fast path re-checks the *stored* risk
    level against the current policy, so tightening the policy takes effect
    on the next enable, after a restart too.

    Per-call deadlines come from the manifest's ``limits.timeout_ms`` bounded
    by ``max_timeout_ms``, else ``default_timeout_ms``; the largest result a
    call may return likewise from ``limits.max_output_kb`` bounded by
    ``max_output_kb`` (and by ``max_frame_bytes``).

    Circuit breaker (design.md section 5): ``failure_threshold`` consecutive
    failed calls open a plugin's breaker for ``cooldown_s`` seconds; a
    breaker that trips ``quarantine_after`` times within
    ``quarantine_window_s`` seconds quarantines the plugin until a human
    releases it (``caplet release``).

    ``network`` bounds brokered HTTP (``ctx.http``): allowed private
    networks, wildcard grants, sizes, time, rate and data budget
    (:class:`caplet._broker._policy.NetworkPolicy`, docs/network.md).
    """

    max_risk_level: RiskLevel = RiskLevel.MEDIUM
    isolation: Isolation = Isolation.STRICT
    memory_mb: int = 512
    cpu_s: int = 60
    processes: int = 64
    default_timeout_ms: int = 5_000
    max_timeout_ms: int = 60_000
    max_frame_bytes: int = 8 * 1024 * 1024
    start_timeout_s: float = 10.0
    allow_broad_paths: bool = False
    max_output_kb: int = 1024
    failure_threshold: int = 3
    cooldown_s: float = 60.0
    quarantine_after: int = 3
    quarantine_window_s: float = 3600.0
    network: NetworkPolicy = field(default_factory=NetworkPolicy)

    def memory_limit_mb(self, declared: int | None) -> int:
        """Address-space limit of a worker: the plugin's own, never above the policy's."""
        return self.memory_mb if declared is None else min(declared, self.memory_mb)

    def cpu_limit_s(self, declared: int | None) -> int:
        """CPU-seconds limit of a worker: the plugin's own, never above the policy's."""
        return self.cpu_s if declared is None else min(declared, self.cpu_s)

    def timeout_ms(self, declared: int | None) -> int:
        """The deadline for one call: the plugin's own, never above the policy's."""
        if declared is None:
            return self.default_timeout_ms
        return min(declared, self.max_timeout_ms)

    def max_output_bytes(self, declared_kb: int | None) -> int:
        """The largest reply frame a worker may send: the plugin's own, never above the policy's.

        This is the worker's ``max_frame_bytes``, so a request frame is held to
        it too (arguments and results share the one channel limit).
        """
        kb = self.max_output_kb if declared_kb is None else min(declared_kb, self.max_output_kb)
        return min(kb * 1024, self.max_frame_bytes)
