"""What an enabled plugin's fs capabilities really grant, checked once at enable.

Issue 13, point 2. For every resolved ``fs.read``/``fs.write`` capability:

1. the path is resolved once without following any symbolic link
   (:func:`caplet._sandbox._resolve.resolve_no_links`): a link on it refuses
   the enable, naming the link and its target, and the inode it ends at is
   pinned, so the jail mounts and Landlock rules exactly what was checked
   here (a directory swapped for another later makes the start fail);
2. caplet's own files stay out of reach: no grant may lie inside caplet's
   state directory (approvals, the decision log, ``ctx.kv``, snapshots and
   the run directory live there); a *writable* grant may not contain it
   either, nor the lock file, the plugins directory or the Python runtime
   and caplet's own code (a plugin could otherwise forge approvals, rewrite
   another plugin or the code the next host runs). A *read* grant that
   contains the state directory (``fs.read:/`` for a trusted plugin) gets it
   hidden under an empty sealed directory in the jail, and the approver is
   told. Containment is decided by inode, walking up from each path, so a
   second spelling of the same directory (a bind mount elsewhere) is caught
   as well as the first;
3. the worker's identity must be able to use the grant (search, and write
   for ``fs.write``; :func:`caplet._sandbox._resolve.access_problem`), or
   the enable is refused with the ``chown`` that fixes it, instead of a
   permission error deep inside the plugin later;
4. every ``proc.exec`` program is resolved once, here (on the host's
   ``PATH``, with its ELF or ``#!`` interpreter), and none of those files
   may lie inside a writable grant: not this plugin's, nor any enabled
   plugin's, and a writable grant may not contain a program an enabled
   plugin runs. A plugin that may write where an approved program lives
   replaces it with any other program of the host (a link to it, followed
   when the next worker starts) or rewrites it: the approval of "run
   /data/tool" would approve anything (found attacking issue 13's result).

A glob is granted as the regular files it matches now, each checked as above
(:mod:`caplet._host._glob_grants`, glob32).
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from caplet._capabilities._model import (
    Capability,
    CapabilityKind,
    FsCapability,
    ProcExecCapability,
    glob_folder,
)
from caplet._errors import CapabilityError, SandboxError
from caplet._host._glob_grants import expand_glob
from caplet._host._inode_chain import Node, chain_from_fd, inode_chain
from caplet._host._mirrors import MountTable, read_mount_table
from caplet._host._program_names import linked_and_writable
from caplet._host._program_reach import reach_line
from caplet._host._protected import (
    ProtectedPaths,
    hidden_state,
    make_to_hide,
    refuse_inside_any_state,
    refuse_inside_state,
    refuse_kernel_interfaces,
    refuse_mirrors,
    refuse_process_files,
    refuse_writable_over,
)
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._jail_model import path_contains
from caplet._sandbox._programs import link_hops, program_chain
from caplet._sandbox._resolve import (
    GrantPathError,
    access_problem,
    open_no_links,
)
from caplet._trust._sqlite import DB_FILENAME as STATE_MARKER

__all__ = [
    "GrantPlan",
    "check_against",
    "plan_grants",
]


@dataclass(frozen=True, slots=True)
class GrantPlan:
    """The pinned path grants of one enable, the directories hidden in them, and why."""

    grants: tuple[PathGrant, ...] = ()
    masks: tuple[str, ...] = ()
    #: Sentences for the approver and the decision log (what is hidden, and where).
    notes: tuple[str, ...] = ()
    #: The approved programs and their interpreters, resolved at enable (executable).
    programs: tuple[PathGrant, ...] = ()
    #: One line per program: the files it brings (:mod:`caplet._host._program_reach`),
    #: compared with the approval's.
    reach: tuple[str, ...] = ()


def plan_grants(
    plugin: str,
    capabilities: Sequence[Capability],
    *,
    protected: Callable[[], ProtectedPaths],
    identity: WorkerIdentity,
    enabled: Mapping[str, GrantPlan] | None = None,
) -> GrantPlan:
    """Resolve, check and pin the fs and proc.exec capabilities of one enable.

    ``protected`` is asked for caplet's own paths only when there is an fs
    capability to check against them, and their inodes are looked up then,
    at every enable: never kept, so a directory swapped since is seen (a
    plugin without fs capabilities, the common case, pays none of it:
    ~0.2 ms of an enable here). ``enabled`` are the plans of the other
    enabled plugins (their writable grants and programs). CapabilityError
    says why not.
    """
    fs = [c for c in capabilities if isinstance(c, FsCapability)]
    grants, masks, notes = _plan_paths(plugin, fs, protected(), identity) if fs else ([], [], [])
    others = {name: plan for name, plan in (enabled or {}).items() if name != plugin}
    writable_grants = [grant for grant in grants if grant.writable]
    programs, reach = _plan_programs(plugin, capabilities, writable_grants, others, identity)
    _refuse_over_programs(plugin, writable_grants, others)
    return GrantPlan(tuple(grants), tuple(masks), tuple(notes), programs, reach)


def check_against(plugin: str, plan: GrantPlan, others: Mapping[str, GrantPlan]) -> None:
    """Refuse ``plan`` (CapabilityError) when one of its programs lies in a writable
    grant of ``others`` or one of its writable grants holds a program of theirs.

    What :func:`plan_grants` checks against the enabled plugins, again, for the
    plans other caplet processes published (the enable's last step, under the
    lock they publish under: two enables at once are judged one after the other).
    """
    writable_grants = [grant for grant in plan.grants if grant.writable]
    for other, theirs in others.items():
        held_by = [g for g in theirs.grants if g.writable]
        for program in plan.programs:
            try:
                inside, held = _program_holder(program.path, held_by)
            except SandboxError as exc:
                raise CapabilityError(f"plugin {plugin!r}: {exc}") from exc
            if inside is not None:
                raise CapabilityError(
                    f"plugin {plugin!r}: the program {_reached(program.path, held)} lies inside "
                    f"{inside.path}, a writable grant of plugin {other!r}, which could replace "
                    "it with any other program (or a link to one) and so run anything; install "
                    "the program outside every writable grant (e.g. /usr/local/bin) and "
                    "declare that path"
                )
    _refuse_over_programs(plugin, writable_grants, others)


def _refuse_over_programs(
    plugin: str, writable_grants: Sequence[PathGrant], others: Mapping[str, GrantPlan]
) -> None:
    """No writable grant of ``plugin`` holds a program (or a link on its way) of ``others``."""
    for other, plan in others.items():
        for program in plan.programs:
            try:
                inside, held = _program_holder(program.path, writable_grants)
            except SandboxError as exc:
                raise CapabilityError(f"plugin {plugin!r}: {exc} (run by {other!r})") from exc
            if inside is not None:
                raise CapabilityError(
                    f"plugin {plugin!r}: the writable grant {inside.path} contains "
                    f"{_reached(program.path, held)}, a program plugin {other!r} is approved "
                    f"to run; with it {plugin!r} could replace that program with any other: "
                    f"grant a directory that does not contain it, or disable {other!r} first"
                )


def _plan_paths(
    plugin: str,
    capabilities: Sequence[FsCapability],
    protected: ProtectedPaths,
    identity: WorkerIdentity,
) -> tuple[list[PathGrant], list[str], list[str]]:
    """The pinned path grants of the fs capabilities, the state directories hidden in
    them, and the notes saying so (points 1-3 of the module docstring)."""
    grants: list[PathGrant] = []
    masks: list[str] = []
    notes: list[str] = []
    known = _Lookups.now(protected)
    # Each grant, a glob's matches and a literal path alike, is checked the same way.
    check = functools.partial(
        _checked, plugin, known=known, identity=identity, masks=masks, notes=notes
    )
    for capability in capabilities:
        if capability.is_glob:
            # Its folder is no caplet state (attack33: said before the worker's access to
            # list it), then the files it matches, each opened once and checked as a
            # literal file grant would be (glob32).
            _refuse_state_folder(plugin, capability, known)
            expanded = expand_glob(plugin, capability, identity)
            notes += expanded.notes
            try:
                # Each match with one name at every start too (attack35), not only now.
                grants += [
                    replace(check(capability, path, fd), one_name=True)
                    for path, fd in expanded.matches
                ]
            finally:
                expanded.close()
            grants += _listings(capability, [path for path, _ in expanded.matches])
            continue
        where = f"plugin {plugin!r}: capability {capability.declared!r} (path {capability.root!r})"
        try:
            fd = open_no_links(capability.root)
        except GrantPathError as exc:
            raise CapabilityError(f"{where}: {exc}") from exc
        try:
            grants.append(check(capability, capability.root, fd))
        finally:
            os.close(fd)
    return grants, masks, notes


def _refuse_state_folder(plugin: str, capability: FsCapability, known: _Lookups) -> None:
    """A glob's folder that is, or lies in, a caplet state directory is refused as such
    before it is listed (a root host's worker may not list a private one either, and
    the fix for that would be the wrong one to give)."""
    folder = capability.root
    where = f"plugin {plugin!r}: capability {capability.declared!r} (folder {folder!r})"
    try:
        fd = open_no_links(folder)
    except GrantPathError as exc:
        raise CapabilityError(f"{where}: {exc}") from exc
    try:
        try:
            own = chain_from_fd(fd, folder, marker=STATE_MARKER)
        except CapabilityError as exc:
            raise CapabilityError(f"{where}: {exc}") from None
        _refuse_state(where, fd, own, known)
    finally:
        os.close(fd)


def _refuse_state(where: str, fd: int, own: list[Node], known: _Lookups) -> None:
    """``own`` (the grant ``fd`` and the folders above it) is in no caplet state or store."""
    protected = known.protected
    refuse_inside_state(where, own, known.state_chain, protected.state_dir)
    if protected.store_dir is not None:
        refuse_inside_state(where, own, known.store_chain, protected.store_dir, "store")
    refuse_inside_any_state(where, fd, own)


def _listings(capability: FsCapability, matches: Sequence[str]) -> list[PathGrant]:
    """The folders of a glob's matches, from the folder it starts in down, each shown in
    the jail as a directory of its own listing its matches alone (PathGrant.listing)."""
    top = glob_folder(capability.path) or capability.path
    folders: dict[str, None] = {}
    for match in matches:
        parent = str(Path(match).parent)
        while path_contains(top, parent):
            folders[parent] = None
            if parent == top:
                break
            parent = str(Path(parent).parent)
    return [PathGrant(folder, listing=True) for folder in sorted(folders)]


@dataclass(slots=True)
class _Lookups:
    """What one plan's checks look up once, at this enable (never kept past it): the
    chains of caplet's state and store directories, the mount table, and the chain above each
    folder a glob's matches lie in (256 files of one folder share it)."""

    protected: ProtectedPaths
    state_chain: list[Node]
    store_chain: list[Node]
    table: MountTable
    #: The chains of the folders matches lie in, by the folder's identity.
    parents: dict[tuple[int, int], list[Node]] = field(default_factory=dict)
    #: Folders (by identity) whose ancestors were searched for a state's marker already.
    searched: set[tuple[int, int]] = field(default_factory=set)

    @classmethod
    def now(cls, protected: ProtectedPaths) -> _Lookups:
        store = protected.store_dir
        return cls(
            protected,
            inode_chain(protected.state_dir),
            inode_chain(store) if store is not None else [],
            read_mount_table(),
        )

    def chain(self, fd: int, path: str) -> list[Node]:
        """:func:`chain_from_fd`, through descriptors (attack35); for a file, the chain
        of its folder read once."""
        return chain_from_fd(fd, path, marker=STATE_MARKER, above=self.parents)


