"""A pids and a memory cgroup per worker: the bounds no process of a worker can escape.

Processes: RLIMIT_NPROC does not bound a worker whose uid is root on the
host: the kernel exempts the initial user (``copy_process`` in
kernel/fork.c checks ``real_cred->user != INIT_USER``) even inside a user
namespace. A pids cgroup (cgroups(7), the ``pids`` controller) bounds every
process the worker and its descendants create, whoever they are.

Memory: RLIMIT_AS bounds each process's mappings, not what a worker holds
outside them: a memfd or a tmpfs file written with write(2), pipe and socket
buffers, and the address spaces of its *other* processes (a red-team plugin
with a 512 MiB limit held 1.5 GiB of shared memory in memfds: each bounded
only by RLIMIT_FSIZE, their number by RLIMIT_NOFILE, per process). A memory
cgroup charges all of it to the worker, whichever of its processes made it:
page cache and shmem pages (memfd, tmpfs) to the cgroup of the process that
first touched them, kernel memory such as pipe and socket buffers with them
(Documentation/admin-guide/cgroup-v2.rst, "Memory Ownership"; tests/_sandbox/
test_cgroup.py measures each). Its limit is the worker's ``memory_mb`` plus
its ``tmp_size_mb`` (the private /tmp is memory too, and has its own size),
and swap is bounded to nothing (``memory.memsw.limit_in_bytes`` equal to the
limit on cgroup v1, ``memory.swap.max`` 0 on v2), so a hoard cannot be
pushed out to swap to make room for more. Past the limit the kernel's OOM
killer kills the largest process *of that worker* (never one outside it),
and :meth:`WorkerCgroup.oom_kills` says so, for the host to tell the user.

The zygote puts each new worker into its own child cgroups before the worker
forks anything. Where they live:

- cgroup v1: the pids cgroup under ``/sys/fs/cgroup/pids``, the memory one
  under the zygote's own memory cgroup (so that a container's or a
  session's own memory limit still covers its workers);
- cgroup v2: the zygote's own cgroup when its ``cgroup.subtree_control``
  enables the controllers (the root cgroup), or its parent when that one
  does and was delegated to this user (it owns it): the recipe in
  docs/security.md moves the host into a leaf of a delegated subtree for
  that. The zygote's directory there enables them for its workers in turn.

Each half is optional on its own: :func:`open_cgroups` says what is missing
and why, and the zygote then refuses to workers with a memory limit what
would let a socket hold more than its default buffer (``splice``, ``sendfile``,
``SO_SNDBUF``: ``_seccomp_policy.UNBOUNDED_MEMORY``; see ``_zygote_child._child``).
``memfd_create`` it refuses to every worker, bounded or not (memfd29: an
anonymous file is the one file a worker could write and map executable).
``caplet doctor`` shows it.

CPU: a worker's CPU seconds are what its cgroup has counted, every process
it ever ran included (:func:`cpu_count`, read by the host's
:mod:`caplet._host._usage`). A process's own counters lose a child that is
never waited for, and all of it when the parent ignores SIGCHLD (the kernel
reaps such a child without adding its times to its parent's): a plugin that
spun in a child process spent CPU no budget saw (attack13). cgroup v2 counts
in every cgroup (``cpu.stat``, whether the cpu controller is enabled or
not); cgroup v1 only in a ``cpuacct`` hierarchy, so there each worker gets a
cpuacct cgroup too (no limit: it only counts). The zygote reads the same
count to hold a worker to its ``cpu_s`` as a whole: RLIMIT_CPU counts each
process alone, and a child forked before its count runs out starts again
from zero, so a chain of them spun for ever past the limit (attack13).

CPU rate: ``cpu_s`` bounds how much CPU a worker spends in all, not how fast:
between its calls a worker's threads and processes could each spin a core of
the host's until the count ran out (two cores for 30 s at the default). The
cpu controller caps the rate (CFS bandwidth: ``cpu.cfs_quota_us`` per
``cpu.cfs_period_us`` on cgroup v1, ``cpu.max`` on v2;
Documentation/scheduler/sched-bwc.rst): a worker with ``cpu_millicores``
1000 runs on at most one core's worth of time, however many threads and
processes it has, and a thread past it waits for the next period. Under an
ancestor capped lower (a container's own quota) the worker gets that cap:
cgroup v2 takes the smaller by itself, cgroup v1 refuses a larger share
outright, so there the quota is lowered to the ancestors' (attack15), over
a period of up to 1 s where their share of 100 ms is below the kernel's
smallest quota, 1 ms (attack16). Optional
like the rest: without a cpu controller (an unprivileged host without one
delegated) only ``cpu_s`` bounds the worker, which ``caplet doctor`` says.

This module runs in the zygote (and :func:`cpu_count` in the host): stdlib only.
"""

