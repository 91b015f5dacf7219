"""Host policy: the administrator's limits that bind every plugin."""

from __future__ import annotations

from dataclasses import dataclass

from caplet._findings import RiskLevel

__all__ = ["Policy"]


@dataclass(frozen=True, slots=True)
class Policy:
    """What the embedding application or administrator allows.

    ``max_risk_level``: approval (and enabling) of a plugin whose audit is
    above it is refused; the approved fast path re-checks the *stored* risk
    level against the current policy, so tightening the policy takes effect
    on the next enable, after a restart too.

    Per-call deadlines come from the manifest's ``limits.timeout_ms`` bounded
    by ``max_timeout_ms``, else ``default_timeout_ms``.
    """

    max_risk_level: RiskLevel = RiskLevel.MEDIUM
    default_timeout_ms: int = 5_000
    max_timeout_ms: int = 60_000
    max_frame_bytes: int = 8 * 1024 * 1024
    start_timeout_s: float = 10.0
    allow_broad_paths: bool = False

    def timeout_ms(self, declared: int | None) -> int:
        """The deadline for one call: the plugin's own, never above the policy's."""
        if declared is None:
            return self.default_timeout_ms
        return min(declared, self.max_timeout_ms)
