"""The worker's cgroup bounds the memory RLIMIT_AS does not see (red-team finding 9).

RLIMIT_AS bounds each process's mappings. A memfd written with write(2) (refused
to every worker since memfd29, still measured here) is
never mapped, nor are a tmpfs file's pages, pipe and socket buffers, or the
address spaces of a worker's *other* processes: a red-team plugin with the
default 512 MiB limit held 1.5 GiB of the host's RAM in memfds (RLIMIT_FSIZE
per memfd x RLIMIT_NOFILE, per process, times the processes limit). Each
attack here hoards memory one way and reports how much it holds in a file
the test reads afterwards (the worker may not live to return it); where the
hoard is spread over several processes the test measures what the living
ones hold once it is over.
"""

from __future__ import annotations

import dataclasses
import os
import select
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet._errors import WorkerCrashedError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher, isolation_report
from tests._sandbox.seccompkit import call, rate_cgroup, sandboxed_host, write_plugin
from tests.conftest import NEEDS_CGROUP, child_pids, give_to_worker

_MIB = 1 << 20
MEMORY_MB = 128
TMP_MB = 64
#: What a worker may hold in all: its memory limit plus its /tmp (memory too).
BOUND_MB = MEMORY_MB + TMP_MB

HOARD = """
import errno, fcntl, os, socket, time

MIB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
F_SETPIPE_SZ = 1031  # fcntl(2)


def create_functions(config):
    progress = os.open(config["progress"], os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    held = []  # everything hoarded stays referenced until the worker ends

    def report(total):
        # The last value survives the worker's death: the test reads it.
        os.pwrite(progress, b"%016d" % total, 0)

    def memfd(limit, report):
        block, total = b"x" * MIB, 0
        while total < limit:
            fd = os.memfd_create("hoard")
            held.append(fd)
            for _ in range(16):
                total += os.write(fd, block)
                report(total)

    def tmpfs(limit, report):
        block, total = b"x" * MIB, 0
        while total < limit:
            fd = os.open(f"hoard-{len(held)}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            held.append(fd)
            for _ in range(16):
                total += os.write(fd, block)
                report(total)

    def pipes(limit, report):
        chunk, total = b"x" * 65536, 0
        while total < limit:
            read_end, write_end = os.pipe()
            held.extend((read_end, write_end))
            try:
                fcntl.fcntl(write_end, F_SETPIPE_SZ, MIB)
            except OSError:
                pass  # past the user's pipe-user-pages-soft: the default size
            os.set_blocking(write_end, False)
            try:
                while total < limit:
                    total += os.write(write_end, chunk)
                    report(total)
            except BlockingIOError:
                pass

    def sockets(limit, report):
        chunk, total = b"x" * 65536, 0
        while total < limit:
            pair = socket.socketpair()
            held.extend(pair)
            for end in pair:
                end.setblocking(False)
                try:
                    while total < limit:
                        total += end.send(chunk)
                        report(total)
                except BlockingIOError:
                    pass

    def sndbuf(limit, report):
        # SO_SNDBUF asks for more than a socket's default buffer (up to 2 x wmem_max).
        chunk, total = b"x" * 65536, 0
        while total < limit:
            pair = socket.socketpair()
            held.extend(pair)
            for end in pair:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
                end.setblocking(False)
                try:
                    while total < limit:
                        total += end.send(chunk)
                        report(total)
                except BlockingIOError:
                    pass

    def spliced(limit, report):
        # A packet-mode pipe gives each one-byte write a page of its own; splice
        # moves the pages into a socket, which is charged one byte for each.
        total = 0
        while total < limit:
            pair = socket.socketpair()
            held.extend(pair)
            pair[0].setblocking(False)
            read_end, write_end = os.pipe2(os.O_DIRECT | os.O_NONBLOCK)
            try:
                while total < limit:
                    for _ in range(16):
                        os.write(write_end, b"x")
                    moved = os.splice(read_end, pair[0].fileno(), 16, flags=os.SPLICE_F_NONBLOCK)
                    total += moved * PAGE
                    report(total)
                    if moved < 16:
                        break
            except BlockingIOError:
                pass
            finally:
                os.close(read_end)
                os.close(write_end)

    def sendfile(limit, report):
        # One byte of each page of a /tmp file into a socket, then the file is
        # deleted: tmpfs gets its size back, the socket keeps the pages.
        total = 0
        while total < limit:
            pair = socket.socketpair()
            held.extend(pair)
            fd = os.open("spool", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, b"y" * (2 * 1024 * PAGE))
                for index, end in enumerate(pair):
                    end.setblocking(False)
                    try:
                        for page in range(index * 1024, (index + 1) * 1024):
                            total += os.sendfile(end.fileno(), fd, page * PAGE, 1) * PAGE
                            report(total)
                    except BlockingIOError:
                        pass
            finally:
                os.close(fd)
                os.unlink("spool")

    def heap(limit, report):
        total = 0
        while total < limit:
            held.append(b"\\1" * MIB)  # written, so resident
            total += MIB
            report(total)

    def spread(limit, report):
        # A /tmp full (tmp_size_mb), then pipe buffers, then the heap: together past
        # the cgroup's limit, where each alone stops at its own bound first.
        done = [0]

        def counted(total):
            report(done[0] + total)

        for part in (tmpfs, pipes, heap):
            last = [0]

            def step(total, last=last):
                last[0] = total
                counted(total)

            try:
                part(limit - done[0], step)
            except (OSError, MemoryError):
                pass
            done[0] += last[0]

    fills = {
        "spread": spread,
        "memfd": memfd,
        "tmpfs": tmpfs,
        "pipes": pipes,
        "sockets": sockets,
        "sndbuf": sndbuf,
        "spliced": spliced,
        "sendfile": sendfile,
        "heap": heap,
    }

    def fill(vector, limit, report):
        last = [0]

        def counted(total):
            last[0] = total
            report(total)

        try:
            fills[vector](limit, counted)
        except (OSError, MemoryError) as exc:
            name = errno.errorcode.get(getattr(exc, "errno", 0) or 0, type(exc).__name__)
            return last[0], name
        return last[0], ""

    def hoard(vector, limit_mb, processes):
        limit = limit_mb * MIB
        if processes == 1:
            total, stopped = fill(vector, limit, report)
            return {"held": total, "stopped": stopped}
        # Each child hoards its share, says how much, and stays alive holding
        # it (the test measures what the living ones hold).
        total = 0
        for _ in range(processes):
            read_end, write_end = os.pipe()
            if os.fork() == 0:
                os.close(read_end)
                got, _ = fill(vector, limit // processes, lambda _total: None)
                os.write(write_end, b"%016d" % got)
                time.sleep(3600)
                os._exit(0)
            os.close(write_end)
            answer = os.read(read_end, 16)
            os.close(read_end)
            if not answer:
                return {"held": total, "stopped": "a child was killed"}
            total += int(answer)
        return {"held": total, "stopped": ""}

    def escape(paths):
        # Loosen the worker's own limits, or leave its cgroup for its zygote's.
        out = {}
        for path in paths:
            try:
                with open(path, "w") as file:
                    file.write("max\\n" if "cgroup.procs" not in path else f"{os.getpid()}\\n")
                out[path] = "written"
            except OSError as exc:
                out[path] = errno.errorcode.get(exc.errno, str(exc.errno))
        return out

    return {"probe": {"hoard": hoard, "escape": escape}}
"""


