"""Filesystem escapes: reaching host files from inside the jail.

Every target is a file of the bench's arena standing in for something the
real host has: its state database and directory, the lock file, the live
plugin tree, a home directory with a key in it, a descriptor the host holds
open, a file in the host's ``/dev/shm``. The jail's root holds none of them,
so a read that reaches one is a breach, and ENOENT is the namespaces layer.
"""

from __future__ import annotations

from caplet._host._host import PluginHost
from caplet._selftest._checks import escaped, refused
from caplet._selftest._model import (
    Arena,
    Args,
    Attempt,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
    fixed_args,
)
from caplet._selftest._prelude import SYSCALL

__all__ = ["CASES"]

READ = """
def run(path):
    return attempt(read, path)
"""

WRITE = """
def run(path):
    return attempt(write, path)
"""

LISTDIR = """
def run(path):
    return attempt(os.listdir, path)
"""

RELATIVE = """
def run(path):
    # From the working directory, as many '..' as it takes to reach '/', then the path.
    depth = len([part for part in os.getcwd().split("/") if part])
    return attempt(read, "../" * (depth + 3) + path.lstrip("/"))
"""

WRITE_OWN_SNAPSHOT = """
def run():
    return attempt(write, __file__)
"""

CHMOD_OWN_SNAPSHOT = """
def run():
    return attempt(os.chmod, __file__, 0o755)  # no bit seccomp refuses: the mount does
"""

WHERE_AM_I = """
def run():
    return {"file": __file__, "cwd": os.getcwd()}
"""

SYMLINK = """
def run(target):
    link = os.path.join(CONFIG["out"], "link")
    os.symlink(target, link)
    return attempt(read, link)
"""

HARDLINK = """
def run(target):
    return attempt(os.link, target, os.path.join(CONFIG["out"], "hard"))
"""

UID_MAP = """
def remap():
    fd = os.open("/proc/self/uid_map", os.O_WRONLY)
    try:
        return os.write(fd, b"0 0 4294967295")
    finally:
        os.close(fd)


def run():
    return attempt(remap)
"""

MKNOD = """
import stat


def run():
    # /dev/mem's numbers: a device node would read the machine's memory. In
    # the working directory: the jail's own tmpfs (/tmp, or moved aside).
    path = os.path.join(os.getcwd(), "mem")
    return attempt(os.mknod, path, stat.S_IFCHR | 0o600, os.makedev(1, 1))
"""

BY_HANDLE = (
    SYSCALL
    + """

def run(number):
    # open_by_handle_at(AT_FDCWD, NULL, O_RDONLY): the "shocker" container escape
    # opens host files by brute-forced handles; the handle is NULL here.
    return attempt(syscall, number, -100, 0, 0)
"""
)


def _state_db(arena: Arena, _plugin: str) -> tuple[object, ...]:
    return (str(arena.state_db),)


