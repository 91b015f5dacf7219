"""Renames and hard links across grants (issue 13, point 10).

A grant is a bind mount of exactly the approved directory, so moving a name
from one grant to another, or out of the jail's own file systems into a
grant, crosses a mount and the kernel refuses it with ``EXDEV`` (rename(2),
link(2)); a read grant is mounted read-only, so nothing in it can be renamed,
replaced or removed (``EROFS``). These cases try every spelling of the move:
``rename``, ``renameat2(RENAME_EXCHANGE)`` through ctypes, ``link`` and a
link through ``/proc/self/fd`` (``linkat(AT_SYMLINK_FOLLOW)``), which needs no
path to the source at all.

The read grant is the bench's IPC directory (``{ipc}``): it holds a host
socket, a datagram socket and a FIFO that the host owns. Seen from the host
after each attack: every one of them is still there, and nothing new is in
the plugin's writable grant or in the read grant.
"""

from __future__ import annotations

from caplet._selftest._checks import refused
from caplet._selftest._model import (
    Arena,
    Args,
    Attempt,
    Family,
    HostileCase,
    Layer,
)

__all__ = ["CASES"]

#: renameat2(2) has no wrapper in the os module: ctypes (so the gate refuses
#: this case's plugin; the gate-off column is the kernel's answer).
EXCHANGE = """
import ctypes


def exchange(source, target):
    libc = ctypes.CDLL(None, use_errno=True)
    # renameat2(AT_FDCWD, source, AT_FDCWD, target, RENAME_EXCHANGE)
    if libc.renameat2(-100, source.encode(), -100, target.encode(), 2) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return "exchanged"
"""

MOVE = """
def through_fd(source, target):
    fd = os.open(source, os.O_PATH)
    try:
        return os.link(f"/proc/self/fd/{fd}", target, follow_symlinks=True)
    finally:
        os.close(fd)


def run(how, source, target):
    mine = os.path.join(CONFIG["out"], "mine")
    with open(mine, "w") as handle:
        handle.write("the plugin's own file")
    source = mine if source == "mine" else source
    target = os.path.join(CONFIG["out"], target) if not target.startswith("/") else target
    actions = {
        "rename": os.rename,
        "replace": os.replace,
        "link": os.link,
        "fd-link": through_fd,
    }
    if how == "exchange":
        actions[how] = exchange
    return attempt(actions[how], source, target)
"""

#: Names the attacks try to create; none may exist afterwards.
_PLANTED = ("stolen", "planted", "hard", "moved")


def _move(how: str, source: str, target: str) -> Args:
    """``source``/``target``: ``fifo``, ``socket`` (in the read grant), ``mine`` (in the
    writable grant), ``ipc:<name>`` (a new name in the read grant) or a bare name in the
    writable grant."""

    def args(arena: Arena, _plugin: str) -> tuple[object, ...]:
        def where(name: str) -> str:
            if name == "fifo":
                return str(arena.fifo_path)
            if name == "socket":
                return str(arena.unix_path)
            if name.startswith("ipc:"):
                return str(arena.unix_path.parent / name[4:])
            return name

        return (how, where(source), where(target))

    return args


def grants_unchanged(attempt: Attempt, arena: Arena) -> bool:
    """The read grant's host files are all in place; nothing was planted either side."""
    ipc = arena.unix_path.parent
    kept = all(path.exists() for path in (arena.fifo_path, arena.unix_path))
    out = arena.out(attempt.plugin)
    planted = [out / name for name in _PLANTED] + [ipc / name for name in _PLANTED]
    return kept and not any(path.exists() or path.is_symlink() for path in planted)


def _case(name: str, attack: str, how: str, source: str, target: str, *, errno: str) -> HostileCase:
    return HostileCase(
        name,
        Family.FILESYSTEM,
        attack,
        Layer.NAMESPACES,
        EXCHANGE + MOVE if how == "exchange" else MOVE,
        refused(errno, grants_unchanged),
        args=_move(how, source, target),
        capabilities=("fs.read:{ipc}",),
    )


CASES: tuple[HostileCase, ...] = (
    _case(
        "rename-out-of-read-grant",
        "move a host FIFO out of its read grant into its writable grant",
        "rename",
        "fifo",
        "stolen",
        errno="EXDEV",
    ),
    _case(
        "rename-into-read-grant",
        "move a file of its own into its read grant (plant a file the host trusts)",
        "replace",
        "mine",
        "ipc:planted",
        errno="EXDEV",
    ),
    _case(
        "rename-within-read-grant",
        "rename a host socket inside its read grant (move a daemon's socket aside)",
        "rename",
        "socket",
        "ipc:moved",
        errno="EROFS",
    ),
    _case(
        "rename-exchange-grants",
        "swap a file of its own with a host FIFO in a read grant (renameat2 RENAME_EXCHANGE)",
        "exchange",
        "mine",
        "fifo",
        errno="EXDEV",
    ),
    _case(
        "hardlink-from-read-grant",
        "hard-link a host socket from its read grant into its writable grant",
        "link",
        "socket",
        "hard",
        errno="EXDEV",
    ),
    _case(
        "hardlink-through-proc-fd",
        "hard-link a read-grant file through /proc/self/fd (linkat AT_SYMLINK_FOLLOW)",
        "fd-link",
        "fifo",
        "hard",
        errno="EXDEV",
    ),
)