from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CPU_RATE_FALLBACK",
    "CPU_RATE_PERIOD_US",
    "MEMORY_FALLBACK",
    "ZYGOTE_PREFIX",
    "CgroupProbe",
    "CgroupRoot",
    "CpuCount",
    "WorkerCgroup",
    "cpu_count",
    "open_cgroups",
    "sweep_stale",
]

#: What bounds a worker's memory where no memory cgroup does (docs/security.md).
MEMORY_FALLBACK = (
    "a worker's memory is bounded per process only (RLIMIT_AS and its descriptors' "
    "buffers), and splice, sendfile and socket buffer sizes are refused to workers with a "
    "memory limit (memfd_create is refused to every worker)"
)

#: What bounds a worker's CPU where no cpu controller caps its rate.
CPU_RATE_FALLBACK = (
    "a worker's CPU rate is not capped: its threads and processes may use every core until "
    "their CPU seconds (cpu_s, counted over all of them where a cgroup counts) run out"
)
#: The CFS bandwidth period every worker's quota is a share of (100 ms, the
#: kernel's default; sched-bwc.rst).
CPU_RATE_PERIOD_US = 100_000
#: The kernel's smallest CFS quota and longest period (sched-bwc.rst: 1 ms, 1 s).
MIN_QUOTA_US = 1_000
CPU_RATE_MAX_PERIOD_US = 1_000_000

_V1_PIDS = Path("/sys/fs/cgroup/pids")
_V1_CPU = Path("/sys/fs/cgroup/cpu")
_V1_MEMORY = Path("/sys/fs/cgroup/memory")
_V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")
#: A zygote's own cgroup is ``<prefix><its pid>`` in each hierarchy; its workers' are inside.
ZYGOTE_PREFIX = "caplet-zygote-"
_V2 = Path("/sys/fs/cgroup")
#: cgroup v1's way of saying "no limit" (memory.limit_in_bytes).
_V1_UNLIMITED = "-1"


@dataclass(frozen=True, slots=True)
class CpuCount:
    """Where a worker's cgroup counts its CPU time (:func:`cpu_count`)."""

    path: Path
    #: cgroup v2's ``cpu.stat`` (``usage_usec``), else v1's ``cpuacct.usage`` (nanoseconds).
    v2: bool

    def seconds(self) -> float | None:
        """The CPU seconds counted so far; None once the cgroup is gone."""
        if not self.v2:
            text = _read(self.path).strip()
            return int(text) / 1e9 if text.isascii() and text.isdigit() else None
        for row in _read(self.path).splitlines():
            key, _, value = row.partition(" ")
            if key == "usage_usec" and value.strip().isascii() and value.strip().isdigit():
                return int(value) / 1e6
        return None


