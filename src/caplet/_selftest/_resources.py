"""Resource attacks: memory, CPU, time, output, descriptors and disk (ctx's own stores:
:mod:`._ctx_stores`).

Every loop here is bounded, so that where a missing layer lets one run on
it stops by itself (a little past the limit it should have hit, and says
``escaped``) instead of exhausting the machine running the selftest.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from caplet._errors import PluginCallError, WorkerCrashedError
from caplet._host._host import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._selftest._checks import DEADLINE_MS, escaped, raised, refused, timed_out
from caplet._selftest._model import (
    Arena,
    Attempt,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
    fixed_args,
)

__all__ = ["CASES"]

_MIB = 1024 * 1024
#: The policy's memory_mb (RLIMIT_AS, and with /tmp the worker's memory cgroup).
_MEMORY_MB = 512
#: WorkerSpec's defaults: the private /tmp, RLIMIT_FSIZE and RLIMIT_NOFILE.
_TMP_MB = 64
_FILE_MB = 64
_OPEN_FILES = 256
#: The jail's own inotify limit (its user namespace's /proc/sys/user) and
#: RLIMIT_SIGPENDING: both are charged to the uid that created the jail too.
_INOTIFY_INSTANCES = 16
_PENDING_SIGNALS = 1024
#: The policy's cpu_cores: the rate a worker's threads and processes share.
_CPU_CORES = 1.0

MEMORY_BOMB = """
def run():
    return len(bytearray(2 * 1024 * 1024 * 1024))
"""

SPIN = """
def run():
    while True:
        pass
"""

#: Four threads, each spinning its share of CPU time; how many cores they
#: used at once (process CPU time over wall time).
THREADS_SPIN = """
import threading
import time


def run(threads, seconds):
    def work():
        start = time.thread_time()
        while time.thread_time() - start < seconds:
            pass

    pool = [threading.Thread(target=work) for _ in range(threads)]
    wall, cpu = time.monotonic(), time.process_time()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return {"cpu": time.process_time() - cpu, "wall": time.monotonic() - wall}
"""

SLEEP = """
import time


def run():
    time.sleep(60)
"""

BLOCKING_READ = """
def run():
    # Block in read(2) on a pipe nobody will ever write to.
    read_end, _write_end = os.pipe()
    return os.read(read_end, 1)
"""

FLOOD = """
import sys


def run():
    line = "x" * 4095
    while True:
        print(line)
        try:
            print(line, file=sys.stderr)
        except OSError:
            pass  # the log hit RLIMIT_FSIZE: keep flooding stdout
"""

HUGE_RETURN = """
def run():
    return b"\\0" * (64 * 1024 * 1024)
"""

RECURSION = """
def run():
    def dive(depth):
        return dive(depth + 1)

    return dive(0)
"""

DEEP_NESTING = """
def run():
    value = []
    for _ in range(100_000):
        value = [value]
    return value
"""

FD_EXHAUSTION = """
def run(bound):
    opened = []
    try:
        while len(opened) < bound:
            opened.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as exc:
        return {"opened": len(opened), "errno": errname(exc)}
    finally:
        for fd in opened:
            os.close(fd)
    return {"escaped": f"opened {len(opened)} descriptors"}
"""

DISK_FILL = """
def run(token, bound_mb):
    chunk = b"\\0" * (1024 * 1024)
    written = 0
    index = 0
    try:
        while written < bound_mb * len(chunk):
            with open(f"{token}-{index}", "wb", buffering=0) as handle:  # its own tmpfs
                for _ in range(16):
                    written += handle.write(chunk)
            index += 1
    except OSError as exc:
        return {"written": written, "errno": errname(exc)}
    return {"escaped": f"wrote {written} bytes to its tmpfs"}
"""

FILE_SIZE = """
def run(bound_mb):
    chunk = b"\\0" * (1024 * 1024)
    written = 0
    path = os.path.join(CONFIG["out"], "huge")
    try:
        with open(path, "wb", buffering=0) as handle:
            while written < bound_mb * len(chunk):
                written += handle.write(chunk)
    except OSError as exc:
        return {"written": written, "errno": errname(exc)}
    finally:
        os.unlink(path)
    return {"escaped": f"wrote a file of {written} bytes"}
"""

INOTIFY_EXHAUSTION = """
import ctypes


def run(bound):
    libc = ctypes.CDLL(None, use_errno=True)
    made = []
    try:
        while len(made) < bound:
            fd = libc.inotify_init1(0)
            if fd < 0:
                code = ctypes.get_errno()
                return {"made": len(made), "errno": errno.errorcode.get(code, str(code))}
            made.append(fd)
    finally:
        for fd in made:
            os.close(fd)
    return {"escaped": f"made {len(made)} inotify instances"}
