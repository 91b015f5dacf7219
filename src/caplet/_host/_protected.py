"""What no grant may reach: caplet's own files (issue 13, point 2; split out of
``_grant_check``, which decides the rest of an enable's grants).

No grant may lie inside caplet's state directory or its store; a *writable* one may
not contain them either, nor the lock file, the plugins directory, the runtime, the
policy file, the folders the host and its live peers import from, nor the kernel's
interfaces; a *read* grant that contains a state directory gets it hidden. Each is
decided by inode, walking up from the path, and a second spelling of a protected
folder (a bind mount elsewhere) is caught through the mount table.
"""

from __future__ import annotations

import importlib.machinery
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from caplet._errors import CapabilityError, StoreError
from caplet._host._inode_chain import Node, inode_chain
from caplet._host._mirrors import MountTable, read_mount_table
from caplet._trust._paths import ensure_private_dir
from caplet._trust._sqlite import DB_FILENAME as STATE_MARKER
from caplet._trust._sqlite import SqliteStore

__all__ = [
    "ProtectedPaths",
    "hidden_state",
    "make_to_hide",
    "refuse_inside_any_state",
    "refuse_inside_state",
    "refuse_kernel_interfaces",
    "refuse_mirrors",
    "refuse_process_files",
    "refuse_writable_over",
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


def refuse_mirrors(
    where: str,
    root: str,
    protected: ProtectedPaths,
    *,
    writable: bool,
    table: MountTable | None = None,
) -> None:
    """No mount *below* the grant shows caplet's state (for a writable grant: any of
    caplet's own files) again (:mod:`caplet._host._mirrors`); ``table`` is the mount
    table read once for an enable's many grants (a glob's files), else read now."""
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
    if table is None:
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


def refuse_inside_state(
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


def refuse_inside_any_state(where: str, fd: int, own: list[Node]) -> None:
    """No grant is, or lies inside, *any* caplet state directory: another project's
    (``CAPLET_STATE_DIR`` per project), another host's of the same user. A state
    directory is known by its database (``caplet.db``); with ``fs.write`` there a
    plugin could forge that host's approvals, with ``fs.read`` read its ``ctx.kv``.

    The grant itself is checked through its pinned descriptor, the directories above
    it through theirs when its chain was read from descriptors (``Node.marked``,
    attack35), else by path (a marker that appears later only refuses more).
    """
    for index, node in enumerate(own):
        held = node.marked
        if held is None:
            try:
                if index == 0:
                    marker = os.stat(STATE_MARKER, dir_fd=fd, follow_symlinks=False)
                else:
                    marker = (Path(node.path) / STATE_MARKER).lstat()
            except OSError:
                continue
            held = stat.S_ISREG(marker.st_mode)
        if not held:
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


def refuse_kernel_interfaces(where: str, path: str) -> None:
    for interface in _KERNEL_INTERFACES:
        if path == interface or path.startswith(f"{interface}/"):
            raise CapabilityError(
                f"{where} is writable and lies in {interface}, one of the kernel's interfaces "
                "(process, device and system settings, cgroup limits), not files: a plugin "
                "may never write there; grant a directory of files instead"
            )


def refuse_process_files(where: str, path: str, fstype: str) -> None:
    """No grant, read or write, in a proc file system (wherever it is mounted).

    ``/proc/<pid>/cmdline`` of every host process (passwords given as arguments),
    their mount tables, their maps: not files but other processes' state, outside
    the worker's pid namespace (attack34: ``fs.read:/proc/*/cmdline``). The worker
    has a ``/proc`` of its own, for its own processes, without a grant.
    """
    if fstype == "proc" or path == "/proc" or path.startswith("/proc/"):
        raise CapabilityError(
            f"{where} lies in /proc (a proc file system): not files but every process's "
            "command line, mounts and memory maps, outside the plugin's own processes; no "
            "plugin may be granted it (the worker has a /proc of its own for its own "
            "processes): grant a directory of files instead"
        )


def refuse_writable_over(where: str, own: list[Node], protected: ProtectedPaths) -> None:
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
    for path, what in _guarded_files(protected):
        if _same_file(path, inode):
            raise CapabilityError(
                f"{where} is writable and is {path}, {what}; a plugin may never write "
                "caplet's own files: grant files that are not it (a narrower glob, or the "
                "files by name)"
            )
    for path, what, nor_inside in _code_folders(protected):
        if not nor_inside:  # a grant anywhere inside is refused below
            _refuse_code_below(where, own, path, what)
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


def _code_folders(protected: ProtectedPaths) -> list[tuple[Path, str, bool]]:
    """The folders Python code is imported from, here and in live peers, each with
    whether a grant inside one is refused outright."""
    return [
        *((path, _IMPORTS, inside) for path, inside in protected.imports),
        *((path, _PEER_CODE, inside) for path, inside in protected.peer_code),
    ]


#: What the import system loads from a folder (importlib.machinery: sources, bytecode,
#: extension modules).
_MODULE_SUFFIXES = tuple(importlib.machinery.all_suffixes())


def _refuse_code_below(where: str, own: list[Node], folder: Path, what: str) -> None:
    """A writable grant inside ``folder`` (the script's own folder, ``sys.path[0]``, whose
    data folders plugins are granted) is no module and no bytecode cache of it.

    attack33: only a grant *containing* the script's folder was refused, and a write glob
    (``fs.write:/srv/app/*``, a file by name) is no folder: it rewrote ``helpers.py``
    (or ``pkg/mod.py``, or a ``__pycache__`` file) and the host's next import of it ran
    the plugin's code outside every sandbox layer.
    """
    chain = inode_chain(folder)
    if not chain:
        return
    top = (chain[0].device, chain[0].inode)
    below = next(
        (index for index, node in enumerate(own) if (node.device, node.inode) == top), None
    )
    if not below:
        return  # not inside it (or the folder itself: refused as containing it)
    name = Path(own[0].path).name
    cache = next((node.path for node in own[:below] if Path(node.path).name == "__pycache__"), None)
    if cache is not None:
        raise CapabilityError(
            f"{where} is writable and lies in {cache}, the bytecode cache of {folder}, {what}; "
            "bytecode written there runs in the host: grant a folder outside it"
        )
    if name.endswith(_MODULE_SUFFIXES):
        raise CapabilityError(
            f"{where} is writable and is a Python module below {folder}, {what}; a plugin may "
            "never write code the host runs: grant its data files or folders, not its modules"
        )


def _guarded_files(protected: ProtectedPaths) -> list[tuple[Path, str]]:
    """caplet's own files that a writable grant must not *be* (attack33): its folder is
    guarded against being contained only, and a file grant contains nothing, so a write
    glob (``fs.write:PROJECT/*.toml``) matched the policy file and rewrote the next
    start's policy, or the lock file and the pins of locked mode."""
    found = [(protected.lockfile, "the lock file (the pins of locked mode)")]
    if protected.policy_file is not None:
        found.append((protected.policy_file, "the policy file (the next start's limits)"))
    return found


def _same_file(path: Path, inode: tuple[int, int]) -> bool:
    """Whether ``path``, or what it links to, is the file ``inode`` (a hard link too)."""
    for follow in (False, True):
        try:
            info = path.stat(follow_symlinks=follow)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == inode:
            return True
    return False


def make_to_hide(where: str, grant: tuple[int, int], states: Sequence[Path]) -> None:
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


def hidden_state(root: str, inode: tuple[int, int], state_chain: list[Node]) -> str:
    """Where, inside the grant ``root``, caplet's state directory appears ("" if not in it)."""
    if not state_chain:
        return ""
    state = state_chain[0].path
    for node in state_chain:
        if (node.device, node.inode) == inode:
            relative = state[len(node.path.rstrip("/")) :]
            return root.rstrip("/") + relative if relative else root
    return ""