def _through(prefix: str) -> Args:
    def args(arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (prefix.format(host_pid=arena.host_pid) + str(arena.state_db),)

    return args


def host_file_absent(attempt: Attempt, arena: Arena) -> bool:
    return not (arena.outside / f"{attempt.plugin}.txt").exists()


def live_tree_unchanged(attempt: Attempt, arena: Arena) -> bool:
    return not (arena.plugins_dir / attempt.plugin / "dropped.py").exists()


def no_hard_link(attempt: Attempt, arena: Arena) -> bool:
    return not (arena.out(attempt.plugin) / "hard").exists()


def no_host_shm(attempt: Attempt, arena: Arena) -> bool:
    return not arena.shm_file.with_name(f"{arena.token}-{attempt.plugin}").exists()


def symlink_was_made(attempt: Attempt, arena: Arena) -> bool:
    # The plugin may make links inside its grant; following one is what fails.
    link = arena.out(attempt.plugin) / "link"
    return link.is_symlink()


def snapshot_hides_host_paths(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    expect(attempt.error is None, attempt.describe())
    breach_unless(not escaped(attempt), attempt.describe())
    value = attempt.value
    expect(isinstance(value, dict), attempt.describe())
    assert isinstance(value, dict)
    shown = f"{value.get('file')} {value.get('cwd')}"
    breach_unless(str(arena.root) not in shown, f"the worker sees host paths: {shown}")
    expect(value.get("file") == "/plugin/plugin.py", f"expected /plugin/plugin.py: {shown}")


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "read-etc-passwd",
        Family.FILESYSTEM,
        "read /etc/passwd (absolute path)",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=fixed_args("/etc/passwd"),
    ),
    HostileCase(
        "read-host-secret",
        Family.FILESYSTEM,
        "read a host file outside every grant (absolute path)",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, _plugin: (str(arena.secret_file),),
    ),
    HostileCase(
        "relative-escape",
        Family.FILESYSTEM,
        "read a host file by a relative path from its working directory",
        Layer.NAMESPACES,
        RELATIVE,
        refused("ENOENT"),
        args=lambda arena, _plugin: (str(arena.secret_file),),
    ),
    HostileCase(
        "dotdot-escape",
        Family.FILESYSTEM,
        "climb out of its grant with '..'",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, plugin: (f"{arena.out(plugin)}/../../outside/secret.txt",),
    ),
    HostileCase(
        "read-ssh-key",
        Family.FILESYSTEM,
        "read a private key in the user's home directory",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, _plugin: (str(arena.home / ".ssh" / "id_ed25519"),),
    ),
    HostileCase(
        "read-state-db",
        Family.FILESYSTEM,
        "read the host's state database",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=_state_db,
    ),
    HostileCase(
        "list-state-dir",
        Family.FILESYSTEM,
        "list the host's state directory",
        Layer.NAMESPACES,
        LISTDIR,
        refused("ENOENT"),
        args=lambda arena, _plugin: (str(arena.state_dir),),
    ),
    HostileCase(
        "read-lockfile",
        Family.FILESYSTEM,
        "read the project's caplet.lock",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, _plugin: (str(arena.lockfile),),
    ),
    HostileCase(
        "write-lockfile",
        Family.FILESYSTEM,
        "overwrite the project's caplet.lock (its folder exists in the jail, search-only)",
        Layer.NAMESPACES,
        WRITE,
        refused("EACCES|EROFS"),
        args=lambda arena, _plugin: (str(arena.lockfile),),
    ),
    HostileCase(
        "read-live-tree",
        Family.FILESYSTEM,
        "read its own live source folder instead of the approved snapshot",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, plugin: (str(arena.plugins_dir / plugin / "plugin.py"),),
    ),
    HostileCase(
        "write-live-tree",
        Family.FILESYSTEM,
        "drop a module into its own live source folder (persistence past approval)",
        Layer.NAMESPACES,
        WRITE,
        refused("ENOENT", live_tree_unchanged),
        args=lambda arena, plugin: (str(arena.plugins_dir / plugin / "dropped.py"),),
    ),
    HostileCase(
        "write-own-snapshot",
        Family.FILESYSTEM,
        "overwrite its own code in the verified snapshot",
        Layer.NAMESPACES,
        WRITE_OWN_SNAPSHOT,
        refused("EROFS"),
    ),
    HostileCase(
        "chmod-own-snapshot",
        Family.FILESYSTEM,
        "chmod its own snapshot's files",
        Layer.NAMESPACES,
        CHMOD_OWN_SNAPSHOT,
        refused("EROFS"),
    ),
    HostileCase(
        "snapshot-path-hidden",
        Family.FILESYSTEM,
        "learn where the host keeps its snapshot from __file__ and the working directory",
        Layer.NAMESPACES,
        WHERE_AM_I,
        snapshot_hides_host_paths,
    ),
    HostileCase(
        "write-outside-grant",
        Family.FILESYSTEM,
        "write a file outside its fs.write grant",
        Layer.NAMESPACES,
        WRITE,
        refused("ENOENT", host_file_absent),
        args=lambda arena, plugin: (str(arena.outside / f"{plugin}.txt"),),
    ),
    HostileCase(
        "symlink-escape",
        Family.FILESYSTEM,
        "make a symlink in its grant at run time to the state db and read through it",
        Layer.NAMESPACES,
        SYMLINK,
        refused("ENOENT", symlink_was_made),
        args=_state_db,
    ),
    HostileCase(
        "hardlink-in",
        Family.FILESYSTEM,
        "hard-link the state db into its writable grant",
        Layer.NAMESPACES,
        HARDLINK,
        refused("ENOENT", no_hard_link),
        args=_state_db,
    ),
    HostileCase(
        "proc-self-root",
        Family.FILESYSTEM,
        "reach the host's files through /proc/self/root",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=_through("/proc/self/root"),
    ),
    HostileCase(
        "proc-1-root",
        Family.FILESYSTEM,
        "reach the host's files through /proc/1/root",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=_through("/proc/1/root"),
    ),
    HostileCase(
        "proc-host-root",
        Family.FILESYSTEM,
        "reach the host's files through /proc/<host pid>/root",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=_through("/proc/{host_pid}/root"),
    ),
    HostileCase(
        "proc-host-fd",
        Family.FILESYSTEM,
        "read a file the host holds open through /proc/<host pid>/fd/<n>",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, _plugin: (f"/proc/{arena.host_pid}/fd/{arena.secret_fd}",),
    ),
    HostileCase(
        "dev-shm-read",
        Family.FILESYSTEM,
        "read a file in the host's /dev/shm",
        Layer.NAMESPACES,
        READ,
        refused("ENOENT"),
        args=lambda arena, _plugin: (str(arena.shm_file),),
    ),
    HostileCase(
        "dev-shm-write",
        Family.FILESYSTEM,
        "leave a file in /dev/shm for a host process to pick up",
        Layer.NAMESPACES,
        WRITE,
        refused("ENOENT", no_host_shm),
        args=lambda arena, plugin: (str(arena.shm_file.with_name(f"{arena.token}-{plugin}")),),
    ),
    HostileCase(
        "write-proc-sys",
        Family.FILESYSTEM,
        "write a kernel setting under /proc/sys",
        Layer.NAMESPACES,
        WRITE,
        refused("EROFS"),
        args=fixed_args("/proc/sys/kernel/hostname"),
    ),
    HostileCase(
        "uid-map-rewrite",
        Family.FILESYSTEM,
        "open its user namespace's uid_map for writing (map every uid)",
        Layer.LANDLOCK,
        UID_MAP,
        refused("EACCES"),
    ),
    HostileCase(
        "mknod-mem",
        Family.FILESYSTEM,
        "create a /dev/mem device node in its own tmpfs",
        Layer.NAMESPACES,
        MKNOD,
        refused("EPERM"),
    ),
    HostileCase(
        "open-by-handle",
        Family.FILESYSTEM,
        "open_by_handle_at (the 'shocker' escape from a container's mount)",
        Layer.SECCOMP,
        BY_HANDLE,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.syscalls["open_by_handle_at"],),
    ),
)