"""

EPOLL_HOARD = """
import ctypes
import select


def run(bound):
    # fs.epoll.max_user_watches counts per uid (user_struct), not per jail: the
    # host's user, or every other worker. A watch lives as long as its file, so
    # one file is registered under every descriptor number freed (attack10).
    libc = ctypes.CDLL(None, use_errno=True)
    ctypes.set_errno(0)
    instance = libc.epoll_create1(0)
    if instance < 0:
        code = ctypes.get_errno()
        return {"errno": errno.errorcode.get(code, str(code))}
    read_end, write_end = os.pipe()
    event = (ctypes.c_uint32 * 3)(select.EPOLLIN, 0, 0)  # struct epoll_event, packed
    held = 0
    for number in range(64, 250):
        if held >= bound:
            break
        os.dup2(read_end, number)
        if libc.epoll_ctl(instance, 1, number, event) == 0:  # EPOLL_CTL_ADD
            held += 1
        os.close(number)
    os.close(instance)
    os.close(read_end)
    os.close(write_end)
    return {"escaped": f"held {held} epoll watches charged to the uid"}
"""

PREALLOCATE = """
import ctypes


def run(megabytes):
    # FALLOC_FL_KEEP_SIZE (1): blocks past the end of file, which RLIMIT_FSIZE
    # never sees, in fd 2: the worker's log, a file on the host's TMPDIR disk.
    libc = ctypes.CDLL(None, use_errno=True)
    ctypes.set_errno(0)
    result = libc.fallocate(2, 1, ctypes.c_long(0), ctypes.c_long(megabytes << 20))
    if result == 0:
        allocated = os.fstat(2).st_blocks * 512
        return {"escaped": f"allocated {allocated >> 20} MiB of the host's disk"}
    code = ctypes.get_errno()
    return {"errno": errno.errorcode.get(code, str(code))}
"""

SIGNAL_QUEUE = """
import signal


def run(count):
    # Blocked real-time signals queue one entry each, charged (through the
    # user namespace) to the uid that created the jail as well.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
    try:
        for _ in range(count):
            os.kill(os.getpid(), signal.SIGRTMIN)
        with open("/proc/self/status") as handle:
            line = next(text for text in handle if text.startswith("SigQ:"))
        return {"queued": int(line.split()[1].split("/")[0])}
    finally:
        signal.signal(signal.SIGRTMIN, signal.SIG_IGN)  # discards what is pending
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGRTMIN])
"""

MEMFD_HOARD = """
def run(bound_mb):
    # Pages written into memfds are never mapped: RLIMIT_AS does not see them
    # (red-team finding 9: 1.5 GiB held by a worker with a 512 MiB limit). No
    # worker gets a memfd since memfd29 (a file on no noexec mount).
    block = b"x" * (1024 * 1024)
    held, fds = 0, []
    try:
        while held < bound_mb:
            fd = os.memfd_create("hoard")
            fds.append(fd)
            for _ in range(16):
                os.write(fd, block)
                held += 1
    except OSError as exc:
        return {"errno": errname(exc), "held_mb": held}
    finally:
        for fd in fds:
            os.close(fd)
    return {"escaped": f"held {held} MiB in memfds"}
