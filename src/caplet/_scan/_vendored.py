"""Libraries imported through another package's vendored copy (blind17).

pip, setuptools and pkg_resources ship copies of the libraries they need under their own
name (``pip._vendor.requests``, ``pip._vendor.urllib3``, ``setuptools._vendor.packaging``,
``pkg_resources.extern``). A copy does what the library does: blind17's sample
(b17-re-pip-vendor-requests) sent its dependency-confusion beacon through pip's requests,
which no rule knew. The survey binds such an import to the library's own name, and the
prefilter's module spellings accept the prefix (``_triggers``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["VENDORED_PREFIX", "unvendored"]

#: The packages' prefixes, as the survey reads a qualified name.
_VENDORED: Final = (
    "pip._vendor.",
    "setuptools._vendor.",
    "pkg_resources._vendor.",
    "pkg_resources.extern.",
    "setuptools.extern.",
)
#: The same prefixes as code spells them before a module's name (RE2, optional).
VENDORED_PREFIX: Final = r"(?:(?:pip|setuptools|pkg_resources)\.(?:_vendor|extern)\.)?"


def unvendored(name: str) -> str:
    """``name`` with a vendoring package's prefix taken off (the library it copies)."""
    if name.startswith(_VENDORED):
        return name.split("._vendor.", 1)[-1].split(".extern.", 1)[-1]
    return name
