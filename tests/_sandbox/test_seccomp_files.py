"""No privileged file from a plugin (issue 13, point 1, the seccomp part): attacks in real
sandboxed workers with a write grant, through the public host API.

A plugin with ``fs.write`` on a host directory tries every route to a file
that carries privilege on the host: set-user-ID/set-group-ID bits (chmod,
fchmod, fchmodat, fchmodat2, and the mode of open, openat, creat, mkdir,
mkdirat, mknod, mknodat; openat2, whose mode BPF cannot read), device nodes
(mknod, RENAME_WHITEOUT), extended attributes (``security.capability`` file
capabilities, ``user.*``, removal), ownership (the chown family) and
identity changes (the setuid family). Every attempt must fail with EPERM
(openat2: ENOSYS, and the fallback to openat must still work), and the host
must find nothing privileged in the grant afterwards.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._sandbox._seccomp import syscall_number
from tests._sandbox.seccompkit import call, sandboxed_host, seccomp_log, write_plugin
from tests.conftest import give_to_worker

SOURCE = """
import stat

_keep = []


def cstr(text):
    buffer = ctypes.create_string_buffer(text.encode())
    _keep.append(buffer)
    return ctypes.addressof(buffer)


def setid_modes(root, nr):
    victim = os.path.join(root, "victim")
    with open(victim, "wb") as handle:
        handle.write(b"#!/bin/sh\\n")
    fd = os.open(victim, os.O_RDONLY)
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    out = {
        "chmod 4755": attempt(os.chmod, victim, 0o4755),
        "chmod 2755": attempt(os.chmod, victim, 0o2755),
        "fchmod 6755": attempt(os.fchmod, fd, 0o6755),
        "fchmodat 4755": attempt(os.chmod, "victim", 0o4755, dir_fd=dfd),
        "fchmodat high bits": raw(nr["fchmodat"], dfd, cstr("victim"), 0x10000 | 0o4755),
        "fchmodat2 4755": raw(nr["fchmodat2"], dfd, cstr("victim"), 0o4755, 0),
        "fchmodat2 nofollow": raw(nr["fchmodat2"], dfd, cstr("victim"), 0o2755, 0x100),
        "chmod 755": attempt(os.chmod, victim, 0o755),
        "chmod 1777 dir": attempt(os.chmod, root, 0o1777),  # others may write: attack31
        "chmod 666": attempt(os.chmod, victim, 0o666),
        "chmod sticky dir": attempt(os.chmod, root, 0o1770),
        "open 4755": attempt(os.open, os.path.join(root, "o1"), os.O_CREAT | os.O_WRONLY, 0o4755),
        "openat 2755": attempt(os.open, "o2", os.O_CREAT | os.O_WRONLY, 0o2755, dir_fd=dfd),
        "open tmpfile 4755": attempt(os.open, root, os.O_TMPFILE | os.O_WRONLY, 0o4755),
        "mkdir 2775": attempt(os.mkdir, os.path.join(root, "d1"), 0o2775),
        "mkdirat 4775": attempt(os.mkdir, "d2", 0o4775, dir_fd=dfd),
        "mknod reg 4755": attempt(os.mknod, os.path.join(root, "n1"), stat.S_IFREG | 0o4755),
        "mknod chr": attempt(os.mknod, os.path.join(root, "n2"), stat.S_IFCHR | 0o666, 0x103),
        "mknod blk": attempt(os.mknod, os.path.join(root, "n3"), stat.S_IFBLK | 0o666, 0x801),
        "mkfifo": attempt(os.mkfifo, os.path.join(root, "fifo")),
        "open 644": attempt(os.open, os.path.join(root, "o3"), os.O_CREAT | os.O_WRONLY, 0o644),
    }
    if nr.get("creat") is not None:  # x86_64 only
        out["creat 4755"] = raw(nr["creat"], cstr(os.path.join(root, "c1")), 0o4755)
        out["legacy open 4755"] = raw(
            nr["open"], cstr(os.path.join(root, "c2")), os.O_CREAT | os.O_WRONLY, 0o4755
        )
        out["legacy mknod chr"] = raw(nr["mknod"], cstr(os.path.join(root, "c3")), 0o20666, 0x103)
    # RENAME_WHITEOUT leaves a 0:0 character device where the source was.
    open(os.path.join(root, "w1"), "w").close()
    out["rename whiteout"] = raw(
        nr["renameat2"], dfd, cstr("w1"), dfd, cstr("w2"), 4
    )
    out["rename noreplace"] = raw(nr["renameat2"], dfd, cstr("w1"), dfd, cstr("w3"), 1)
    # openat2(dfd, "o4", {O_CREAT|O_WRONLY, 04755, 0}, 24): its mode is in memory.
    how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0)
    out["openat2 4755"] = raw(nr["openat2"], dfd, cstr("o4"), ctypes.addressof(how), 24)
    out["open after openat2"] = attempt(lambda: open(os.path.join(root, "o5"), "w").close())
    os.close(fd)
    os.close(dfd)
    return out