"""

SOCKET_HOARD = """
def run(bound_mb):
    # Bytes queued in a socket are kernel memory, not address space: RLIMIT_AS
    # does not see them, and SO_SNDBUF lets one socket queue 40 times its default
    # (the red team's second look at finding 9: 1 GiB from a 128 MiB worker).
    import socket
    chunk = b"x" * 65536
    held, sockets = 0, []
    try:
        while held < bound_mb * 1024 * 1024:
            pair = socket.socketpair()
            sockets.extend(pair)
            for end in pair:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
                end.setblocking(False)
                try:
                    while held < bound_mb * 1024 * 1024:
                        held += end.send(chunk)
                except BlockingIOError:
                    pass
    except OSError as exc:
        return {"errno": errname(exc), "held_mb": held // (1024 * 1024)}
    finally:
        for end in sockets:
            end.close()
    return {"escaped": f"held {held // (1024 * 1024)} MiB in socket buffers"}
"""


def fds_exhausted(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    breach_unless(not escaped(attempt), attempt.describe())
    value = attempt.value
    expect(isinstance(value, dict) and value.get("errno") == "EMFILE", "expected EMFILE")
    assert isinstance(value, dict)
    expect(0 < int(value["opened"]) < _OPEN_FILES, attempt.describe())
    expect(attempt.same_worker, "the worker should have survived")


def disk_full(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    host_tmp = Path(tempfile.gettempdir())
    breach_unless(
        not (host_tmp / f"{arena.token}-0").exists(), "the plugin wrote into the host's /tmp"
    )
    breach_unless(not escaped(attempt), attempt.describe())
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    value = attempt.value
    expect(isinstance(value, dict) and value.get("errno") == "ENOSPC", "expected ENOSPC")
    assert isinstance(value, dict)
    # WorkerSpec.tmp_size_mb bounds the private /tmp.
    expect(0 < int(value["written"]) <= _TMP_MB * _MIB, attempt.describe())


def file_too_big(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    breach_unless(not escaped(attempt), attempt.describe())
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    value = attempt.value
    expect(isinstance(value, dict) and value.get("errno") == "EFBIG", "expected EFBIG")
    assert isinstance(value, dict)
    expect(int(value["written"]) <= _FILE_MB * _MIB, attempt.describe())


def inotify_bounded(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    breach_unless(not escaped(attempt), attempt.describe())
    value = attempt.value
    # EPERM: seccomp refuses inotify to a worker that cannot exec (attack37); EMFILE: the
    # jail's own limit, which a worker granted proc.exec meets.
    expect(
        isinstance(value, dict) and value.get("errno") in ("EPERM", "EMFILE"),
        "expected EPERM or EMFILE",
    )
    assert isinstance(value, dict)
    breach_unless(
        int(value["made"]) <= _INOTIFY_INSTANCES,
        f"{value['made']} inotify instances, charged to the host uid as well",
    )


def signals_bounded(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    value = attempt.value
    expect(isinstance(value, dict) and "queued" in value, attempt.describe())
    assert isinstance(value, dict)
    breach_unless(
        int(value["queued"]) <= _PENDING_SIGNALS,
        f"{value['queued']} signals queued, charged to the host uid as well",
    )
    expect(attempt.same_worker, "the worker should have survived")


def memfd_refused(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled, attempt.describe())
    breach_unless(not escaped(attempt), attempt.describe())
    # memfd29: seccomp refuses memfd_create to every worker, memory cgroup or not.
    expect(
        attempt.error is None and attempt.value == {"errno": "EPERM", "held_mb": 0},
        f"expected seccomp to refuse memfd_create before anything was held: {attempt.describe()}",
    )


def memory_bounded(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled, attempt.describe())
    breach_unless(not escaped(attempt), attempt.describe())
    if attempt.error is None:
        # Where no memory cgroup bounds the worker, seccomp refuses raising a
        # socket's buffer size before anything is held.
        expect(attempt.value == {"errno": "EPERM", "held_mb": 0}, attempt.describe())
        expect(
            False,
            "refused by seccomp before anything was held: no memory cgroup bounds the worker",
        )
    expect(isinstance(attempt.error, WorkerCrashedError), attempt.describe())
    expect(
        f"memory limit of {_MEMORY_MB + _TMP_MB} MiB" in str(attempt.error),
        "expected the kernel to stop it at the worker's memory limit",
    )


def cpu_rate_capped(attempt: Attempt, _arena: Arena, host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    value = attempt.value
    expect(isinstance(value, dict), attempt.describe())
    assert isinstance(value, dict)
    cores = float(value["cpu"]) / max(float(value["wall"]), 1e-6)
    # Never a breach: cpu_s bounds what the threads spend in all. Without a
    # cpu controller (or past the policy's one core, with a period's slack)
    # nothing capped the rate: contained elsewhere.
    launcher = host.launcher
    problem = (
        launcher.cpu_rate_problem()
        if isinstance(launcher, SandboxLauncher)
        else "the host's launcher is not the sandbox"
    )
    expect(
        not problem,
        f"no cpu controller caps a worker's rate ({problem}): cpu_s alone bounds how much "
        f"its threads spend ({cores:.2f} cores at once here)",
    )
    expect(
        cores <= _CPU_CORES * 1.25,
        f"its threads used {cores:.2f} cores at once: no cpu controller caps a worker's rate "
        "(cpu_s still bounds how much it spends)",
    )


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "memory-bomb",
        Family.RESOURCES,
        "allocate a 2 GiB bytearray",
        Layer.RLIMITS,
        MEMORY_BOMB,
        raised(PluginCallError, exc_type="MemoryError", worker_lives=True),
    ),
    HostileCase(
        "cpu-spin",
        Family.RESOURCES,
        "spin the CPU forever",
        Layer.DEADLINE,
        SPIN,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "cpu-threads",
        Family.RESOURCES,
        "spin 4 threads at once (0.3 CPU seconds each) to take the host's cores",
        Layer.CGROUP,
        THREADS_SPIN,
        cpu_rate_capped,
        args=fixed_args(4, 0.3),
        timeout_ms=30_000,
    ),
    HostileCase(
        "sleep-past-deadline",
        Family.RESOURCES,
        "block in time.sleep(60)",
        Layer.DEADLINE,
        SLEEP,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "blocking-read",
        Family.RESOURCES,
        "block forever in read(2) on a pipe nobody writes",
        Layer.DEADLINE,
        BLOCKING_READ,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "infinite-output",
        Family.RESOURCES,
        "print to stdout and stderr forever",
        Layer.DEADLINE,
        FLOOD,
        timed_out,
        timeout_ms=DEADLINE_MS,
    ),
    HostileCase(
        "huge-return",
        Family.RESOURCES,
        "return 64 MiB of bytes",
        Layer.FRAME_LIMIT,
        HUGE_RETURN,
        raised(PluginCallError, exc_type="SizeLimitError", says="frame limit", worker_lives=True),
    ),
    HostileCase(
        "deep-recursion",
        Family.RESOURCES,
        "recurse without end",
        Layer.DECLARATIVE_API,
        RECURSION,
        raised(PluginCallError, exc_type="RecursionError", worker_lives=True),
    ),
    HostileCase(
        "deep-nesting",
        Family.RESOURCES,
        "return a list nested 100000 deep",
        Layer.DECLARATIVE_API,
        DEEP_NESTING,
        raised(PluginCallError, exc_type="TypeError", says="nested deeper", worker_lives=True),
    ),
    HostileCase(
        "fd-exhaustion",
        Family.RESOURCES,
        "open /dev/null until it cannot",
        Layer.RLIMITS,
        FD_EXHAUSTION,
        fds_exhausted,
        args=fixed_args(16 * _OPEN_FILES),
    ),
    HostileCase(
        "disk-fill",
        Family.RESOURCES,
        "fill its own tmpfs until the disk is full",
        Layer.NAMESPACES,
        DISK_FILL,
        disk_full,
        args=lambda arena, _plugin: (arena.token, 2 * _TMP_MB),
    ),
    HostileCase(
        "file-size-bomb",
        Family.RESOURCES,
        "write one ever-growing file into its writable grant",
        Layer.RLIMITS,
        FILE_SIZE,
        file_too_big,
        args=fixed_args(_FILE_MB + 16),
    ),
    HostileCase(
        "inotify-exhaustion",
        Family.RESOURCES,
        "take every inotify instance of the uid that created the jail (root's, machine-wide)",
        Layer.NAMESPACES,
        INOTIFY_EXHAUSTION,
        inotify_bounded,
        args=fixed_args(200),
    ),
    HostileCase(
        "epoll-watch-hoard",
        Family.RESOURCES,
        "register epoll watches, counted per uid (the host's user or every other worker), "
        "one pipe under every free descriptor number",
        Layer.SECCOMP,
        EPOLL_HOARD,
        refused("EPERM"),
        args=fixed_args(150),
    ),
    HostileCase(
        "fallocate-keep-size",
        Family.RESOURCES,
        "preallocate 256 MiB past the end of its stderr log (the host's disk), unseen by "
        "RLIMIT_FSIZE",
        Layer.SECCOMP,
        PREALLOCATE,
        refused("EPERM"),
        args=fixed_args(256),
    ),
    HostileCase(
        "signal-queue-flood",
        Family.RESOURCES,
        "queue 5000 real-time signals, charged to the uid that created the jail",
        Layer.RLIMITS,
        SIGNAL_QUEUE,
        signals_bounded,
        args=fixed_args(5000),
    ),
    HostileCase(
        "memfd-hoard",
        Family.RESOURCES,
        "write 1152 MiB into memfds (pages RLIMIT_AS never sees)",
        Layer.SECCOMP,
        MEMFD_HOARD,
        memfd_refused,
        args=fixed_args(2 * (_MEMORY_MB + _TMP_MB)),
    ),
    HostileCase(
        "socket-hoard",
        Family.RESOURCES,
        "queue 1152 MiB in socket buffers raised with SO_SNDBUF (kernel memory)",
        Layer.CGROUP,
        SOCKET_HOARD,
        memory_bounded,
        args=fixed_args(2 * (_MEMORY_MB + _TMP_MB)),
    ),
)
