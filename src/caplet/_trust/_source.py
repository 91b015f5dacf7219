"""Where a plugin's files come from: a folder of the plugins directory, or a distribution.

The source is part of what the lock file pins (a plugin that moves from a
folder into an installed distribution is a different supply chain) and
what the policy caps trust tiers by.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["PluginSource", "SourceKind"]


class SourceKind(enum.Enum):
    """``directory``: a folder of the plugins directory; ``distribution``: an installed package."""

    DIRECTORY = "directory"
    DISTRIBUTION = "distribution"


@dataclass(frozen=True, slots=True)
class PluginSource:
    """A plugin's origin; ``distribution`` and ``distribution_version`` only for installed ones."""

    kind: SourceKind = SourceKind.DIRECTORY
    distribution: str | None = None
    distribution_version: str | None = None

    def __str__(self) -> str:
        if self.kind is SourceKind.DIRECTORY:
            return "directory"
        return f"distribution {self.distribution} {self.distribution_version or ''}".rstrip()
