"""The hostile corpus: every family's cases in one tuple, in the report's order.

The same tuple is what ``caplet selftest`` runs and what the test suite
parametrises over, so a case added to a family module is tested and
published at once. Names are unique (they are the plugins' folder names
and the keys of docs/security.md's table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from caplet._errors import SelftestError
from caplet._selftest import (
    _auditor,
    _ctx_stores,
    _filesystem,
    _grants,
    _introspection,
    _multiplying,
    _network,
    _processes,
    _protocol,
    _renames,
    _resources,
    _supply_chain,
)
from caplet._selftest._model import Family, HostileCase

__all__ = ["BY_NAME", "CASES", "select"]

CASES: tuple[HostileCase, ...] = (
    *_filesystem.CASES,
    *_grants.CASES,
    *_renames.CASES,
    *_network.CASES,
    *_processes.CASES,
    *_multiplying.CASES,
    *_resources.CASES,
    *_ctx_stores.CASES,
    *_protocol.CASES,
    *_introspection.CASES,
    *_supply_chain.CASES,
    *_auditor.CASES,
)

BY_NAME: Mapping[str, HostileCase] = MappingProxyType({case.name: case for case in CASES})

if len(BY_NAME) != len(CASES):  # pragma: no cover - a corpus that cannot be published
    raise SelftestError("two hostile cases share a name; every case needs its own")


def select(names: Iterable[str] = (), families: Iterable[str] = ()) -> tuple[HostileCase, ...]:
    """The cases named in ``names`` or belonging to ``families`` (all when both are empty).

    Raises :class:`SelftestError` for an unknown name or family, with the
    closest known one.
    """
    from caplet._suggest import did_you_mean

    wanted = list(names)
    kinds = list(families)
    for name in wanted:
        if name not in BY_NAME:
            raise SelftestError(
                f"no hostile case is named {name!r}{did_you_mean(name, list(BY_NAME))}; "
                "`caplet selftest --list` shows them all"
            )
    known = [family.value for family in Family]
    for kind in kinds:
        if kind not in known:
            raise SelftestError(
                f"no attack family is named {kind!r}{did_you_mean(kind, known)}; the families "
                f"are {', '.join(known)}"
            )
    if not wanted and not kinds:
        return CASES
    return tuple(case for case in CASES if case.name in wanted or case.family.value in kinds)
