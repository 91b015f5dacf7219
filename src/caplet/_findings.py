"""Findings and their ordered severities, and risk levels.

They sit below every layer because the capability lint, the static scanner,
the auditor and the host all produce or show findings.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Finding", "RiskLevel", "Severity"]


class Severity(enum.Enum):
    """How bad a finding is; ``rank`` orders them (danger first)."""

    DANGER = "danger"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for danger, 1 for warning, 2 for info: sort key, most severe first."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.DANGER: 0, Severity.WARNING: 1, Severity.INFO: 2}


class RiskLevel(enum.Enum):
    """Overall risk of a plugin, ordered LOW < MEDIUM < HIGH < CRITICAL."""

    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"
    CRITICAL = "CRITICAL"

    @property
    def order(self) -> int:
        """0..3, for comparisons against a policy maximum."""
        return _RISK_ORDER[self]

    @classmethod
    def parse(cls, text: str) -> RiskLevel:
        """Parse ``low``/``LOW``...; raises ``ValueError`` naming the choices."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            choices = ", ".join(r.value for r in cls)
            raise ValueError(f"unknown risk level {text!r}; expected one of {choices}") from None


_RISK_ORDER = {RiskLevel.LOW: 0, RiskLevel.MEDIUM: 1, RiskLevel.HIGH: 2, RiskLevel.CRITICAL: 3}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the scanner (or the composition lint, or an auditor) noticed.

    ``file`` is relative to the scanned root (``""`` for findings about the
    manifest as a whole); ``line``/``column`` are 1-based (0 when unknown).
    ``capability`` names the capability kind (or exact capability) that would
    cover the behaviour, and ``covered`` says whether the plugin declares it;
    a covered finding has already had its severity lowered.
    """

    rule_id: str
    severity: Severity
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    excerpt: str = ""
    capability: str | None = None
    covered: bool = False

    def sort_key(self) -> tuple[int, str, int, int, str]:
        """Deterministic order: severity (danger first), file, line, column, rule."""
        return (self.severity.rank, self.file, self.line, self.column, self.rule_id)
