"""Whether a wildcard's base is a public suffix (the Public Suffix List).

A wildcard capability ``net.http:https://*.X`` reaches every name under
``X``. When ``X`` is a public suffix (``co.uk``, ``github.io``,
``s3.amazonaws.com``, ``blogspot.com``), the names under it belong to whoever
registers one, so the wildcard reaches the sites of unrelated owners: an
attacker registers ``evil.github.io`` and the plugin may send there. The
"at least two labels" rule of :mod:`caplet._capabilities._parse` only stops
``*.com``; round 5 of the red team left this open (docs/security.md).

The list itself is data that changes every month, so it comes from
``publicsuffixlist`` (the Mozilla list, ICANN and private sections, shipped
inside the wheel and updated with each release) rather than a copy kept here.
Loading it costs about 0.1 s, so it is loaded only when a wildcard is parsed.
A name the list does not know (``corp.internal``) is judged by the list's
default rule, as browsers do: its top label is the public suffix.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList

__all__ = ["is_public_suffix"]


@functools.cache
def _list() -> PublicSuffixList:
    # Imported here: the import alone is 5 ms of every CLI start (issue 16's
    # start-up budget), and only a declared wildcard needs the list.
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def is_public_suffix(host: str) -> bool:
    """Whether ``host`` (lower-case ASCII, punycode for IDN) is itself a public suffix.

    Any failure to answer raises: the caller refuses the wildcard then, since
    a check that cannot be made must not let it through.
    """
    return bool(_list().is_public(host))