@dataclass(frozen=True, slots=True)
class WorkerCgroup:
    """One worker's cgroups: a directory per hierarchy (v1), or one for both (v2).

    ``cpu``: cgroup v1's cpuacct directory, which only counts (v2 counts in
    the one directory). ``rate``: where the cpu controller caps its rate
    (v1's cpu hierarchy; v2's one directory), None where nothing does."""

    pids: Path | None
    memory: Path | None
    cpu: Path | None = None
    rate: Path | None = None

    @property
    def directories(self) -> tuple[Path, ...]:
        candidates = (self.pids, self.memory, self.cpu, self.rate)
        return tuple(dict.fromkeys(p for p in candidates if p is not None))

    def cpu_count(self) -> CpuCount | None:
        """Where these cgroups count the worker's CPU time (None: nowhere)."""
        if self.cpu is not None:
            return CpuCount(self.cpu / "cpuacct.usage", v2=False)
        for directory in self.directories:
            if (directory / "cpu.stat").exists():  # cgroup v2 (v1's pids and memory have none)
                return CpuCount(directory / "cpu.stat", v2=True)
        return None

    def join(self, pid: int = 0) -> None:
        """Move ``pid`` (default: the calling process) into every one; children follow."""
        for directory in self.directories:
            (directory / "cgroup.procs").write_text(f"{pid or os.getpid()}\n", encoding="ascii")

    def limit(
        self, *, processes: int | None, memory_bytes: int | None, cpu_millicores: int | None
    ) -> None:
        """Set ``pids.max``, the memory limit and the CPU rate (None: no limit)."""
        if self.pids is not None:
            value = "max" if processes is None else str(processes)
            (self.pids / "pids.max").write_text(f"{value}\n", encoding="ascii")
        if self.memory is not None:
            _limit_memory(self.memory, memory_bytes)
        if self.rate is not None:
            _limit_rate(self.rate, cpu_millicores)

    def oom_kills(self) -> int:
        """How many processes the OOM killer took at this cgroup's memory limit."""
        if self.memory is None:
            return 0
        # v1: memory.oom_control ("oom_kill N", Linux >= 4.13); v2: memory.events.
        for name in ("memory.events", "memory.oom_control"):
            for line in _read(self.memory / name).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
        return 0

    def kill_members(self) -> None:
        """SIGKILL every process in the worker's cgroups until they are empty.

        A worker without a pid namespace (best-effort isolation) can leave
        descendants in sessions of their own that no process-group kill
        reaches; its cgroup still holds them all.
        """
        for directory in self.directories:
            _kill_members(directory)

    def remove(self) -> bool:
        """Remove the worker's (empty) cgroups; False while processes remain (EBUSY)."""
        removed = [_remove(directory) for directory in self.directories]  # each one
        return all(removed)


@dataclass(frozen=True, slots=True)
class CgroupRoot:
    """The zygote's own directories, under which each worker gets its cgroups."""

    pids: Path | None
    memory: Path | None
    cpu: Path | None = None
    rate: Path | None = None

    def create(
        self,
        name: str,
        *,
        processes: int | None,
        memory_bytes: int | None,
        cpu_millicores: int | None,
    ) -> WorkerCgroup:
        """Child cgroups ``name`` with these limits (removed again if a limit fails)."""
        made: list[Path] = []
        cgroup = WorkerCgroup(
            None if self.pids is None else self.pids / name,
            None if self.memory is None else self.memory / name,
            None if self.cpu is None else self.cpu / name,
            None if self.rate is None else self.rate / name,
        )
        try:
            for directory in cgroup.directories:
                directory.mkdir(mode=0o700)
                made.append(directory)
            if cgroup.memory is not None and (cgroup.memory / "memory.swap.max").exists():
                (cgroup.memory / "memory.swap.max").write_text("0\n", encoding="ascii")
            cgroup.limit(
                processes=processes, memory_bytes=memory_bytes, cpu_millicores=cpu_millicores
            )
        except OSError:
            for directory in made:
                _remove(directory)
            raise
        return cgroup

    def close(self) -> None:
        """Remove the zygote's directories once its workers' cgroups are gone."""
        for directory in dict.fromkeys(
            p for p in (self.pids, self.memory, self.cpu, self.rate) if p is not None
        ):
            _remove(directory)