def _hoarder(tmp_path: Path, **limits: Any) -> WorkerSpec:
    """A worker running HOARD with a writable grant for its progress file."""
    snapshot = tmp_path / "hoarder"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text(textwrap.dedent(HOARD), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    progress = out / "progress"
    spec = WorkerSpec(
        plugin="hoarder",
        snapshot_dir=snapshot,
        entry="plugin.py",
        config={"progress": str(progress)},
        modules={"probe": ("hoard", "escape")},
        workdir=tmp_path,
        grants=(PathGrant(str(out), writable=True),),
        memory_mb=MEMORY_MB,
        tmp_size_mb=TMP_MB,
    )
    return dataclasses.replace(spec, **limits)


def _hoard(
    launcher: SandboxLauncher, spec: WorkerSpec, vector: str, processes: int
) -> tuple[dict[str, Any] | str, float]:
    """What the hoard returned (or the error of the worker that died doing it), and
    the MiB its processes hold once it is over (measured from here when they are
    several; else what the worker's last report said it held)."""
    with launcher.start(spec) as worker:
        try:
            result: Any = worker.call(
                "probe", "hoard", (vector, 3 * BOUND_MB, processes), {}, timeout_s=120
            )
        except WorkerCrashedError as exc:
            return str(exc), 0.0 if processes > 1 else _reported_mb(spec)
        if processes == 1:
            return result, _reported_mb(spec)
        # Nothing grows once the call has returned: what the jail's processes
        # hold now is what they held together (a process the kernel killed
        # is gone, or shrinking).
        jail = _descendants(worker.pid)
        held = _memfd_bytes(jail) if vector == "memfd" else _private_bytes(jail)
    return result, held / _MIB


def _reported_mb(spec: WorkerSpec) -> float:
    try:
        text = Path(str(spec.config["progress"])).read_bytes()
    except FileNotFoundError:
        return 0.0  # refused before it held anything
    return int(text or b"0") / _MIB


def _descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        children = child_pids(queue.pop())
        found += children
        queue += children
    return found


def _private_bytes(pids: list[int]) -> int:
    """Memory only these processes hold (smaps_rollup: what no other process shares)."""
    total = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="ascii").splitlines()
        except OSError:
            continue  # exited
        for line in lines:
            key, _, value = line.partition(":")
            if key in ("Private_Clean", "Private_Dirty"):
                total += int(value.split()[0]) * 1024
    return total


