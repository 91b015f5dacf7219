"""Process attacks: running programs, multiplying, and reaching other processes.

The "host" process that signal, ptrace and process_vm_writev attacks aim
at is the bench's decoy (:attr:`Arena.decoy_pid`), never the process
running the selftest: where a missing layer lets one through, the decoy
dies or is stopped and the check sees it.
"""

from __future__ import annotations

import shutil
import sys

from caplet._host._host import PluginHost
from caplet._selftest._checks import (
    escaped,
    refused,
)
from caplet._selftest._model import (
    Arena,
    Args,
    Attempt,
    Check,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
    fixed_args,
)
from caplet._selftest._prelude import SYSCALL

__all__ = ["CASES"]

EXECVE = """
def run():
    return attempt(os.execv, "/bin/sh", ["sh", "-c", "echo escaped"])
"""

LD_PRELOAD = """
def run():
    # A library of its own, preloaded into a program it starts.
    library = os.path.join(os.getcwd(), "evil.so")  # the jail's own tmpfs
    with open(library, "wb") as handle:
        handle.write(b"\\x7fELF")
    env = dict(os.environ, LD_PRELOAD=library)
    return attempt(os.execve, "/bin/true", ["true"], env)
"""

#: With ``proc.exec`` the approved program's ELF interpreter is executable
#: (the kernel opens it for execution); run as a program it maps any file it
#: can open, past Landlock's execute right, which guards execve(2) only.
LOADER = """
import subprocess
import sys

MFD_NOEXEC_SEAL = 0x0008


def loader():
    with open("/proc/self/maps") as handle:
        for word in handle.read().split():
            if os.path.basename(word).startswith(("ld-linux", "ld-musl")):
                return word
    raise OSError(errno.ENOENT, "no dynamic loader is mapped")


def through_loader(path, **kwargs):
    argv = [loader(), path, "-c", "print('escaped')"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if "escaped" in done.stdout:
        return f"the loader ran a copy of the interpreter from {path}"
    if "failed to map segment" in done.stderr:  # mmap(PROT_EXEC) on a noexec mount
        raise OSError(errno.EPERM, done.stderr.strip())
    raise OSError(errno.EIO, done.stderr.strip() or f"exit status {done.returncode}")


def program():
    with open(sys.executable, "rb") as handle:
        return handle.read()


def copied():
    # Its writable grant and its private /tmp (the working directory).
    for directory in (CONFIG["out"], os.getcwd()):
        path = os.path.join(directory, "copied-interpreter")
        with open(path, "wb") as handle:
            handle.write(program())
        try:
            return through_loader(path)
        except OSError as exc:
            if exc.errno != errno.EPERM:
                raise
    raise OSError(errno.EPERM, "every copy was refused")


def anonymous():
    fd = os.memfd_create("copied", MFD_NOEXEC_SEAL)  # sealed: no execve(2) of it
    os.write(fd, program())
    return through_loader(f"/proc/self/fd/{fd}", pass_fds=(fd,))


def logged():
    # Its stderr, which used to be the host's log file (a memfd): overwritten.
    os.ftruncate(2, 0)
    os.pwrite(2, program(), 0)
    fd = os.dup(2)
    return through_loader(f"/proc/self/fd/{fd}", pass_fds=(fd,))
"""

SUBPROCESS = """
import subprocess


def spawn():
    return subprocess.run(["/bin/sh", "-c", "id"], capture_output=True, check=False).stdout


def run():
    return attempt(spawn)
"""

PTRACE = """
import ctypes

PTRACE_ATTACH = 16


def attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return "attached"


def run(pid):
    return attempt(attach, pid)
"""

RAW_SYSCALL = (
    SYSCALL
    + """

def run(number, *args):
    return attempt(syscall, number, *args)
"""
)

UNSHARE = """
import ctypes

CLONE_NEWUSER = 0x10000000


def unshare():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    if libc.unshare(CLONE_NEWUSER) == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return "a fresh user namespace, with every capability in it"


def run():
    return attempt(unshare)
"""

KILL = """
import signal


def run(pid):
    return attempt(os.kill, pid, signal.SIGKILL)
"""

KILL_ALL = """
import signal


def run():
    # kill(-1): every process the caller may signal, except itself and init.
    return attempt(os.kill, -1, signal.SIGKILL)
"""

