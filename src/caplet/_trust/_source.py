"""Where a plugin's files come from: a folder of the plugins directory, or a distribution.

The source is part of what the lock file pins (a plugin that moves from a
folder into an installed distribution is a different supply chain) and
what the policy caps trust tiers by.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PluginSource", "SourceKind", "environment_of"]


class SourceKind(enum.Enum):
    """``directory``: a folder of the plugins directory; ``distribution``: an installed package."""

    DIRECTORY = "directory"
    DISTRIBUTION = "distribution"


@dataclass(frozen=True, slots=True)
class PluginSource:
    """A plugin's origin; ``distribution``, ``distribution_version`` and ``environment`` only
    for installed ones: ``environment`` is the Python environment the distribution is
    installed in (:func:`environment_of` its site directory), part of the plugin's place."""

    kind: SourceKind = SourceKind.DIRECTORY
    distribution: str | None = None
    distribution_version: str | None = None
    environment: str | None = None

    def __str__(self) -> str:
        if self.kind is SourceKind.DIRECTORY:
            return "directory"
        return f"distribution {self.distribution} {self.distribution_version or ''}".rstrip()


#: The folder of a prefix's packages below its root: ``lib/python3.12``, ``lib64/python3``,
#: ``lib/python3.13t`` (POSIX); Windows has ``Lib`` alone.
_VERSIONED = re.compile(r"python\d+(?:\.\d+)?t?")


def environment_of(site: os.PathLike[str] | str) -> str:
    """The Python environment a site directory belongs to: the root of the virtual
    environment or prefix (``/srv/app/.venv`` for ``.../.venv/lib/python3.12/site-packages``,
    ``/usr`` for Debian's ``/usr/lib/python3/dist-packages``), links resolved; any other
    folder on the path is its own.

    The root, not the site directory: a new Python in the same environment keeps its
    plugins' places (their approvals carry over as for a new version), while another
    environment's distribution of the same name is another plugin (attack15).
    """
    real = Path(os.path.realpath(site))
    if real.name in ("site-packages", "dist-packages"):
        middle = real.parent
        if _VERSIONED.fullmatch(middle.name) and middle.parent.name in ("lib", "lib64"):
            return str(middle.parent.parent)
        if middle.name.lower() == "lib":
            return str(middle.parent)
    return str(real)
