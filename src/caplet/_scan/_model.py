"""Static-scan findings and reports."""

from __future__ import annotations

from dataclasses import dataclass

from caplet._findings import Finding, Severity

__all__ = ["ScanReport"]


@dataclass(frozen=True, slots=True)
class ScanReport:
    """All findings of one scan, sorted, plus what was scanned."""

    root: str
    findings: tuple[Finding, ...]
    files_scanned: int
    bytes_scanned: int

    @property
    def has_danger(self) -> bool:
        return any(f.severity is Severity.DANGER for f in self.findings)

    def uncovered_dangers(self) -> tuple[Finding, ...]:
        """Danger findings no declared capability covers: these refuse a load."""
        return tuple(f for f in self.findings if f.severity is Severity.DANGER and not f.covered)
