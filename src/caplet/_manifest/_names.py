"""The file names a plugin's manifest may have.

Apart from :mod:`caplet._manifest._model` so that ``caplet scan`` can tell a
plugin folder from a package without importing the manifest model (issue
16: its start-up is budgeted).
"""

from __future__ import annotations

__all__ = ["MANIFEST_NAMES"]

#: File names a plugin directory may use for its manifest, in lookup order.
MANIFEST_NAMES = ("plugin.toml", "plugin.json")
