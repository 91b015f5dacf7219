"""Grants that mean what was approved, files without privilege, no host IPC (issue 13).

The red team's findings as cases, with their variants: a grant re-pointed
through a symbolic link, grants over caplet's own files, snapshots within
reach, host paths in mountinfo, root-owned and set-uid files, capability
xattrs, and host sockets and FIFOs inside a read grant.
"""

from __future__ import annotations

import os
import pwd
import re
import stat
import sys
from pathlib import Path

from caplet._host._host import PluginHost
from caplet._sandbox._jail_model import package_parent
from caplet._selftest._checks import enable_refused, escaped, refused
from caplet._selftest._model import (
    Arena,
    Args,
    Attempt,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
)

__all__ = ["CASES"]

#: Everything a process can learn about where its runtime lives on the host:
#: the mount tables, the mapped files (the interpreter and the extension
#: modules the zygote loaded before the jail), its executable, command line
#: and environment, and the interpreter's own idea of its paths.
VIEWS = """
import sys


def run():
    def read(path):
        try:
            with open(path, "rb") as handle:
                return handle.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"<{exc.errno}>"

    modules = list(sys.modules.values())
    files = {str(getattr(module, "__file__", None) or "") for module in modules}
    for module in modules:
        files.update(str(entry) for entry in getattr(module, "__path__", None) or ())
    interpreter = [
        *sys.path, sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix,
        sys.base_exec_prefix, getattr(sys, "_base_executable", ""), *sys.orig_argv,
    ]
    try:
        exe = os.readlink("/proc/self/exe")
    except OSError as exc:
        exe = f"<{exc.errno}>"
    return {
        "mountinfo": read("/proc/self/mountinfo"),
        "mounts": read("/proc/self/mounts"),
        "maps": read("/proc/self/maps"),
        "cmdline": read("/proc/self/cmdline").replace("\\0", " "),
        "environ": read("/proc/self/environ").replace("\\0", " "),
        "exe": exe,
        "sys": "\\n".join(interpreter),
        "modules": "\\n".join(sorted(files)),
    }
"""

HUNT = """
def run(roots):
    # Anything of another plugin's code (or a snapshot) this plugin could change.
    found = []
    for top in roots:
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                if name.startswith("caplet-run") or name == "plugin.py":
                    path = os.path.join(folder, name)
                    if path.startswith("/plugin/"):
                        continue  # its own copy, read-only
                    if os.access(path, os.W_OK) or os.access(folder, os.W_OK):
                        found.append(path)
    return {"escaped": found} if found else {"errno": "ENOENT"}
"""

OWNED = """
def run():
    path = os.path.join(CONFIG["out"], "owned.txt")
    with open(path, "w") as handle:
        handle.write("x")
    return os.stat(path).st_uid
"""

SETUID = """
import shutil, sys


def run(how):
    out = CONFIG["out"]
    if how == "chmod":
        # The red team's move: the interpreter copied into the grant, made set-uid.
        target = os.path.join(out, "python")
        shutil.copyfile(sys.executable, target)
        return attempt(os.chmod, target, 0o6755)
    if how == "open":
        return attempt(os.open, os.path.join(out, "su"), os.O_CREAT | os.O_WRONLY, 0o4755)
    if how == "mkdir":
        return attempt(os.mkdir, os.path.join(out, "sgid"), 0o2775)
    if how == "fchmod":
        fd = os.open(os.path.join(out, "f"), os.O_CREAT | os.O_WRONLY, 0o755)
        try:
            return attempt(os.fchmod, fd, 0o4755)
        finally:
            os.close(fd)
    if how == "xattr":
        path = os.path.join(out, "caps")
        open(path, "w").close()
        # A version-2 file capability granting everything (capabilities(7)).
        value = b"\\x01\\x00\\x00\\x02" + b"\\xff\\xff\\xff\\xff" * 4
        return attempt(os.setxattr, path, "security.capability", value)
    if how == "trusted":
        path = os.path.join(out, "trusted")
        open(path, "w").close()
        return attempt(os.setxattr, path, "trusted.caplet", b"x")
    if how == "chown":
        path = os.path.join(out, "given")
        open(path, "w").close()
        return attempt(os.chown, path, 0, 0)
    if how == "mknod":
        import stat as st
        return attempt(os.mknod, os.path.join(out, "mem"), st.S_IFCHR | 0o666, os.makedev(1, 1))
    raise ValueError(how)
"""