def xattrs(root, nr):
    victim = os.path.join(root, "x")
    open(victim, "w").close()
    fd = os.open(victim, os.O_RDONLY)
    # A v2 security.capability granting cap_setuid (the "file capability" route).
    capability = bytes.fromhex("00000002" + "80000000" + "00000000" + "00000000" + "00000000")
    out = {
        "security.capability": attempt(os.setxattr, victim, "security.capability", capability),
        "trusted": attempt(os.setxattr, victim, "trusted.x", b"1"),
        "user": attempt(os.setxattr, victim, "user.x", b"1"),
        "lsetxattr": attempt(os.setxattr, victim, "user.y", b"1", follow_symlinks=False),
        "fsetxattr": attempt(os.setxattr, fd, "user.z", b"1"),
        "removexattr": attempt(os.removexattr, victim, "user.x"),
        "fremovexattr": attempt(os.removexattr, fd, "user.x"),
        "setxattrat": raw(nr["setxattrat"], -100, cstr(victim), 0, cstr("user.w"), 0, 0),
        "listxattr": attempt(os.listxattr, victim),
    }
    os.close(fd)
    return out


def owners(root):
    victim = os.path.join(root, "owned")  # the host's file, writable by anyone
    fd = os.open(victim, os.O_RDONLY)
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    out = {
        "chown root": attempt(os.chown, victim, 0, 0),
        "chown nobody": attempt(os.chown, victim, 65534, 65534),
        "chown self": attempt(os.chown, victim, os.getuid(), os.getgid()),
        "lchown": attempt(os.lchown, victim, 0, 0),
        "fchown": attempt(os.fchown, fd, 0, 0),
        "fchownat": attempt(os.chown, "owned", 0, 0, dir_fd=dfd),
    }
    os.close(fd)
    os.close(dfd)
    return out


def preallocate(root, megabytes):
    # FALLOC_FL_KEEP_SIZE (1) allocates blocks past the end of file without
    # changing its size, which is all RLIMIT_FSIZE looks at (ext4_fallocate
    # checks inode_newsize_ok only without it). fd 2, the worker's log, was a
    # file in the host's TMPDIR (no grant needed to reach that disk); it is a
    # memfd now, whose memory shmem_fallocate would allocate just the same.
    length = ctypes.c_long(megabytes << 20)
    out = {}
    big = os.open(os.path.join(root, "big"), os.O_CREAT | os.O_RDWR)
    for name, fd in (("log", 2), ("grant", big)):
        ctypes.set_errno(0)
        result = libc.fallocate(fd, 1, ctypes.c_long(0), length)
        out[name] = {
            "result": "ok" if result == 0 else errno.errorcode.get(ctypes.get_errno(), "?"),
            "allocated_mb": os.fstat(fd).st_blocks * 512 >> 20,
        }
        if fd != 2:
            os.close(fd)
    # Mode 0 (posix_fallocate, SQLite's size hint) grows the file: RLIMIT_FSIZE applies.
    plain = os.open(os.path.join(root, "plain"), os.O_CREAT | os.O_RDWR)
    out["posix_fallocate 1 MiB"] = attempt(os.posix_fallocate, plain, 0, 1 << 20)
    os.close(plain)
    return out


def identity(nr):
    uid, gid = os.getuid(), os.getgid()
    return {
        "setuid": attempt(os.setuid, uid),
        "setgid": attempt(os.setgid, gid),
        "setreuid": attempt(os.setreuid, -1, -1),
        "setregid": attempt(os.setregid, -1, -1),
        "setresuid": attempt(os.setresuid, -1, -1, -1),
        "setresgid": attempt(os.setresgid, -1, -1, -1),
        "setgroups": attempt(os.setgroups, []),
        "setfsuid": raw(nr["setfsuid"], -1),
        "setfsgid": raw(nr["setfsgid"], -1),
    }