@dataclass(frozen=True, slots=True)
class CgroupProbe:
    """What :func:`open_cgroups` found: the root (None: neither half) and what is missing."""

    root: CgroupRoot | None
    #: "" when workers get a pids cgroup, else why not.
    pids_problem: str
    #: "" when workers get a memory cgroup, else why not.
    memory_problem: str
    #: "" when the cpu controller caps each worker's CPU rate, else why not. Not
    #: part of :attr:`problem`: ``cpu_s`` still bounds the worker without it.
    rate_problem: str = ""

    @property
    def problem(self) -> str:
        """The ``cgroup`` layer's report: "" when both halves are here, else what is not."""
        missing = [self.pids_problem] if self.pids_problem else []
        if self.memory_problem:
            missing.append(f"{self.memory_problem}: {MEMORY_FALLBACK}")
        return "; ".join(missing)


def open_cgroups(name: str, *, stale_prefix: str = "") -> CgroupProbe:
    """Create the zygote's cgroup ``name`` in each hierarchy that has a usable place for it.

    With ``stale_prefix``, leftovers of dead zygotes are swept first.
    """
    own = _own_cgroups()
    v2 = _v2_base(own.get(""))
    # (directory, whether it is cgroup v2) where the zygote's own may go
    pids_bases = [(_V1_PIDS, False)] if (_V1_PIDS / "cgroup.procs").exists() else []
    memory_bases = []
    if "memory" in own and (_V1_MEMORY / "cgroup.procs").exists():
        memory_bases.append((_V1_MEMORY / own["memory"].lstrip("/"), False))
    # The controllers cgroup v2 enables for the zygote's children (none without v2).
    enabled = _read(v2 / "cgroup.subtree_control").split() if v2 is not None else []
    if v2 is not None:
        if "pids" in enabled:
            pids_bases.append((v2, True))
        if "memory" in enabled:
            memory_bases.append((v2, True))
    pids, pids_problem = _open(pids_bases, name, stale_prefix, "pids")
    memory, memory_problem = _open(memory_bases, name, stale_prefix, "memory")
    if pids is None and memory is None:
        return CgroupProbe(None, pids_problem, memory_problem, "no pids or memory cgroup either")
    # cgroup v1 counts CPU only in a cpuacct hierarchy (v2 in every cgroup):
    # optional, a host without it counts a worker's CPU from /proc.
    cpu = None
    if (_V1_CPUACCT / "cgroup.procs").exists():
        cpu, _ = _open([(_V1_CPUACCT.resolve(), False)], name, stale_prefix, "cpuacct")
    # Resolved: most cgroup v1 systems mount cpu and cpuacct as one hierarchy
    # (/sys/fs/cgroup/cpu,cpuacct, with cpu and cpuacct links to it), and a
    # worker's directory there must be one path, made once.
    # Under the zygote's own cpu cgroup, as the memory one: a container's or a
    # session's own CPU quota still covers its workers.
    rate_bases = []
    if "cpu" in own and (_V1_CPU / "cpu.cfs_quota_us").exists():
        rate_bases.append((_V1_CPU.resolve() / own["cpu"].lstrip("/"), False))
    if v2 is not None and "cpu" in enabled:
        rate_bases.append((v2, True))
    rate, rate_problem = _open(rate_bases, name, stale_prefix, "cpu")
    root = CgroupRoot(pids, memory, cpu, rate)
    return CgroupProbe(root, pids_problem, memory_problem, rate_problem)


