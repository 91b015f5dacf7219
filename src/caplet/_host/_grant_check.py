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

Globs are granted by their literal root directory, as before.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from caplet._capabilities._model import (
    Capability,
    CapabilityKind,
    FsCapability,
    ProcExecCapability,
)
from caplet._errors import CapabilityError, SandboxError, StoreError
from caplet._host._inode_chain import Node, chain_from_fd, inode_chain
from caplet._host._mirrors import read_mount_table
from caplet._host._program_names import linked_and_writable
from caplet._host._program_reach import reach_line
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import WorkerIdentity
from caplet._sandbox._programs import link_hops, program_chain
from caplet._sandbox._resolve import (
    GrantPathError,
    access_problem,
    open_no_links,
)
from caplet._trust._paths import ensure_private_dir
from caplet._trust._sqlite import DB_FILENAME as STATE_MARKER
from caplet._trust._sqlite import SqliteStore

__all__ = [
    "GrantPlan",
    "ProtectedPaths",
    "check_against",
    "plan_grants",
    "store_directory",
]


_IMPORTS = (
    "a folder the host imports Python modules from (sys.path): a module written there "
    "would run in the host, outside every sandbox layer"
)
_PEER_CODE = (
    "a folder another live caplet process of this user runs Python code from "
    "(its sys.path, its runtime or its plugins): a module written there would run in that "
    "process, outside every sandbox layer"
)


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """caplet's own files, which no plugin may write and which no grant may expose.

    ``runtime`` are the Python runtime's and caplet's own directories (what
    a worker imports); ``state_dir`` holds the run directory and snapshots.
    """

    state_dir: Path
    lockfile: Path
    plugins_dir: Path
    runtime: tuple[str, ...]
    #: Other state directories of this user that may exist (the platform default, the
    #: one CAPLET_STATE_DIR names): guarded as the host's own state directory is.
    other_states: tuple[Path, ...] = ()
    #: The directory of the SQLite store when it is not ``state_dir`` (``store=sqlite:///DIR``,
    #: the policy's ``store``, ``CAPLET_STORE``): approvals, the decision log and ctx.kv live
    #: there, so it is guarded exactly as the state directory is (red-team round 3).
    store_dir: Path | None = None
    #: The policy file in force (``caplet.toml``, ``pyproject.toml``, ``--policy``,
    #: ``CAPLET_POLICY``): it decides the next host's limits, so no writable grant holds it.
    policy_file: Path | None = None
    #: The folders of the installed plugins discovered (``dist_path``): their code, which a
    #: writable grant could rewrite and whose approval would then carry over (round 17),
    #: guarded as the plugins directory is.
    installed: tuple[Path, ...] = ()
    #: The folders the host imports Python modules from (``sys.path`` beyond the runtime:
    #: ``PYTHONPATH``, the script's or current folder), each with whether a grant *inside*
    #: it is refused too (round 17: a module written there ran in the host).
    imports: tuple[tuple[Path, bool], ...] = ()
    #: The folders the *other* live caplet processes of this user run Python
    #: code from (their ``sys.path``, runtime and plugins: ``RunDir.publish_code``), each
    #: with whether a grant inside it is refused too. Another process's ``PYTHONPATH`` or
    #: script folder is not this one's (red team round 19).
    peer_code: tuple[tuple[Path, bool], ...] = ()


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
    state_chain = inode_chain(protected.state_dir)
    store_chain = inode_chain(protected.store_dir) if protected.store_dir is not None else []
    for capability in capabilities:
        writable = capability.kind is CapabilityKind.FS_WRITE
        where = f"plugin {plugin!r}: capability {capability.declared!r} (path {capability.root!r})"
        try:
            fd = open_no_links(capability.root)
        except GrantPathError as exc:
            raise CapabilityError(f"{where}: {exc}") from exc
        try:
            info = os.fstat(fd)
            own = chain_from_fd(fd, capability.root)
            _refuse_inside_state(where, own, state_chain, protected.state_dir)
            if protected.store_dir is not None:
                _refuse_inside_state(where, own, store_chain, protected.store_dir, "store")
            _refuse_inside_any_state(where, fd, own)
            _refuse_mirrors(where, capability.root, protected, writable=writable)
            if writable:
                _refuse_kernel_interfaces(where, capability.root)
                _refuse_writable_over(where, own, protected)
            else:
                _make_to_hide(where, (info.st_dev, info.st_ino), protected.other_states)
                state_chains = [
                    state_chain,
                    store_chain,
                    *(inode_chain(path) for path in protected.other_states),
                ]
                for chain in state_chains:
                    hidden = _hidden_state(capability.root, (info.st_dev, info.st_ino), chain)
                    if hidden and hidden not in masks:
                        masks.append(hidden)
                        notes.append(
                            f"{capability.declared}: caplet's state directory {hidden} is "
                            "hidden inside this grant (an empty, sealed directory in the jail)"
                        )
            groups = () if identity.privileged else tuple(os.getgroups())
            problem = access_problem(
                fd, identity.uid, identity.gid, writable=writable, groups=groups
            )
        finally:
            os.close(fd)
        if problem:
            fix = _ownership_fix(capability.root, identity, writable=writable)
            raise CapabilityError(f"{where}: {problem}. {fix}")
        grants.append(
            PathGrant(capability.root, writable=writable, device=info.st_dev, inode=info.st_ino)
        )
    return grants, masks, notes


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