_held = []


def leases(root):
    # A lease (fcntl F_SETLEASE) makes every other process's open(2) of the
    # file wait for the holder, up to /proc/sys/fs/lease-break-time (45 s):
    # the host's, another plugin's worker's, root's. The fds stay open.
    import fcntl
    F_SETLEASE, F_GETLEASE, F_SETPIPE_SZ = 1024, 1025, 1031
    out = {}
    kinds = (("write", fcntl.F_WRLCK, os.O_RDWR), ("read", fcntl.F_RDLCK, os.O_RDONLY))
    for kind, lock, flags in kinds:
        path = os.path.join(root, kind)
        with open(path, "w") as handle:
            handle.write("x")
        fd = os.open(path, flags)
        _held.append(fd)
        out[f"{kind} lease"] = attempt(fcntl.fcntl, fd, F_SETLEASE, lock)
        out[f"{kind} lease high bits"] = raw(72, fd, 0x1_0000_0000 | F_SETLEASE, lock)
        out[f"{kind} lease held"] = fcntl.fcntl(fd, F_GETLEASE) != fcntl.F_UNLCK
    # The near miss: every other fcntl a library makes (SQLite's POSIX locks,
    # flags, pipe sizes) and flock still work.
    locked = os.open(os.path.join(root, "locked"), os.O_CREAT | os.O_RDWR)
    out["posix lock"] = attempt(fcntl.lockf, locked, fcntl.LOCK_EX | fcntl.LOCK_NB)
    shared = os.open(os.path.join(root, "shared"), os.O_CREAT | os.O_RDWR)
    out["ofd lock"] = attempt(fcntl.fcntl, shared, fcntl.F_OFD_SETLK, bytes(32))
    out["flock"] = attempt(fcntl.flock, locked, fcntl.LOCK_EX | fcntl.LOCK_NB)
    out["flags"] = attempt(fcntl.fcntl, locked, fcntl.F_SETFL, os.O_NONBLOCK)
    out["cloexec"] = attempt(fcntl.fcntl, locked, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
    out["dupfd"] = attempt(fcntl.fcntl, locked, fcntl.F_DUPFD_CLOEXEC, 100)
    read_end, write_end = os.pipe()
    out["pipe size"] = attempt(fcntl.fcntl, write_end, F_SETPIPE_SZ, 65536)
    return out
"""
FUNCTIONS = ("setid_modes", "xattrs", "owners", "identity", "preallocate", "leases")
_NAMES = (
    "fchmodat",
    "fchmodat2",
    "creat",
    "open",
    "mknod",
    "renameat2",
    "openat2",
    "setxattrat",
    "setfsuid",
    "setfsgid",
)


@pytest.fixture
def grant(tmp_path: Path) -> Path:
    path = tmp_path / "grant"
    path.mkdir()
    give_to_worker(path)  # the worker's own, as an administrator makes a writable grant
    return path


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, grant: Path) -> Iterator[PluginHost]:
    write_plugin(plugins_dir, "attacker", SOURCE, FUNCTIONS, capabilities=(f"fs.write:{grant}",))
    with sandboxed_host(plugins_dir, state_dir, "attacker") as plugin_host:
        yield plugin_host


def _numbers() -> dict[str, int | None]:
    return {name: syscall_number(name) for name in _NAMES}


def _privileged(grant: Path) -> list[str]:
    """Everything in the grant that would carry privilege on the host."""
    found = []
    for path in sorted(grant.rglob("*")):
        mode = path.lstat().st_mode
        if mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"{path.name}: set-id bits {oct(mode)}")
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            found.append(f"{path.name}: device node {oct(mode)}")
        if not path.is_symlink():
            try:
                names = os.listxattr(path)
            except OSError as exc:
                if exc.errno != errno.ENOTSUP:
                    raise
                names = []
            found += [f"{path.name}: xattr {name}" for name in names]
    return found


def test_no_set_id_bit_and_no_device_node(host: PluginHost, grant: Path) -> None:
    out = call(host, "attacker", "setid_modes", str(grant), _numbers())
    refused = {key: value for key, value in out.items() if value != "ok"}
    expected = {
        key: "EPERM"
        for key in out
        if key
        not in (
            "chmod 755",
            "chmod sticky dir",
            "mkfifo",
            "open 644",
            "rename noreplace",
            "openat2 4755",
            "open after openat2",
        )
    }
    expected["openat2 4755"] = "ENOSYS"  # so that callers fall back to openat
    assert refused == expected
    assert _privileged(grant) == []
    # What a plugin may still do: ordinary modes, FIFOs, renames, the openat2 fallback.
    assert stat.S_IMODE((grant / "victim").stat().st_mode) == 0o755
    assert stat.S_ISFIFO((grant / "fifo").lstat().st_mode)
    assert (grant / "w3").exists()
    assert (grant / "o5").exists()
    assert not (grant / "o4").exists()
    assert host.disable("attacker")
    logged = seccomp_log(host, "attacker")
    assert {"fchmod", "fchmodat", "fchmodat2", "mkdirat", "renameat2"} <= set(logged), logged
    assert "openat2" not in logged  # ENOSYS straight from the filter: a fallback, not a denial


def test_no_extended_attribute_is_written(host: PluginHost, grant: Path) -> None:
    out = call(host, "attacker", "xattrs", str(grant), _numbers())
    assert out == {
        "security.capability": "EPERM",
        "trusted": "EPERM",
        "user": "EPERM",
        "lsetxattr": "EPERM",
        "fsetxattr": "EPERM",
        "removexattr": "EPERM",
        "fremovexattr": "EPERM",
        "setxattrat": "EPERM",
        "listxattr": "ok",  # reading is harmless (ls -l, shutil.copystat)
    }
    assert _privileged(grant) == []
    assert host.disable("attacker")
    logged = seccomp_log(host, "attacker")
    expected = {"setxattr", "lsetxattr", "fsetxattr", "removexattr", "fremovexattr", "setxattrat"}
    assert expected <= set(logged), logged


def test_no_change_of_owner(host: PluginHost, grant: Path) -> None:
    owned = grant / "owned"
    owned.write_text("the host's\n", encoding="utf-8")
    owned.chmod(0o666)
    out = call(host, "attacker", "owners", str(grant))
    assert out == dict.fromkeys(out, "EPERM")
    assert len(out) == 6
    assert (owned.lstat().st_uid, owned.lstat().st_gid) == (os.getuid(), os.getgid())
    assert host.disable("attacker")
    # Refused without counting: SQLite and tarfile running as root chown routinely.
    assert not {"chown", "fchown", "lchown", "fchownat"} & set(seccomp_log(host, "attacker"))


def test_no_change_of_identity(host: PluginHost) -> None:
    out = call(host, "attacker", "identity", _numbers())
    assert out == dict.fromkeys(out, "EPERM")
    assert len(out) == 9
    assert host.disable("attacker")
    logged = seccomp_log(host, "attacker")
    assert {"setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid"} <= set(logged), logged


def test_preallocation_cannot_exceed_the_file_size_limit(host: PluginHost, grant: Path) -> None:
    # RLIMIT_FSIZE is 64 MiB; ask for 256 MiB past the end of the log and of a
    # file in the grant. Measured by the red team with 1 GiB: df of the host's
    # /tmp grew by 1 GiB while the worker lived (72 GiB free: one call more).
    out = call(host, "attacker", "preallocate", str(grant), 256)
    for where in ("log", "grant"):
        assert out[where]["allocated_mb"] <= 64, (where, out[where])
        assert out[where]["result"] == "EPERM"
    assert out["posix_fallocate 1 MiB"] == "ok"


def test_no_lease_makes_another_process_wait_for_a_file(host: PluginHost, grant: Path) -> None:
    # attack13: on main both leases were taken and held, so the host's own
    # open(2) of a file in the grant would have waited 45 s (lease-break-time)
    # for the plugin, and so would another plugin's worker or any root process
    # opening it; O_NONBLOCK shows the wait without waiting.
    out = call(host, "attacker", "leases", str(grant))
    for kind in ("write", "read"):
        assert out[f"{kind} lease"] == "EPERM", out
        assert out[f"{kind} lease high bits"] == "EPERM", out
        assert out[f"{kind} lease held"] is False, out
    for name, flags in (("write", os.O_RDONLY), ("read", os.O_WRONLY)):
        fd = os.open(grant / name, flags | os.O_NONBLOCK)  # no EWOULDBLOCK: no lease
        os.close(fd)
    near_misses = ("posix lock", "ofd lock", "flock", "flags", "cloexec", "dupfd", "pipe size")
    assert {name: out[name] for name in near_misses} == dict.fromkeys(near_misses, "ok")