TIOCSTI = """
import fcntl
import termios


def push(fd):
    # Push a command into the terminal's input queue: the host shell would run it.
    return fcntl.ioctl(fd, termios.TIOCSTI, b"x")


def run():
    return attempt(push, 0)
"""

SETSID_DAEMON = """
import time


def run():
    # Double fork into a session of its own: a daemon that outlives the call.
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3600)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    return {"daemonised": True}
"""


def _decoy(arena: Arena, _plugin: str) -> tuple[object, ...]:
    return (arena.decoy_pid,)


def _elf_in_read_grant(arena: Arena, plugin: str) -> tuple[object, ...]:
    """Put a copy of the interpreter in the plugin's read grant, as another plugin's
    ``fs.write`` there (or any other user) could, and name it."""
    path = arena.unix_path.parent / f"{plugin}-interpreter"
    shutil.copyfile(sys.executable, path)
    path.chmod(0o644)  # no x bit: Landlock would refuse execve(2) anyway
    return (str(path),)


def _syscall(name: str, *args: int) -> Args:
    def build(arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (arena.syscalls[name], *args)

    return build


def _decoy_syscall(name: str, *args: int) -> Args:
    def build(arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (arena.syscalls[name], arena.decoy_pid, *args)

    return build


def decoy_alive(_attempt: Attempt, arena: Arena) -> bool:
    """The decoy host process still runs and is not stopped by a tracer."""
    try:
        with open(f"/proc/{arena.decoy_pid}/stat", encoding="ascii") as handle:
            state = handle.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X", "t", "T")


def daemon_started(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    # The bench proves after every case that the jail's pid namespace is
    # empty once the plugin is disabled: the daemon died with its pid 1.
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    breach_unless(not escaped(attempt), attempt.describe())
    expect(attempt.value == {"daemonised": True}, attempt.describe())


def _refused_sparing_decoy(errno_name: str) -> Check:
    return refused(errno_name, decoy_alive)


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "execve-sh",
        Family.PROCESSES,
        "execve /bin/sh without proc.exec",
        Layer.SECCOMP,
        EXECVE,
        refused("EPERM"),
    ),
    HostileCase(
        "subprocess-sh",
        Family.PROCESSES,
        "run /bin/sh through subprocess without proc.exec",
        Layer.SECCOMP,
        SUBPROCESS,
        refused("EPERM"),
    ),
    HostileCase(
        "ld-preload-exec",
        Family.PROCESSES,
        "write a library to its tmpfs and execve a program with LD_PRELOAD pointing at it",
        Layer.SECCOMP,
        LD_PRELOAD,
        refused("EPERM"),
    ),
    HostileCase(
        "loader-runs-copy",
        Family.PROCESSES,
        "granted proc.exec:true, run a copy of the interpreter written to its grant and "
        "its /tmp through the dynamic loader (ld.so COPY)",
        Layer.NAMESPACES,
        LOADER + "\n\ndef run():\n    return attempt(copied)\n",
        refused("EPERM"),
        capabilities=("proc.exec:true",),
    ),
    HostileCase(
        "loader-runs-from-read-grant",
        Family.PROCESSES,
        "granted proc.exec:true and a read grant, run a copy of the interpreter that "
        "someone else put in the read grant through the dynamic loader (ld.so COPY)",
        Layer.NAMESPACES,
        LOADER + "\n\ndef run(path):\n    return attempt(through_loader, path)\n",
        refused("EPERM"),
        args=_elf_in_read_grant,
        capabilities=("proc.exec:true", "fs.read:{ipc}"),
    ),
    HostileCase(
        "loader-runs-shipped",
        Family.PROCESSES,
        "granted proc.exec:true, ship a program named helper.dat in its own folder and run "
        "it through the dynamic loader (ld.so /plugin/helper.dat)",
        Layer.NAMESPACES,
        LOADER
        + "\n\ndef run():\n"
        + "    here = os.path.dirname(os.path.abspath(__file__))\n"
        + "    return attempt(through_loader, os.path.join(here, 'helper.dat'))\n",
        refused("EPERM"),
        capabilities=("proc.exec:true",),
        copies=(("helper.dat", sys.executable),),
    ),
    HostileCase(
        "loader-runs-memfd",
        Family.PROCESSES,
        "granted proc.exec:true, run a copy of the interpreter from a memfd sealed against "
        "execution through the dynamic loader (ld.so /proc/self/fd/N)",
        Layer.SECCOMP,
        LOADER + "\n\ndef run():\n    return attempt(anonymous)\n",
        refused("EPERM"),
        capabilities=("proc.exec:true",),
    ),
    # Red-team round 5: the worker's stderr was the host's memfd, a file outside
    # every noexec mount; it is now a pipe the zygote copies into that memfd.
    HostileCase(
        "loader-runs-stderr-log",
        Family.PROCESSES,
        "granted proc.exec:true, overwrite its own stderr (the host's log of the worker) "
        "with a copy of the interpreter and run it through the dynamic loader "
        "(ld.so /proc/self/fd/2)",
        Layer.CLEAN_WORKER,
        LOADER + "\n\ndef run():\n    return attempt(logged)\n",
        refused("EINVAL"),
        capabilities=("proc.exec:true",),
    ),
    HostileCase(
        "ptrace-host",
        Family.PROCESSES,
        "ptrace(PTRACE_ATTACH) a host process",
        Layer.SECCOMP,
        PTRACE,
        _refused_sparing_decoy("EPERM"),
        args=_decoy,
    ),
    # Pid 1 is the worker itself, which ptrace(2) refuses with EPERM anyway.
    HostileCase(
        "ptrace-pid-1",
        Family.PROCESSES,
        "ptrace(PTRACE_ATTACH) pid 1",
        Layer.SECCOMP,
        PTRACE,
        refused("EPERM"),
        args=fixed_args(1),
    ),
    HostileCase(
        "process-vm-writev",
        Family.PROCESSES,
        "process_vm_writev into a host process's memory",
        Layer.SECCOMP,
        RAW_SYSCALL,
        _refused_sparing_decoy("EPERM"),
        args=_decoy_syscall("process_vm_writev", 0, 0, 0, 0, 0),
    ),
    HostileCase(
        "pidfd-getfd",
        Family.PROCESSES,
        "pidfd_getfd: steal a descriptor from another process",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("pidfd_getfd", 0, 0, 0),
    ),
    HostileCase(
        "kill-host",
        Family.PROCESSES,
        "SIGKILL a host process by its pid",
        Layer.NAMESPACES,
        KILL,
        refused("ESRCH", decoy_alive),
        args=_decoy,
    ),
    HostileCase(
        "kill-everything",
        Family.PROCESSES,
        "SIGKILL every process it may signal (kill -1)",
        Layer.NAMESPACES,
        KILL_ALL,
        refused("ESRCH", decoy_alive),
    ),
    HostileCase(
        "tiocsti",
        Family.PROCESSES,
        "push keystrokes into a terminal's input with TIOCSTI",
        Layer.SECCOMP,
        TIOCSTI,
        refused("EPERM"),
    ),
    HostileCase(
        "setsid-daemon",
        Family.PROCESSES,
        "setsid and double fork a daemon that should outlive the call",
        Layer.NAMESPACES,
        SETSID_DAEMON,
        daemon_started,
    ),
    HostileCase(
        "unshare-userns",
        Family.PROCESSES,
        "unshare(CLONE_NEWUSER) to regain capabilities in a nested namespace",
        Layer.SECCOMP,
        UNSHARE,
        refused("EPERM"),
    ),
    HostileCase(
        "setns",
        Family.PROCESSES,
        "setns into another namespace",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("setns", -1, 0),
    ),
    HostileCase(
        "mount",
        Family.PROCESSES,
        "mount a file system",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("mount", 0, 0, 0, 0, 0),
    ),
    HostileCase(
        "bpf",
        Family.PROCESSES,
        "load an eBPF program",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("bpf", 5, 0, 0),
    ),
    HostileCase(
        "io-uring",
        Family.PROCESSES,
        "set up io_uring (system calls the filter never sees)",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("io_uring_setup", 1, 0),
    ),
    HostileCase(
        "keyctl",
        Family.PROCESSES,
        "read the kernel keyrings with keyctl",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("keyctl", 0, 0, 0, 0, 0),
    ),
    HostileCase(
        "userfaultfd",
        Family.PROCESSES,
        "create a userfaultfd (a kernel-exploit primitive)",
        Layer.SECCOMP,
        RAW_SYSCALL,
        refused("EPERM"),
        args=_syscall("userfaultfd", 0),
    ),
)