def _checked(
    plugin: str,
    capability: FsCapability,
    path: str,
    fd: int,
    *,
    known: _Lookups,
    identity: WorkerIdentity,
    masks: list[str],
    notes: list[str],
) -> PathGrant:
    """The pinned grant of ``path``, opened once as ``fd``, once caplet's own files and
    the worker's access are checked (points 2-3); ``masks`` and ``notes`` gain the state
    directories it hides. CapabilityError says why not."""
    protected = known.protected
    writable = capability.kind is CapabilityKind.FS_WRITE
    where = f"plugin {plugin!r}: capability {capability.declared!r} (path {path!r})"
    info = os.fstat(fd)
    directory = stat.S_ISDIR(info.st_mode)
    try:
        own = known.chain(fd, path)
    except CapabilityError as exc:
        raise CapabilityError(f"{where}: {exc}") from None
    refuse_inside_state(where, own, known.state_chain, protected.state_dir)
    if protected.store_dir is not None:
        refuse_inside_state(where, own, known.store_chain, protected.store_dir, "store")
    parent = (own[1].device, own[1].inode) if len(own) > 1 else (0, 0)
    if directory or parent not in known.searched:
        # A file holds no state's marker: the folders above it are searched once.
        refuse_inside_any_state(where, fd, own)
        if not directory:
            known.searched.add(parent)
    refuse_mirrors(where, path, protected, writable=writable, table=known.table)
    if writable:
        refuse_kernel_interfaces(where, path)
    refuse_process_files(where, path, known.table.file_system(info.st_dev))
    if writable:
        refuse_writable_over(where, own, protected)
    elif directory:
        # Only a folder can contain a state directory to hide (a file contains none).
        make_to_hide(where, (info.st_dev, info.st_ino), protected.other_states)
        # The other states' chains are looked up after make_to_hide made them.
        others = (inode_chain(other) for other in protected.other_states)
        for chain in (known.state_chain, known.store_chain, *others):
            hidden = hidden_state(path, (info.st_dev, info.st_ino), chain)
            if hidden and hidden not in masks:
                masks.append(hidden)
                notes.append(
                    f"{capability.declared}: caplet's state directory {hidden} is "
                    "hidden inside this grant (an empty, sealed directory in the jail)"
                )
    groups = () if identity.privileged else tuple(os.getgroups())
    problem = access_problem(fd, identity.uid, identity.gid, writable=writable, groups=groups)
    if problem:
        fix = _ownership_fix(path, identity, writable=writable)
        raise CapabilityError(f"{where}: {problem}. {fix}")
    return PathGrant(path, writable=writable, device=info.st_dev, inode=info.st_ino)


