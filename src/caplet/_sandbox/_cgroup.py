"""A pids cgroup per worker: the bound on processes a fork bomb cannot escape.

RLIMIT_NPROC does not bound a worker whose uid is root on the host: the
kernel exempts the initial user (``copy_process`` in kernel/fork.c checks
``real_cred->user != INIT_USER``) even inside a user namespace. A pids
cgroup (cgroups(7), the ``pids`` controller) bounds every process the worker
and its descendants create, whoever they are, so the zygote puts each new
worker into its own child cgroup with ``pids.max`` before the worker enters
its jail.

Both hierarchies are supported: cgroup v1 with the pids controller mounted at
``/sys/fs/cgroup/pids``, and cgroup v2 where the zygote's own cgroup
delegates ``pids``. When neither is writable (an unprivileged user without a
delegated cgroup), :func:`open_pids_root` says why and the layer is reported
missing (it is optional: strict isolation does not require it, and
``caplet doctor`` shows it).

This module runs in the zygote: stdlib only.
"""

from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PidsRoot", "open_pids_root", "sweep_stale"]

_V1 = Path("/sys/fs/cgroup/pids")
_V2 = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class PidsRoot:
    """The zygote's own cgroup directory, under which each worker gets one."""

    path: Path

    def create(self, name: str, max_pids: int) -> Path:
        """A child cgroup ``name`` with ``pids.max``; returns its directory."""
        child = self.path / name
        child.mkdir(mode=0o700)
        (child / "pids.max").write_text(f"{max_pids}\n", encoding="ascii")
        return child

    @staticmethod
    def join(cgroup: Path, pid: int = 0) -> None:
        """Move ``pid`` (default: the calling process) into ``cgroup``; children follow."""
        (cgroup / "cgroup.procs").write_text(f"{pid or os.getpid()}\n", encoding="ascii")

    @staticmethod
    def kill_members(cgroup: Path, *, rounds: int = 100) -> None:
        """SIGKILL every process in ``cgroup`` until it is empty (or ``rounds`` pass).

        A worker without a pid namespace (best-effort isolation) can leave
        descendants in sessions of their own that no process-group kill
        reaches; its cgroup still holds them all. Several rounds, because a
        process may fork while the list is being read.
        """
        procs = cgroup / "cgroup.procs"
        for _ in range(rounds):
            try:
                pids = [int(line) for line in procs.read_text(encoding="ascii").split()]
            except (OSError, ValueError):
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    @staticmethod
    def remove(cgroup: Path) -> bool:
        """Remove an empty worker cgroup; False while processes remain (EBUSY)."""
        try:
            cgroup.rmdir()
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return False
            raise
        return True

    def close(self) -> None:
        """Remove the zygote's cgroup once its workers' cgroups are gone."""
        PidsRoot.remove(self.path)


def sweep_stale(root: Path, prefix: str) -> None:
    """Kill and remove what zygotes that died without cleaning up left behind.

    A zygote killed outright (its host died: PR_SET_PDEATHSIG) cannot remove
    its cgroups; the next zygote finds ``<prefix><pid>`` directories whose
    pid no longer runs, kills whatever is still inside and removes them.
    """
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir():
            continue
        pid = entry.name.removeprefix(prefix)
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue
        try:
            for child in [c for c in entry.iterdir() if c.is_dir()]:
                PidsRoot.kill_members(child)
                PidsRoot.remove(child)
            PidsRoot.remove(entry)
        except OSError:
            # Another zygote starting at the same moment sweeps the same
            # leftovers (ENOENT), or a process is still exiting (EBUSY):
            # whatever is left is the next sweep's; never fail a zygote here.
            continue


def _own_cgroup_v2() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return _V2 / line[3:].lstrip("/")
    return None


def open_pids_root(name: str, *, stale_prefix: str = "") -> tuple[PidsRoot | None, str]:
    """Create the zygote's cgroup ``name``; returns (root, "") or (None, why not).

    With ``stale_prefix``, leftovers of dead zygotes are swept first.
    """
    candidates: list[Path] = []
    if (_V1 / "cgroup.procs").exists():
        candidates.append(_V1)
    own = _own_cgroup_v2()
    if own is not None and "pids" in _read(own / "cgroup.subtree_control"):
        candidates.append(own)
    if not candidates:
        return None, (
            "no writable pids cgroup: neither cgroup v1's pids controller nor a cgroup v2 "
            "subtree delegating pids is available to this user"
        )
    reasons = []
    for base in candidates:
        if stale_prefix:
            sweep_stale(base, stale_prefix)
        path = base / name
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            reasons.append(f"{base}: {exc.strerror}")
            continue
        return PidsRoot(path), ""
    return None, "cannot create a pids cgroup (" + "; ".join(reasons) + ")"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii")
    except OSError:
        return ""
