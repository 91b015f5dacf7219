"""The folders this process imports Python modules from, which no plugin may write.

Split from :mod:`caplet._host._manager_enable` (red team round 19), so the
run directory can publish them for the other caplet processes on the same
state directory: each guards its own ``sys.path`` (round 17), and a
writable grant given by one process over a folder another imports from
ran the plugin's module in that other process (round 19).
"""

from __future__ import annotations

import functools
import os
import site
import sys
from pathlib import Path

from caplet._sandbox._jail import runtime_grants

__all__ = ["import_paths", "runtime_paths"]


@functools.cache
def runtime_paths() -> tuple[str, ...]:
    """The directories a worker's Python and caplet are loaded from (computed once)."""
    return tuple(grant.path for grant in runtime_grants())


def import_paths() -> tuple[tuple[Path, bool], ...]:
    """The folders on ``sys.path`` (read at each plan: it changes), each with whether a
    grant inside one is refused too.

    Inside too for library folders (``PYTHONPATH``): a package folder there is code the
    host imports. Not inside the script's or current folder, ``sys.path[0]`` (unless
    ``-P``/``-I``): that is an application's or a project's own folder, whose data
    folders are what plugins are granted; a grant containing it is refused. The user's
    site-packages counts before it exists (see below).
    """
    first = "" if sys.flags.safe_path else (sys.path[0] if sys.path else "")
    runtime = runtime_paths()
    found: dict[Path, bool] = {}
    for index, entry in enumerate(sys.path):
        real = os.path.realpath(entry or ".")
        if any(real == r or real.startswith(f"{r.rstrip('/')}/") for r in runtime):
            continue  # guarded with the runtime already, both ways
        path = Path(real)
        if path.is_dir():
            inside = not (index == 0 and entry == first)
            found[path] = found.get(path, False) or inside
    if site.ENABLE_USER_SITE:
        # The user's site-packages is on sys.path only once it exists, and its .pth
        # files run at every start: a grant that could create it (one holding the
        # nearest folder of its path that exists) is refused too (round 17).
        user = Path(os.path.realpath(site.getusersitepackages()))
        nearest = next((p for p in (user, *user.parents) if p.is_dir()), None)
        if nearest is not None and nearest not in found and nearest.parent != nearest:
            found[nearest] = nearest == user
    return tuple(found.items())