def _refuse_mirrors(where: str, root: str, protected: ProtectedPaths, *, writable: bool) -> None:
    """No mount *below* the grant shows caplet's state (for a writable grant: any of
    caplet's own files) again (:mod:`caplet._host._mirrors`)."""
    state = "caplet's state directory (approvals, the decision log, ctx.kv)"
    guarded: list[tuple[Path, str, bool]] = [
        (protected.state_dir, state, True),
        *((path, state, True) for path in (protected.store_dir,) if path is not None),
        *((path, "another caplet state directory", True) for path in protected.other_states),
    ]
    if writable:
        guarded += [
            (protected.plugins_dir, "the plugins directory (other plugins' code)", True),
            *((path, "an installed plugin's code", True) for path in protected.installed),
            *((path, _IMPORTS, inside) for path, inside in protected.imports),
            *((path, _PEER_CODE, inside) for path, inside in protected.peer_code),
            (protected.lockfile, "the lock file", False),
            *(
                (path, "the policy file", False)
                for path in (protected.policy_file,)
                if path is not None
            ),
            *(
                (Path(path), "the Python runtime or caplet's own code", True)
                for path in protected.runtime
            ),
        ]
    table = read_mount_table()
    for path, what, inside_too in guarded:
        mirror = table.mirror_below(root, str(path), inside_too=inside_too)
        if mirror:
            raise _mirror_refusal(where, mirror, path, what)


def _mirror_refusal(where: str, mirror: str, path: Path, what: str) -> CapabilityError:
    """The refusal of a grant below which a mount shows ``path`` again."""
    return CapabilityError(
        f"{where}: the mount {mirror} inside it shows {path} again, {what} (a bind mount "
        "of it or of a directory above it); a plugin may never reach caplet's own files: "
        "grant a directory without that mount, or unmount it"
    )


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


def _refuse_inside_state(
    where: str,
    own: list[Node],
    state_chain: list[Node],
    state_dir: Path,
    what: str = "state directory",
) -> None:
    """No grant lies in (or is) caplet's state directory (snapshots, approvals, the log),
    nor in the directory of its store when that is elsewhere."""
    if not state_chain:
        return
    state = state_chain[0]
    if any((node.device, node.inode) == (state.device, state.inode) for node in own):
        raise CapabilityError(
            f"{where} lies inside caplet's {what} {state_dir} (approvals, the "
            "decision log, ctx.kv values and plugin snapshots); no plugin may be granted "
            "any of it: grant a directory outside it"
        )


def _refuse_inside_any_state(where: str, fd: int, own: list[Node]) -> None:
    """No grant is, or lies inside, *any* caplet state directory: another project's
    (``CAPLET_STATE_DIR`` per project), another host's of the same user. A state
    directory is known by its database (``caplet.db``); with ``fs.write`` there a
    plugin could forge that host's approvals, with ``fs.read`` read its ``ctx.kv``.

    The grant itself is checked through its pinned descriptor, the directories
    above it by path (a marker that appears later only refuses more).
    """
    for index, node in enumerate(own):
        try:
            if index == 0:
                marker = os.stat(STATE_MARKER, dir_fd=fd, follow_symlinks=False)
            else:
                marker = (Path(node.path) / STATE_MARKER).lstat()
        except OSError:
            continue
        if not stat.S_ISREG(marker.st_mode):
            continue
        relation = "is" if index == 0 else "lies inside"
        raise CapabilityError(
            f"{where} {relation} {node.path}, a caplet state directory (it holds "
            f"{STATE_MARKER}: approvals, the decision log, ctx.kv values); no plugin may be "
            "granted any caplet state, this host's or another's: grant a directory outside it"
        )


#: Not files but the kernel's interfaces: writing there changes the machine
#: (a cgroup's limits, a device, a sysctl), not data.
_KERNEL_INTERFACES = ("/proc", "/sys", "/dev")


def _refuse_kernel_interfaces(where: str, path: str) -> None:
    for interface in _KERNEL_INTERFACES:
        if path == interface or path.startswith(f"{interface}/"):
            raise CapabilityError(
                f"{where} is writable and lies in {interface}, one of the kernel's interfaces "
                "(process, device and system settings, cgroup limits), not files: a plugin "
                "may never write there; grant a directory of files instead"
            )