def _open(
    bases: list[tuple[Path, bool]], name: str, stale_prefix: str, controller: str
) -> tuple[Path | None, str]:
    if not bases:
        return None, (
            f"no writable {controller} cgroup: neither cgroup v1's {controller} controller nor "
            f"a cgroup v2 subtree delegating {controller} is available to this user"
        )
    reasons = []
    for base, v2 in bases:
        if stale_prefix:
            sweep_stale(base, stale_prefix)
        path = base / name
        created = False
        try:
            path.mkdir(mode=0o700)
            created = True
        except FileExistsError:
            pass  # cgroup v2: the other controller's half made it
        except OSError as exc:
            reasons.append(f"{base}: {exc.strerror}")
            continue
        if not v2:
            return path, ""
        # cgroup v2: the workers below get the controller only if this enables it.
        try:
            (path / "cgroup.subtree_control").write_text(f"+{controller}\n", encoding="ascii")
        except OSError as exc:
            reasons.append(f"{path}: enabling {controller}: {exc.strerror}")
            if created:
                _remove(path)
            continue
        return path, ""
    return None, f"cannot create a {controller} cgroup (" + "; ".join(reasons) + ")"


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
                _kill_members(child)
                _remove(child)
            _remove(entry)
        except OSError:
            # Another zygote starting at the same moment sweeps the same
            # leftovers (ENOENT), or a process is still exiting (EBUSY):
            # whatever is left is the next sweep's; never fail a zygote here.
            continue


def cpu_count(pid: int) -> CpuCount | None:
    """Where the worker cgroup that process ``pid`` is in counts CPU; None without one.

    Only a cgroup a zygote made for one worker (inside ``caplet-zygote-N``)
    will do: any other (the host's own, the root) holds other processes too.
    Its counts include every process that was ever in it, reaped or not.
    Asked once, while the worker surely runs: a pid is reused once it is gone.
    """
    for line in _read(Path(f"/proc/{pid}/cgroup")).splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if not path.startswith("/") or not Path(path).parent.name.startswith(ZYGOTE_PREFIX):
            continue
        relative = path.lstrip("/")
        if "cpuacct" in controllers.split(","):
            return CpuCount(_V1_CPUACCT / relative / "cpuacct.usage", v2=False)
        if not controllers and (_V2 / "cgroup.controllers").exists():
            return CpuCount(_V2 / relative / "cpu.stat", v2=True)
    return None


def _limit_memory(directory: Path, limit: int | None) -> None:
    if (directory / "memory.max").exists():  # cgroup v2
        value = "max" if limit is None else str(limit)
        (directory / "memory.max").write_text(f"{value}\n", encoding="ascii")
        return
    # cgroup v1: memory+swap may never be below memory alone, so the one that
    # grows is written first (cgroup-v1/memory.rst, "memsw"). Without swap
    # accounting there is no memsw file and the kernel charges no swap at
    # all: docs/security.md says what that leaves.
    value = _V1_UNLIMITED if limit is None else str(limit)
    memory = directory / "memory.limit_in_bytes"
    memsw = directory / "memory.memsw.limit_in_bytes"
    if not memsw.exists():
        memory.write_text(f"{value}\n", encoding="ascii")
        return
    try:
        memory.write_text(f"{value}\n", encoding="ascii")
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        memsw.write_text(f"{value}\n", encoding="ascii")  # raising: memsw first
        memory.write_text(f"{value}\n", encoding="ascii")
        return
    memsw.write_text(f"{value}\n", encoding="ascii")