def _memfd_bytes(pids: list[int]) -> int:
    """The pages of every memfd these processes hold open, each counted once."""
    sizes: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    continue
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            sizes[info.st_dev, info.st_ino] = info.st_blocks * 512
    return sum(sizes.values())


@pytest.mark.parametrize(
    ("vector", "processes", "open_files"),
    [
        ("memfd", 1, 256),
        ("tmpfs", 1, 256),
        ("pipes", 1, 256),
        ("sockets", 1, 256),
        # Without a memory cgroup these are refused: a socket holds its default buffer only.
        ("sndbuf", 1, 256),
        ("spliced", 1, 256),
        ("sendfile", 1, 256),
        ("memfd", 12, 256),  # refused in every process of every worker (memfd29)
        # Without a memory cgroup these are bounded per process only (docs/security.md).
        pytest.param("sockets", 1, 4096, marks=NEEDS_CGROUP),
        pytest.param("heap", 12, 256, marks=NEEDS_CGROUP),
    ],
)
def test_memory_outside_the_address_space_is_bounded_too(
    tmp_path: Path, launcher: SandboxLauncher, vector: str, processes: int, open_files: int
) -> None:
    spec = _hoarder(tmp_path, open_files=open_files)
    outcome, held = _hoard(launcher, spec, vector, processes)
    assert held <= BOUND_MB, f"{vector} in {processes} process(es) held {held:.0f} MiB: {outcome}"