UNIX = """
import socket


def run(how, path):
    if how == "socket":
        def connect():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(path)
                return "connected"
        return attempt(connect)
    if how == "multiprocessing":
        from multiprocessing.connection import Client
        def client():
            Client(path, family="AF_UNIX").close()
            return "connected"
        return attempt(client)
    if how == "syslog":
        import logging.handlers
        def log():
            # The handler swallows a failed connect (as openlog(3) does): connect
            # again the way it does, so the kernel's answer is the evidence.
            handler = logging.handlers.SysLogHandler(address=path)
            try:
                handler._connect_unixsocket(path)
                handler.emit(logging.LogRecord("x", logging.ERROR, "x", 1, "pwned", None, None))
            finally:
                handler.close()
            return "logged"
        return attempt(log)
    if how == "dgram-pair":
        def send():
            left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            with left, right:
                return left.sendto(b"pwned", path)
        return attempt(send)
    if how == "fifo":
        def write_fifo():
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            try:
                return os.write(fd, b"pwned")
            finally:
                os.close(fd)
        return attempt(write_fifo)
    raise ValueError(how)
"""


def _ipc_args(how: str, which: str) -> Args:
    def args(arena: Arena, _plugin: str) -> tuple[object, ...]:
        path = {"stream": arena.unix_path, "dgram": arena.unix_dgram_path, "fifo": arena.fifo_path}
        return (how, str(path[which]))

    return args


def _setuid(how: str) -> Args:
    def args(_arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (how,)

    return args


#: Where a standard system's files live: the same on every host, so naming
#: them tells a plugin nothing about this one (a Debian interpreter's prefix
#: is /usr, and its standard library is /usr/lib/python3.X on every machine).
SYSTEM_PATHS = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc")


def host_runtime_paths() -> tuple[str, ...]:
    """The host paths of this process's runtime, which no jail may name (issue 13, point 7).

    The interpreter's prefixes (a pyenv under the user's home, a virtual
    environment in a checkout), the directories caplet and msgpack are
    imported from, the executable's directory and the user's home, each as
    spelled and resolved; system directories (:data:`SYSTEM_PATHS`) are not
    secrets.
    """
    candidates = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        str(Path(sys.executable).parent),
        str(Path(getattr(sys, "_base_executable", "") or sys.executable).parent),
        package_parent("caplet"),
        package_parent("msgpack"),
        pwd.getpwuid(os.geteuid()).pw_dir,
    }
    paths = set()
    for candidate in filter(None, candidates):
        for path in (os.path.abspath(candidate), os.path.realpath(candidate)):  # noqa: PTH100
            system = any(path == top or path.startswith(f"{top}/") for top in SYSTEM_PATHS)
            if path != "/" and not system:
                paths.add(path)
    return tuple(sorted(paths))


def named_host_paths(text: str, secrets: tuple[str, ...]) -> list[str]:
    """The ``secrets`` that ``text`` names as a path (``/root`` is not named by ``/rootfs``)."""
    return [
        secret
        for secret in secrets
        if re.search(re.escape(secret) + r"(?![^/\s'\",:;\])])", text) is not None
    ]


