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

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from caplet._errors import CapabilityError
from caplet._host._grant_check import GrantPlan
from caplet._host._inode_chain import inode_chain
from caplet._sandbox._grants import PathGrant

__all__ = ["check_code_against", "check_plan_against_code"]


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
    for other, plan in others.items():
        for grant, path, relation in _overlaps(plan, code):
            raise CapabilityError(
                f"plugin {plugin!r}: the writable grant {grant.path} of plugin {other} "
                f"{relation} {path}, a folder this process runs Python code from (its "
                "sys.path, its runtime or its plugins): a module that plugin writes there "
                "would run here, outside every sandbox layer; disable it in that process, "
                f"or run this one without {path} on its path (PYTHONPATH, its folder)"
            )


def check_plan_against_code(
    plugin: str, plan: GrantPlan, peer_code: Sequence[tuple[Path, bool]]
) -> None:
    """Refuse ``plan`` (CapabilityError) when one of its writable grants holds a folder a
    live peer runs code from (``peer_code``, read under the lock the peers publish under).

    The plan was judged against the peers' folders when it was made, but a process
    that started in between published its folders after that and checked the peers'
    grants before this plan's were published: neither saw the other (attack21). So the
    publication, under the lock, judges them again, as it judges the peers' grants.
    """
    for grant, path, relation in _overlaps(plan, peer_code):
        raise CapabilityError(
            f"plugin {plugin!r}: the writable grant {grant.path} {relation} {path}, a folder "
            "another live caplet process of this user runs Python code from (its "
            "sys.path, its runtime or its plugins): a module written there would run in that "
            "process, outside every sandbox layer; a plugin may never write caplet's own "
            "files: grant a directory that does not contain it"
        )


def _overlaps(
    plan: GrantPlan, code: Sequence[tuple[Path, bool]]
) -> Iterator[tuple[PathGrant, Path, str]]:
    """Each writable grant of ``plan`` that contains a folder of ``code`` or lies inside
    one whose ``inside`` is set: (the grant, the folder, "contains" or "lies inside")."""
    chains = [(path, inside, inode_chain(path)) for path, inside in code]
    for grant in plan.grants:
        if not grant.writable:
            continue
        above: set[tuple[int, int]] | None = None
        for path, inside, chain in chains:
            if not chain:
                continue
            if any((n.device, n.inode) == (grant.device, grant.inode) for n in chain):
                yield grant, path, "contains"
                continue
            if above is None:
                above = {(n.device, n.inode) for n in inode_chain(Path(grant.path))}
            if inside and (chain[0].device, chain[0].inode) in above:
                yield grant, path, "lies inside"
