"""What a peer host published in its run directory or beacon, read as data
(split out of :mod:`caplet._host._run_dir`, meet29).

Another process wrote it, and a folder of the user's that was once open to others
may hold what someone else left there: a file is read only when it is a regular
one, through no link and without waiting on a FIFO, with a bound; anything else,
or anything no host writes, is read as nothing published (attack21: a forged file
in a peer's run directory broke every enable of every other process).
"""

from __future__ import annotations

import json
from pathlib import Path

from caplet._atomic import read_regular
from caplet._host._grant_check import GrantPlan
from caplet._sandbox._grants import PathGrant

__all__ = ["read_code", "read_plans"]

#: The most bytes of a peer's grants.json read (a host with hundreds of plugins
#: writes a few tens of KiB).
_GRANTS_MAX = 4 << 20


def _read_json(path: Path) -> object:
    """A peer's published file as JSON; None when it is missing or unreadable.

    No host writes JSON nested past Python's stack (RecursionError) or a file
    past the bound; either is read as nothing published (attack21: a forged
    file in a peer's run directory broke every enable of every other process).
    """
    try:
        # Never through a link, never waiting on a FIFO (attack10's way to hold a reader).
        data = read_regular(path, _GRANTS_MAX)
        return json.loads(data) if len(data) <= _GRANTS_MAX else None
    except (OSError, ValueError, RecursionError):
        return None  # not published yet, or mid-replace by a host that is starting


def _path(value: object) -> bool:
    """Whether ``value`` is a path a host may publish: absolute, no NUL (which no file
    name holds, and on which every stat raises ValueError, not OSError)."""
    return isinstance(value, str) and value.startswith("/") and "\x00" not in value


def read_code(path: Path) -> list[tuple[Path, bool]]:
    """A peer's published code folders (empty when it has published none yet)."""
    raw = _read_json(path)
    if not isinstance(raw, list):
        return []
    return [
        (Path(entry[0]), entry[1])
        for entry in raw
        if isinstance(entry, list)
        and len(entry) == 2
        and _path(entry[0])
        and isinstance(entry[1], bool)
    ]


def read_plans(path: Path) -> dict[str, GrantPlan]:
    """A peer's published plans (empty when it has none yet); a plan with a path no host
    publishes (:func:`_path`) or a device that is no integer is skipped."""
    raw = _read_json(path)
    plans: dict[str, GrantPlan] = {}
    if not isinstance(raw, dict):
        return plans
    for name, entry in raw.items():
        try:
            writable = tuple(
                PathGrant(p, writable=True, device=d, inode=i)
                for p, d, i in entry["writable"]
                if _path(p) and _integer(d) and _integer(i)
            )
            if len(writable) != len(entry["writable"]) or not all(
                _path(p) for p in entry["programs"]
            ):
                continue
            programs = tuple(PathGrant(p, executable=True) for p in entry["programs"])
        except (KeyError, TypeError, ValueError):
            continue
        plans[str(name)] = GrantPlan(grants=writable, programs=programs)
    return plans


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
