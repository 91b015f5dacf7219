"""What the bench sees of a case's jail from the host: its pid namespace, whether
anything of it still runs, and the state of the arena's files and listeners.
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Jail", "alive", "digest_tree", "fifo_idle", "find_jail", "idle", "jail_gone"]

#: How long a killed jail may take to disappear before the bench calls it a leak.
_JAIL_EXIT_S = 10.0


@dataclass(frozen=True, slots=True)
class Jail:
    """One worker's jail as the host sees it: pid 1 of its pid namespace.

    ``namespace`` is None when the worker shares the host's pid namespace
    (best-effort without the namespaces layer): then only the worker's own
    exit can be checked.
    """

    pid_one: int
    pidfd: int
    namespace: str | None


def _pid_namespace(pid: int | str, which: str = "pid") -> str:
    return str(Path(f"/proc/{pid}/ns/{which}").readlink())


def find_jail(monitor: int) -> Jail:
    """The jail under a worker's monitor (its only child, pid 1 inside).

    pid 1 is not dumpable, so a host without CAP_SYS_PTRACE (an unprivileged
    run) may not read its namespace links (proc(5), ptrace access mode):
    then the monitor's ``pid_for_children`` names the same namespace, and
    where that is unreadable too, pid 1's exit is the proof (pid_namespaces(7):
    it kills every process of its namespace before it is gone).
    """
    try:
        children = (
            Path(f"/proc/{monitor}/task/{monitor}/children").read_text(encoding="ascii").split()
        )
    except OSError:
        children = []
    pid_one = int(children[0]) if len(children) == 1 else monitor
    pidfd = os.pidfd_open(pid_one)
    namespace: str | None
    try:
        namespace = _pid_namespace(pid_one)
    except PermissionError:
        try:
            namespace = _pid_namespace(monitor, "pid_for_children")
        except OSError:
            namespace = None
    if namespace == _pid_namespace("self"):
        namespace = None
    return Jail(pid_one, pidfd, namespace)


def _running_members(namespace: str) -> list[str]:
    """Every process on the machine in pid namespace ``namespace`` that is not a zombie."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if _pid_namespace(entry.name) != namespace:
                continue
            stat = Path(f"/proc/{entry.name}/stat").read_text(encoding="ascii")
        except OSError:
            continue  # exited while we looked, or a kernel thread
        # proc(5): the state follows the parenthesised command name.
        if stat.rpartition(")")[2].split()[0] not in ("Z", "X"):
            found.append(stat)
    return found


def jail_gone(jail: Jail) -> str:
    """ "" when pid 1 of the jail exited and nothing of its namespace runs, else what is left.

    pid_namespaces(7): when pid 1 of a namespace terminates, every other
    process in it is killed; the pidfd turns readable at that exit.
    """
    try:
        poller = select.poll()
        poller.register(jail.pidfd, select.POLLIN)
        if not poller.poll(round(_JAIL_EXIT_S * 1000)):
            return f"jail pid {jail.pid_one} still runs"
    finally:
        os.close(jail.pidfd)
    if jail.namespace is not None and _running_members(jail.namespace):
        return "processes of the jail outlived it"
    return ""


def digest_tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def fifo_idle(fd: int) -> bool:
    """True when no byte reached the host's FIFO (end of file or nothing waiting)."""
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return True


def idle(sock: socket.socket) -> bool:
    """True when nothing reached this (non-blocking) listener or receiver."""
    try:
        if sock.type == socket.SOCK_DGRAM:
            sock.recv(1)
        else:
            connection, _ = sock.accept()
            connection.close()
    except BlockingIOError:
        return True
    return False


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X", "t", "T")
