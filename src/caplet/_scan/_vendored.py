"""Libraries imported through another package's vendored copy (blind17).

pip, setuptools and pkg_resources ship copies of the libraries they need under their own
name (``pip._vendor.requests``, ``pip._vendor.urllib3``, ``setuptools._vendor.packaging``,
``pkg_resources.extern``). A copy does what the library does: blind17's sample
(b17-re-pip-vendor-requests) sent its dependency-confusion beacon through pip's requests,
which no rule knew. The survey binds such an import to the library's own name, and the
prefilter's network side spells the vendored network libraries (``_triggers``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["VENDORED_NETWORK", "unvendored"]

#: The packages' prefixes, as the survey reads a qualified name.
_VENDORED: Final = (
    "pip._vendor.",
    "setuptools._vendor.",
    "pkg_resources._vendor.",
    "pkg_resources.extern.",
    "setuptools.extern.",
)
#: A vendored network library as code spells it, for the prefilter's network side (the
#: other vendored modules are no side of any pair; ``from pip._vendor import requests``
#: is spelled ``import requests`` already).
VENDORED_NETWORK: Final = (
    r"\b(?:pip|setuptools|pkg_resources)\.(?:_vendor|extern)\.(?:requests|urllib3)\b"
)


def unvendored(name: str) -> str:
    """``name`` with a vendoring package's prefix taken off (the library it copies)."""
    if name.startswith(_VENDORED):
        return name.split("._vendor.", 1)[-1].split(".extern.", 1)[-1]
    return name