def _limit_rate(directory: Path, millicores: int | None) -> None:
    period = CPU_RATE_PERIOD_US
    # The kernel's smallest quota is 1 ms (sched-bwc.rst); a thousandth of a
    # core is 100 us of each period, so a tiny share is rounded up to it.
    quota = None if millicores is None else max(millicores * period // 1000, MIN_QUOTA_US)
    if (directory / "cpu.max").exists():  # cgroup v2
        (directory / "cpu.max").write_text(f"{quota or 'max'} {period}\n", encoding="ascii")
        return
    # cgroup v1 refuses (EINVAL) a quota whose share of its period is above an
    # ancestor's, where v2 takes the smaller: a container capped at half a core
    # (docker --cpus=0.5 on v1) made every worker's cgroup fail at the default
    # rate, so no plugin started at all (attack15). The worker gets the smaller
    # share, as v2 gives it; "no limit" under a capped ancestor is that cap.
    ceiling = None if quota is None else _ancestors_quota(directory.parent, period)
    if millicores is not None and ceiling is not None and ceiling < MIN_QUOTA_US:
        # An ancestor's share is below the smallest quota at this period (systemd's
        # CPUQuota=0.5% with CPUQuotaPeriodSec=1s is 0.5 ms of 100 ms): rounded up to
        # 1 ms it was above that share again, and refused (attack16). At the longest
        # period every ancestor's share is at least 1 ms (theirs are at most that long).
        period = CPU_RATE_MAX_PERIOD_US
        quota = max(millicores * period // 1000, MIN_QUOTA_US)
        ceiling = _ancestors_quota(directory.parent, period)
    if ceiling is not None and quota is not None:
        quota = min(quota, max(ceiling, MIN_QUOTA_US))
    # The period first (the default, written so a quota always means this
    # share), then the quota; -1 is "no limit". A spare's cgroup is limited again
    # for its request: its old quota over a new, shorter period could be above the
    # ancestors' share for that moment (refused), so it is lifted first.
    if _read(directory / "cpu.cfs_period_us").strip() != str(period):
        (directory / "cpu.cfs_quota_us").write_text("-1\n", encoding="ascii")
    (directory / "cpu.cfs_period_us").write_text(f"{period}\n", encoding="ascii")
    (directory / "cpu.cfs_quota_us").write_text(f"{quota or -1}\n", encoding="ascii")


def _ancestors_quota(directory: Path, period: int) -> int | None:
    """cgroup v1: the smallest quota per ``period`` of ``directory`` and its ancestors.

    None when none of them is capped. Rounded down, as the kernel compares
    each cgroup's share with its parent's (``tg_cfs_schedulable_down``).
    """
    ceiling = None
    while (directory / "cpu.cfs_quota_us").exists():
        quota = _read(directory / "cpu.cfs_quota_us").strip()
        their_period = _read(directory / "cpu.cfs_period_us").strip()
        if quota.isascii() and quota.isdigit() and their_period.isdigit() and int(their_period):
            share = int(quota) * period // int(their_period)
            ceiling = share if ceiling is None else min(ceiling, share)
        if directory.parent == directory:
            break
        directory = directory.parent
    return ceiling


def _kill_members(directory: Path, *, rounds: int = 100) -> None:
    # Several rounds: a process may fork while the list is being read.
    procs = directory / "cgroup.procs"
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


def _remove(directory: Path) -> bool:
    """Remove an empty cgroup; False while processes remain (EBUSY)."""
    try:
        directory.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return False
        raise
    return True


def _own_cgroups() -> dict[str, str]:
    """Controller (``""`` for the v2 line) -> the calling process's cgroup path."""
    own: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _v2_base(own: str | None) -> Path | None:
    """Where this process may make cgroup v2 children, if anywhere (see the module doc)."""
    if own is None or not (_V2 / "cgroup.controllers").exists():
        return None
    directory = _V2 / own.lstrip("/")
    if _read(directory / "cgroup.subtree_control").split():
        return directory
    parent = directory.parent
    # A delegated subtree belongs to its user (systemd's Delegate=yes chowns
    # it); root must not make cgroups in the slices systemd manages.
    try:
        delegated = os.geteuid() != 0 and (parent / "cgroup.procs").stat().st_uid == os.geteuid()
    except OSError:
        return None
    if delegated and directory != _V2 and _read(parent / "cgroup.subtree_control").split():
        return parent
    return None


def _read(path: Path) -> str:
    # errors="replace": a cgroup path an administrator named outside ASCII
    # (another hierarchy's line of /proc/PID/cgroup) is no reason to fail.
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