def _refuse_writable_over(where: str, own: list[Node], protected: ProtectedPaths) -> None:
    """A writable grant contains none of caplet's own files, nor lies among them.

    ``own`` is the grant and the directories above it. The lock file's
    directory is guarded only against containing it (a writable grant
    beside the lock file, in the project it belongs to, is fine; one that
    could create or replace ``caplet.lock`` is not).
    """
    inode = (own[0].device, own[0].inode)
    above = {(node.device, node.inode) for node in own}
    runtime = "the Python runtime or caplet's own code"
    state = "caplet's state directory (approvals, the decision log)"
    guarded = [
        (protected.state_dir, state, True),
        *(
            (path, "caplet's store (approvals, the decision log, ctx.kv)", True)
            for path in (protected.store_dir,)
            if path is not None
        ),
        *((path, "another caplet state directory", True) for path in protected.other_states),
        *_would_be_made(protected.other_states),
        *_file_directories(protected.lockfile, "the lock file"),
        *(
            _file_directories(protected.policy_file, "the policy file")
            if protected.policy_file is not None
            else ()
        ),
        (protected.plugins_dir, "the plugins directory (other plugins' code)", True),
        *((path, "an installed plugin's code", True) for path in protected.installed),
        *((path, _IMPORTS, inside) for path, inside in protected.imports),
        *((path, _PEER_CODE, inside) for path, inside in protected.peer_code),
        *((Path(path), runtime, True) for path in protected.runtime),
    ]
    for path, what, nor_inside in guarded:
        chain = inode_chain(path)
        if any((node.device, node.inode) == inode for node in chain):
            raise CapabilityError(
                f"{where} is writable and contains {path}, {what}; a plugin may never "
                "write caplet's own files: grant a directory that does not contain it"
            )
        if nor_inside and chain and (chain[0].device, chain[0].inode) in above:
            raise CapabilityError(
                f"{where} is writable and lies inside {path}, {what}; a plugin may never "
                "write caplet's own files: grant a directory outside it"
            )


def _make_to_hide(where: str, grant: tuple[int, int], states: Sequence[Path]) -> None:
    """Make each default state directory that a read grant would contain once made.

    A read grant hides the state directories inside it that exist when the worker
    starts (an empty sealed tmpfs mounted over each); one a later caplet process makes
    (the first ``caplet`` on ``CAPLET_STATE_DIR``'s) appears in the running worker's
    bind mount unhidden, with its approvals, decision log and ``ctx.kv`` (attack24).
    The jail cannot mount over a folder that is not there, and must not make one in
    the host's folder from inside; the host makes it now, empty and private, as that
    first process would, and it is hidden like any other. When it cannot be made
    (a file in the way, a folder this user may not write), the grant is refused:
    what this process cannot make now, another may make later."""
    for state in states:
        if inode_chain(state):
            continue  # it exists: hidden as a state directory
        nearest = _nearest_existing(state)
        if grant not in {(node.device, node.inode) for node in inode_chain(nearest)}:
            continue  # the grant does not contain where it would be made
        try:
            ensure_private_dir(state)
        except StoreError as exc:
            raise CapabilityError(
                f"{where} contains {nearest}, the folder where the caplet state directory "
                f"{state} would be made, and caplet cannot make it now to hide it from the "
                f"plugin ({exc}); a caplet process that makes it later would show the plugin "
                "its approvals, decision log and ctx.kv values: make that folder (mkdir -m 700 "
                f"{state}) or grant a folder that does not contain it"
            ) from exc


def _nearest_existing(path: Path) -> Path:
    """``path``'s nearest folder that exists (``/`` at worst): a file in the way is no
    folder, and whoever may replace it may make the state directory there."""
    nearest = path.parent
    while not nearest.is_dir() and nearest != nearest.parent:
        nearest = nearest.parent
    return nearest


def _would_be_made(states: Sequence[Path]) -> list[tuple[Path, str, bool]]:
    """For each default state directory that does not exist yet, its nearest existing
    folder, guarded against being contained: a writable grant over it could make the
    state directory before any host does, with a database of the plugin's own, which
    the next host on it opens as its approvals (attack22). A grant beside it there
    (``~/.local/state/notes``) does not contain it and stays grantable."""
    found: list[tuple[Path, str, bool]] = []
    for state in states:
        if inode_chain(state):
            continue  # it exists: guarded as a state directory
        nearest = _nearest_existing(state)
        found.append(
            (nearest, f"the folder where the caplet state directory {state} would be made", False)
        )
    return found


def _file_directories(path: Path, what: str) -> list[tuple[Path, str, bool]]:
    """The directory holding *path* and, when *path* is a link (a ``caplet.toml`` linked
    to a shared configuration), the directory holding what it points to: a writable
    grant containing either could rewrite the file (guarded against containing only)."""
    found = [(path.parent, f"the directory of {what} {path}", False)]
    target = Path(os.path.realpath(path))
    if target.parent != Path(os.path.realpath(path.parent)):
        found.append((target.parent, f"the directory of {what} {path} (a link to {target})", False))
    return found


def store_directory(store: object) -> Path | None:
    """The directory of a SQLite trust store (None for a shared one: no file of it here)."""
    return store.state_dir if isinstance(store, SqliteStore) else None


def _hidden_state(root: str, inode: tuple[int, int], state_chain: list[Node]) -> str:
    """Where, inside the grant ``root``, caplet's state directory appears ("" if not in it)."""
    if not state_chain:
        return ""
    state = state_chain[0].path
    for node in state_chain:
        if (node.device, node.inode) == inode:
            relative = state[len(node.path.rstrip("/")) :]
            return root.rstrip("/") + relative if relative else root
    return ""
