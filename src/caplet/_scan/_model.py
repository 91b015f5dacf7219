"""Static-scan findings and reports."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from caplet._findings import Finding, Severity

__all__ = ["ScanMode", "ScanReport"]


class ScanMode(enum.Enum):
    """What is being scanned, which decides what counts as danger.

    ``PLUGIN``: a plugin with a manifest. Threats are danger, and so is any
    capability the manifest does not declare (the danger gate's job); every
    file gets the full AST pass. ``PACKAGE``: any other Python code (a
    directory, an sdist, a wheel). Threats and chains are danger; bare
    capabilities are reported as observed (info), because single-API rules
    hit a large share of benign packages; files the prefilter clears are
    not parsed (see :mod:`caplet._scan._prefilter`).
    """

    PLUGIN = "plugin"
    PACKAGE = "package"


@dataclass(frozen=True, slots=True)
class ScanReport:
    """All findings of one scan, sorted, plus what was scanned."""

    root: str
    findings: tuple[Finding, ...]
    files_scanned: int
    bytes_scanned: int
    mode: ScanMode = ScanMode.PLUGIN
    #: Files that needed the AST pass (the rest were cleared by the prefilter).
    files_parsed: int = 0

    @property
    def has_danger(self) -> bool:
        return any(f.severity is Severity.DANGER for f in self.findings)

    def uncovered_dangers(self) -> tuple[Finding, ...]:
        """Danger findings no declared capability covers: these refuse a load."""
        return tuple(f for f in self.findings if f.severity is Severity.DANGER and not f.covered)