def _plan_programs(
    plugin: str,
    capabilities: Sequence[Capability],
    writable: Sequence[PathGrant],
    others: Mapping[str, GrantPlan],
    identity: WorkerIdentity,
) -> tuple[tuple[PathGrant, ...], tuple[str, ...]]:
    """The approved programs' executable grants, none inside any writable grant, and
    none a worker may write that has another name (a hard link) anywhere; and the
    line of each program (what it brings)."""
    found: list[PathGrant] = []
    reach: list[str] = []
    for capability in capabilities:
        if not isinstance(capability, ProcExecCapability):
            continue
        where = f"plugin {plugin!r}: capability {capability.declared!r}"
        owners = [(plugin, writable)] + [
            (other, [g for g in plan.grants if g.writable]) for other, plan in others.items()
        ]
        try:
            chain = program_chain(capability.program, search_path=os.environ.get("PATH"))
            grants = chain.grants
            held_by = [
                (grant, owner, *_program_holder(grant.path, theirs))
                for grant in grants
                for owner, theirs in owners
            ]
        except SandboxError as exc:
            raise CapabilityError(f"{where}: {exc}") from exc
        for grant, owner, inside, held in held_by:
            if inside is not None:
                raise CapabilityError(
                    f"{where}: the program {_reached(grant.path, held)} lies inside "
                    f"{inside.path}, a writable grant of plugin {owner!r}, which could replace "
                    "it with any other program (or a link to one) and so run anything; install "
                    "the program outside every writable grant (e.g. /usr/local/bin) and "
                    "declare that path"
                )
        for grant in grants:
            problem = linked_and_writable(grant.path, identity)
            if problem:
                raise CapabilityError(f"{where}: {problem}")
        found += grants
        reach.append(reach_line(capability, chain.describe()))
    return tuple(found), tuple(reach)


