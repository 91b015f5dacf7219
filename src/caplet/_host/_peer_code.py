"""Another caplet process's writable grants against the folders this one runs code from.

Each caplet process guards its own ``sys.path`` against writable grants
(round 17), and publishes its folders for the others on the state directory
(``RunDir.publish_code``), which guard them too
(``ProtectedPaths.peer_code``). What neither covers: a process started (or
whose ``sys.path`` grew) after another process granted a writable folder
there. Red team round 19: ``caplet mcp`` enabled a plugin with ``fs.write``
on a project folder, and ``PYTHONPATH=<that folder> python app.py`` of the
same user imported the module the plugin wrote there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from caplet._errors import CapabilityError
from caplet._host._grant_check import GrantPlan
from caplet._host._inode_chain import inode_chain

__all__ = ["check_code_against"]


def check_code_against(
    plugin: str, code: Sequence[tuple[Path, bool]], others: Mapping[str, GrantPlan]
) -> None:
    """Refuse enabling ``plugin`` here (CapabilityError) while a writable grant of another
    live process's plugin holds a folder this process runs Python code from (``code``:
    its ``sys.path``, runtime and plugins, each with whether lying inside it counts too).

    The other process checked the folders this one had published (``peer_code``);
    this one may have started after that grant, or with another ``PYTHONPATH`` than
    any process had when it was given (red team round 19). This process cannot
    un-import what it imported meanwhile: it refuses to go on enabling plugins, and
    says which grant, where, and the fix.
    """
    chains = [(path, inside, inode_chain(path)) for path, inside in code]
    for other, plan in others.items():
        for grant in plan.grants:
            if not grant.writable:
                continue
            above: set[tuple[int, int]] | None = None
            for path, inside, chain in chains:
                if not chain:
                    continue
                if any((n.device, n.inode) == (grant.device, grant.inode) for n in chain):
                    relation = "contains"
                else:
                    if above is None:
                        above = {(n.device, n.inode) for n in inode_chain(Path(grant.path))}
                    if not inside or (chain[0].device, chain[0].inode) not in above:
                        continue
                    relation = "lies inside"
                raise CapabilityError(
                    f"plugin {plugin!r}: the writable grant {grant.path} of plugin {other} "
                    f"{relation} {path}, a folder this process runs Python code from (its "
                    "sys.path, its runtime or its plugins): a module that plugin writes there "
                    "would run here, outside every sandbox layer; disable it in that process, "
                    f"or run this one without {path} on its path (PYTHONPATH, its folder)"
                )