@NEEDS_CGROUP
def test_a_worker_killed_at_its_memory_limit_is_told_why(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    # No worker gets a memfd (memfd29): a full /tmp, pipe buffers and the heap
    # reach the limit together.
    outcome, held = _hoard(launcher, _hoarder(tmp_path), "spread", 1)
    assert isinstance(outcome, str), outcome
    assert (
        f"the kernel's OOM killer stopped 1 of its processes at the worker's memory limit of "
        f"{BOUND_MB} MiB (memory_mb {MEMORY_MB} + tmp_size_mb {TMP_MB}); if the plugin needs "
        "more, raise its memory_mb" in outcome
    ), outcome
    assert 0 < held <= BOUND_MB


@NEEDS_CGROUP
@pytest.mark.parametrize(("memory_mb", "tmp_size_mb"), [(200, 8), (2048, 64), (4096, 256)])
def test_the_worker_cgroup_has_the_memory_limit_and_no_swap(
    tmp_path: Path, launcher: SandboxLauncher, memory_mb: int, tmp_size_mb: int
) -> None:
    # Below and above the spare's default (512 + 64 MiB): on cgroup v1 the
    # memory+swap limit must move first when the limit grows.
    spec = _hoarder(tmp_path, memory_mb=memory_mb, tmp_size_mb=tmp_size_mb)
    limit = f"{(memory_mb + tmp_size_mb) * _MIB}\n"
    with launcher.start(spec) as worker:
        memory = _memory_cgroup(worker.pid)
        assert memory.name.startswith(("spare-", "worker-")), memory
        if (memory / "memory.max").exists():  # cgroup v2
            assert (memory / "memory.max").read_text() == limit
            assert (memory / "memory.swap.max").read_text() == "0\n"
        else:
            assert (memory / "memory.limit_in_bytes").read_text() == limit
            assert (memory / "memory.memsw.limit_in_bytes").read_text() == limit
        held: Any = worker.call("probe", "hoard", ("heap", 16, 1), {}, timeout_s=60)
        assert held == {"held": 16 * _MIB, "stopped": ""}


@NEEDS_CGROUP
def test_a_dead_zygotes_cgroups_are_swept_by_the_next(tmp_path: Path) -> None:
    first = SandboxLauncher(strict=True)
    worker = first.start(_hoarder(tmp_path))
    memory = _memory_cgroup(worker.pid)
    zygote = memory.parent
    process = first._get_zygote().process
    assert zygote.name == f"caplet-zygote-{process.pid}"
    jail = [worker.pid, *_descendants(worker.pid)]
    pidfds = [os.pidfd_open(pid) for pid in jail]
    # The host dies without closing anything: the zygote (and with it every
    # worker, PR_SET_PDEATHSIG) is killed outright and removes nothing.
    process.kill()
    process.wait()
    for pidfd in pidfds:  # each has exited (a process that has left its cgroups)
        select.select([pidfd], [], [])
        os.close(pidfd)
    assert zygote.exists()
    second = SandboxLauncher(strict=True)
    try:
        assert second.layers()["cgroup"] == ""
        assert not zygote.exists(), "the next zygote left a dead one's cgroups behind"
    finally:
        second.close()
        worker.close()
        first.close()


def _memory_cgroup(pid: int) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text(encoding="ascii").splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory", path.lstrip("/"))
        if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return Path("/sys/fs/cgroup", path.lstrip("/"))
    raise AssertionError(f"worker {pid} is in no memory cgroup")


@NEEDS_CGROUP
def test_a_worker_without_a_jail_cannot_loosen_or_leave_its_cgroups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Best-effort isolation (no namespaces, no Landlock) leaves /sys/fs/cgroup
    # in view: the worker's cgroups and its zygote's are root's and 0700, and
    # a root host's worker is never root (_identity).
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces,landlock")
    launcher = SandboxLauncher(strict=False)
    try:
        # Without a jail the worker cannot reach pytest's (root's) directories.
        spec = dataclasses.replace(_hoarder(tmp_path), config={"progress": "/dev/null"})
        with launcher.start(spec) as worker:
            memory = _memory_cgroup(worker.pid)
            rate = rate_cgroup(worker.pid)
            limits = [memory / name for name in ("memory.limit_in_bytes", "memory.max")]
            limits += [rate / name for name in ("cpu.cfs_quota_us", "cpu.max")]
            limits = [path for path in limits if path.exists()]
            before = [path.read_text() for path in limits]
            targets = [*limits, memory / "cgroup.procs", memory.parent / "cgroup.procs"]
            result = worker.call("probe", "escape", ([str(t) for t in targets],), {}, timeout_s=60)
            assert result == {str(t): "EACCES" for t in targets}
            assert [path.read_text() for path in limits] == before
            assert _memory_cgroup(worker.pid) == memory
    finally:
        launcher.close()


@pytest.fixture
def without_cgroups(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxLauncher]:
    """A launcher on a machine with no cgroup to use (as an unprivileged user without one)."""
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "cgroup")
    launcher = SandboxLauncher(strict=True)
    yield launcher
    launcher.close()


def test_without_a_memory_cgroup_no_worker_gets_a_memfd(
    tmp_path: Path, without_cgroups: SandboxLauncher
) -> None:
    # Nothing could bound what a memfd holds: memfd_create is refused (and
    # counted) instead, and strict isolation still runs (the layer is optional).
    assert without_cgroups.layers()["cgroup"].startswith("disabled by")
    spec = _hoarder(tmp_path)
    with without_cgroups.start(spec) as worker:
        result = worker.call("probe", "hoard", ("memfd", 3 * BOUND_MB, 1), {}, timeout_s=60)
    assert result == {"held": 0, "stopped": "EPERM"}
    assert dict(worker.denials) == {"memfd_create": 1}
    assert _reported_mb(spec) == 0


