"""Ordered severities and risk levels shared by the scan, audit and host layers."""

from __future__ import annotations

import enum

__all__ = ["RiskLevel", "Severity"]


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