def _program_holder(program: str, writable: Sequence[PathGrant]) -> tuple[PathGrant | None, str]:
    """The writable grant holding ``program`` or a link on the way to it, and which path.

    Every link resolving the program passes through counts (red team): the
    jail follows them again at every worker start, so a link inside a
    writable grant re-points the program as surely as the file itself.
    SandboxError for a chain of links too long to check (the kernel would
    refuse it too, ELOOP).
    """
    for path in (program, *link_hops(program)):
        inside = _writable_holding(path, writable)
        if inside is not None:
            return inside, path
    return None, program


def _reached(program: str, held: str) -> str:
    """``program``, or ``program (through the link held)`` when a link on its way is held."""
    return program if held == program else f"{program} (through the link {held})"


def _writable_holding(path: str, writable: Sequence[PathGrant]) -> PathGrant | None:
    """The writable grant that is ``path`` or a directory above it (by inode), or that
    has a mount below it showing ``path`` again (:mod:`caplet._host._mirrors`), if any."""
    if not writable:
        return None
    table = read_mount_table()
    for grant in writable:
        if table.mirror_below(grant.path, path, inside_too=False):
            return grant
    try:
        info = os.lstat(path)  # the program's own name, not what a link names
    except OSError:
        return None
    chain = {(info.st_dev, info.st_ino)}
    chain |= {(node.device, node.inode) for node in inode_chain(Path(path).parent)}
    for grant in writable:
        if (grant.device, grant.inode) in chain:
            return grant
    return None


def _ownership_fix(path: str, identity: WorkerIdentity, *, writable: bool) -> str:
    if identity.privileged:
        access = "read and write" if writable else "read"
        return (
            f"caplet runs as root, and workers never do: they run as {identity.describe()}. "
            f"Give that uid {access} access, e.g. `chown -R {identity.uid}:{identity.gid} "
            f"{path}` (or a group or ACL entry for it), or choose the uid workers run as "
            "(policy worker_uid/worker_gid, or a 'caplet' account)"
        )
    return (
        f"the worker runs as caplet's own user (uid {identity.uid}); give it access to {path} "
        "(chmod/chown), or grant a path it can use"
    )