def no_host_path_in_mountinfo(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    views = attempt.value
    expect(isinstance(views, dict), attempt.describe())
    assert isinstance(views, dict)
    caplets = (str(arena.state_dir), str(arena.plugins_dir), "caplet-run")
    for secret in caplets:
        breach_unless(secret not in views["mountinfo"], f"mountinfo names {secret}")
    secrets = host_runtime_paths()
    for view, text in sorted(views.items()):
        named = named_host_paths(str(text), secrets) + [s for s in caplets if s in str(text)]
        breach_unless(not named, f"{view} names the host path {', '.join(named)}")
    mounts = str(views["mountinfo"])
    plugin = [line.split() for line in mounts.splitlines() if line.split()[4:5] == ["/plugin"]]
    expect(len(plugin) == 1 and plugin[0][3] == "/", "the snapshot is its own file system")


def nothing_in_reach(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    breach_unless(not escaped(attempt), f"another plugin's code is writable: {attempt.value}")
    expect(attempt.value == {"errno": "ENOENT"}, attempt.describe())


def never_root_owned(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    made = arena.out(attempt.plugin) / "owned.txt"
    breach_unless(made.exists(), "the plugin's file is missing")
    owner = made.stat().st_uid
    breach_unless(owner != 0 or os.geteuid() != 0, "a plugin made a root-owned file")
    expect(owner == attempt.value, attempt.describe())


def _no_privileged_files(attempt: Attempt, arena: Arena) -> bool:
    """Seen from the host: no set-uid/set-gid bit, capability xattr or device in the grant."""
    for path in Path(arena.out(attempt.plugin)).iterdir():
        info = path.lstat()
        if info.st_mode & (stat.S_ISUID | stat.S_ISGID):
            return False
        if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
            return False
        try:
            names = os.listxattr(path, follow_symlinks=False)
        except OSError:
            names = []
        if any(name.startswith(("security.", "trusted.")) for name in names):
            return False
        if info.st_uid == 0 and os.geteuid() == 0:
            return False
    return True


def _grant_case(name: str, attack: str, capability: str, *says: str) -> HostileCase:
    return HostileCase(
        name,
        Family.FILESYSTEM,
        attack,
        Layer.GRANTS,
        "def run():\n    return os.getpid()\n",
        enable_refused(*says),
        capabilities=(capability,),
    )


def _setuid_case(name: str, attack: str, how: str) -> HostileCase:
    return HostileCase(
        name,
        Family.FILESYSTEM,
        attack,
        Layer.SECCOMP,
        SETUID,
        refused("EPERM", _no_privileged_files),
        args=_setuid(how),
    )


def _ipc_case(
    name: str, attack: str, how: str, which: str, *, layer: Layer, errno: str
) -> HostileCase:
    return HostileCase(
        name,
        Family.FILESYSTEM,
        attack,
        layer,
        UNIX,
        refused(errno),
        args=_ipc_args(how, which),
        capabilities=("fs.read:{ipc}",),
    )


CASES: tuple[HostileCase, ...] = (
    _grant_case(
        "grant-through-link",
        "be granted a path another plugin re-pointed with a symbolic link to elsewhere",
        "fs.read:{links}/outside",
        "passes through a symbolic link",
    ),
    HostileCase(
        "program-through-link",
        Family.FILESYSTEM,
        "be granted proc.exec on a program reached through a link that lies in a writable "
        "grant (re-pointed later: the next worker runs anything)",
        Layer.GRANTS,
        "def run():\n    return os.getpid()\n",
        enable_refused("through the link", "writable grant"),
        capabilities=("fs.write:{grants}", "proc.exec:{links}/program"),
    ),
    _grant_case(
        "grant-in-state-dir",
        "be granted (read) caplet's own state directory",
        "fs.read:{state_dir}",
        "lies inside caplet's state directory",
    ),
    _grant_case(
        "grant-over-plugins",
        "be granted write access to the plugins directory (every plugin's code)",
        "fs.write:{plugins_dir}",
        "the plugins directory",
    ),
    _grant_case(
        "grant-over-lockfile",
        "be granted write access to the folder of caplet.lock and the state",
        "fs.write:{root}",
        "is writable and contains",
    ),
    HostileCase(
        "snapshot-hunt",
        Family.FILESYSTEM,
        "look for any plugin's snapshot or code it could rewrite in its grants and /tmp",
        Layer.GRANTS,
        HUNT,
        nothing_in_reach,
        args=lambda arena, _plugin: ([str(arena.grants_dir), "/tmp"],),  # noqa: S108
        capabilities=("fs.write:{grants}",),
    ),
    HostileCase(
        "mountinfo-host-paths",
        Family.FILESYSTEM,
        "read mountinfo, mounts, maps, /proc/self/exe, cmdline, sys.path and module files "
        "for host paths (its snapshot, caplet's state, the interpreter, the checkout, the home)",
        Layer.NAMESPACES,
        VIEWS,
        no_host_path_in_mountinfo,
    ),
    HostileCase(
        "root-owned-file",
        Family.FILESYSTEM,
        "create a file in its writable grant owned by the host's root",
        Layer.IDENTITY,
        OWNED,
        never_root_owned,
    ),
    _setuid_case("setuid-copy", "copy the interpreter into its grant and chmod it 06755", "chmod"),
    _setuid_case("setuid-open", "create a file with mode 04755 (open O_CREAT)", "open"),
    _setuid_case("setgid-mkdir", "make a directory with mode 02775", "mkdir"),
    _setuid_case("setuid-fchmod", "fchmod an open file to 04755", "fchmod"),
    _setuid_case("xattr-capability", "set a security.capability xattr (file caps)", "xattr"),
    _setuid_case("xattr-trusted", "set a trusted.* xattr", "trusted"),
    _setuid_case("chown-to-root", "chown a file in its grant to root", "chown"),
    _setuid_case("mknod-in-grant", "make a /dev/mem character device in its grant", "mknod"),
    _ipc_case(
        "unix-socket-in-read-grant",
        "connect to a host daemon's socket found in a read grant",
        "socket",
        "stream",
        layer=Layer.SECCOMP,
        errno="EPERM",
    ),
    _ipc_case(
        "mp-client-in-read-grant",
        "multiprocessing.connection.Client to a host socket in a read grant",
        "multiprocessing",
        "stream",
        layer=Layer.SECCOMP,
        errno="EPERM",
    ),
    _ipc_case(
        "syslog-in-read-grant",
        "logging.handlers.SysLogHandler to a host's /dev/log-like socket in a read grant",
        "syslog",
        "dgram",
        layer=Layer.SECCOMP,
        errno="EPERM",
    ),
    _ipc_case(
        "dgram-pair-sendto",
        "sendto a host datagram socket from a connected AF_UNIX datagram socketpair",
        "dgram-pair",
        "dgram",
        layer=Layer.SECCOMP,
        errno="EPERM",
    ),
    _ipc_case(
        "fifo-in-read-grant",
        "write into a host FIFO found in a read grant",
        "fifo",
        "fifo",
        layer=Layer.LANDLOCK,
        errno="EACCES",
    ),
)