@pytest.mark.parametrize(
    ("vector", "denials"),
    [("sndbuf", {"setsockopt": 1}), ("spliced", {"splice": 1}), ("sendfile", {})],
)
def test_without_a_memory_cgroup_no_socket_holds_more_than_its_buffer(
    tmp_path: Path, without_cgroups: SandboxLauncher, vector: str, denials: dict[str, int]
) -> None:
    # What bounds socket memory there is each socket's default send buffer:
    # nothing may size it up or fill it with pages charged one byte each
    # (sendfile is refused quietly: shutil.copyfile tries it on every copy).
    spec = _hoarder(tmp_path)
    with without_cgroups.start(spec) as worker:
        result = worker.call("probe", "hoard", (vector, 3 * BOUND_MB, 1), {}, timeout_s=120)
    assert result == {"held": 0, "stopped": "EPERM"}
    assert dict(worker.denials) == denials


def test_without_a_memory_limit_a_memfd_is_still_refused(
    tmp_path: Path, without_cgroups: SandboxLauncher
) -> None:
    # memory_mb=None asks for no memory limit at all, so memory is no reason to
    # refuse a memfd there; what it would be is a file on no noexec mount, which a
    # worker could write and map executable (memfd29): refused and counted.
    spec = _hoarder(tmp_path, memory_mb=None)
    with without_cgroups.start(spec) as worker:
        result = worker.call("probe", "hoard", ("memfd", 16, 1), {}, timeout_s=60)
    assert result == {"held": 0, "stopped": "EPERM"}
    assert dict(worker.denials) == {"memfd_create": 1}


def test_doctor_says_how_memory_is_bounded(without_cgroups: SandboxLauncher) -> None:
    del without_cgroups  # only its environment: the report starts a zygote of its own
    memory = isolation_report().details["memory"]
    assert memory == (
        "a worker's memory is bounded per process only (RLIMIT_AS and its descriptors' buffers), "
        "and splice, sendfile and socket buffer sizes are refused to workers with a memory "
        "limit (memfd_create is refused to every worker) (no memory cgroup: disabled by "
        "CAPLET_TEST_DISABLE_LAYERS (test-only))"
    )


@NEEDS_CGROUP
def test_doctor_says_memory_is_bounded_per_worker() -> None:
    report = isolation_report()
    assert report.layers["cgroup"] == ""
    assert report.details["memory"].startswith("bounded per worker: a memory cgroup")


#: A chain of processes, each forked before its own RLIMIT_CPU count runs out:
#: every successor starts counting from zero (the attack, attack13).
CHAIN = """
import signal, time

def chain(generations, each):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    done_read, done_write = os.pipe()
    if os.fork() == 0:
        for _ in range(generations):
            start = time.process_time()
            while time.process_time() - start < each:
                pass
            if os.fork() != 0:
                os._exit(0)
        os.write(done_write, b"x")
        os._exit(0)
    os.close(done_write)
    os.read(done_read, 1)  # the last of the chain has spun its share
    return "done"
"""


@NEEDS_CGROUP
def test_a_chain_of_processes_cannot_spin_past_the_workers_cpu_limit(
    plugins_dir: Path, state_dir: Path
) -> None:
    # On main the chain ran its 5 CPU seconds against cpu_s = 1 (and would
    # have for ever), its worker alive after it: each process had its own count.
    write_plugin(plugins_dir, "chain", CHAIN, ("chain",), limits="timeout_ms = 60000\ncpu_s = 1")
    with sandboxed_host(plugins_dir, state_dir, "chain") as host:
        with pytest.raises(WorkerCrashedError) as caught:
            call(host, "chain", "chain", 10, 0.5)
    assert (
        "its processes together used more than its CPU limit of 1 CPU seconds (cpu_s, counted "
        "over every process it started); if the plugin needs more, raise its cpu_s"
    ) in str(caught.value)


@NEEDS_CGROUP
def test_processes_within_the_workers_cpu_limit_run_to_their_end(
    plugins_dir: Path, state_dir: Path
) -> None:
    # The near miss: the same chain within cpu_s, called twice (the count is
    # the worker's whole life, as RLIMIT_CPU's was for one process).
    write_plugin(plugins_dir, "chain", CHAIN, ("chain",), limits="timeout_ms = 60000\ncpu_s = 4")
    with sandboxed_host(plugins_dir, state_dir, "chain") as host:
        assert call(host, "chain", "chain", 3, 0.2) == "done"
        assert call(host, "chain", "chain", 3, 0.2) == "done"
