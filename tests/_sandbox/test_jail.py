"""The namespace jail, observed on the real kernel from child processes.

Every jail runs in a fresh ``python -I -c`` subprocess (never in the pytest
process): the script calls ``enter_jail`` with the runtime grants plus the
test's own paths under tmp_path, runs the test's checks inside, and prints
one JSON object, which the test then asserts on.
"""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack
import pytest

import caplet
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._jail import DISABLE_LAYERS_ENV, probe_namespaces, runtime_grants

#: Exit status of the script when enter_jail raised SandboxError.
SANDBOX_ERROR_EXIT = 3

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from caplet._errors import SandboxError
    from caplet._sandbox._grants import PathGrant
    from caplet._sandbox._jail import (
        JailSpec, build_root, enter_jail, enter_namespaces, finish_jail, runtime_grants
    )

    config = json.loads(sys.argv[1])
    result = {"host_pid": os.getpid()}
    exec(config["prelude"])
    grants = runtime_grants() + tuple(PathGrant(p, w) for p, w in config["grants"])
    try:
        started = time.perf_counter()
        spec = JailSpec(grants=grants, **config["options"])
        if config["mode"] == "prepared":
            # A spare's way: the runtime's root first, the test's grants later.
            enter_namespaces()
            prepared = build_root(JailSpec(grants=runtime_grants(), workdir=spec.workdir))
            finish_jail(prepared, spec)
        else:
            enter_jail(spec)
        result["enter_ms"] = (time.perf_counter() - started) * 1000
    except SandboxError as exc:
        print(json.dumps({"error": str(exc), "pid": os.getpid(), "host_pid": result["host_pid"]}))
        sys.stdout.flush()
        os._exit(3)
    exec(config["body"])
    print(json.dumps(result), flush=True)
    """
)


def _config(
    body: str,
    grants: list[tuple[Path, bool]] | None = None,
    options: dict[str, object] | None = None,
    prelude: str = "",
    mode: str = "direct",
) -> str:
    return json.dumps(
        {
            "mode": mode,
            "body": textwrap.dedent(body),
            "prelude": textwrap.dedent(prelude),
            "grants": [(str(path), writable) for path, writable in grants or []],
            "options": options or {},
        }
    )


@pytest.fixture(params=["direct", "prepared"])
def mode(request: pytest.FixtureRequest) -> str:
    """``enter_jail`` in one go, or a spare's way: the runtime's root built first
    (``build_root``), the test's own grants added by ``finish_jail``."""
    return str(request.param)


def run_jailed(
    mode: str,
    tmp_path: Path,
    body: str,
    grants: list[tuple[Path, bool]] | None = None,
    *,
    options: dict[str, object] | None = None,
    prelude: str = "",
    expect_exit: int = 0,
) -> dict[str, Any]:
    """Run ``body`` inside a jail; it fills the dict ``result``, returned here."""
    completed = subprocess.run(
        [sys.executable, "-I", "-c", SCRIPT, _config(body, grants, options, prelude, mode)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=60,
    )
    assert completed.returncode == expect_exit, completed.stdout + completed.stderr
    lines = completed.stdout.strip().splitlines()
    assert lines, completed.stderr
    parsed: dict[str, Any] = json.loads(lines[-1])
    return parsed


# -- runtime_grants ---------------------------------------------------------------------


def _covered(path: str, grants: tuple[PathGrant, ...]) -> bool:
    return any(path == g.path or path.startswith(g.path.rstrip("/") + "/") for g in grants)


def test_runtime_grants_cover_the_interpreter_outermost_and_read_only() -> None:
    grants = runtime_grants()
    paths = [grant.path for grant in grants]
    assert len(paths) == len(set(paths))
    assert not any(grant.writable for grant in grants)
    for grant in grants:
        assert grant.path.startswith("/")
        others = tuple(g for g in grants if g is not grant)
        assert not _covered(grant.path, others), f"{grant.path} is nested in another grant"
        # a link path is kept only together with its target
        assert _covered(os.path.realpath(grant.path), grants)
    needed = [
        sys.base_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.realpath(sys.executable),
        sys.executable,
        str(Path(caplet.__file__).parent),
        str(Path(msgpack.__file__).parent),
    ]
    for path in needed:
        assert _covered(os.path.abspath(path), grants), path
        assert _covered(os.path.realpath(path), grants), path


# -- the processes --------------------------------------------------------------------------


def test_jailed_process_is_pid_one_and_proc_shows_only_the_jail(mode: str, tmp_path: Path) -> None:
    result = run_jailed(
        mode,
        tmp_path,
        """
        result["pid"] = os.getpid()
        result["ppid"] = os.getppid()
        result["proc"] = sorted(d for d in os.listdir("/proc") if d.isdigit())
        result["cwd"] = os.getcwd()
        """,
    )
    assert result["pid"] == 1
    assert result["ppid"] == 0  # the monitor is outside the pid namespace
    assert result["proc"] == ["1"]
    assert result["cwd"] == "/tmp/work"
    assert result["host_pid"] != 1


def test_monitor_exits_with_the_jailed_status(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-I", "-c", SCRIPT, _config("os._exit(7)")],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 7, completed.stderr


def test_a_signal_to_the_jailed_process_becomes_128_plus_signal(tmp_path: Path) -> None:
    with subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-c",
            SCRIPT,
            _config('print("ready", flush=True); sys.stdin.read()'),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as monitor:
        assert monitor.stdin is not None
        assert monitor.stdout is not None
        try:
            assert monitor.stdout.readline() == "ready\n"
            children = Path(f"/proc/{monitor.pid}/task/{monitor.pid}/children").read_text()
            (jailed,) = [int(pid) for pid in children.split()]
            status = Path(f"/proc/{jailed}/status").read_text()
            nspid = next(line for line in status.splitlines() if line.startswith("NSpid:"))
            assert nspid.split()[1:] == [str(jailed), "1"]
            # SIGKILL: pid 1 of a pid namespace gets other signals from an
            # ancestor namespace only if it has a handler (pid_namespaces(7)).
            os.kill(jailed, signal.SIGKILL)
            assert monitor.wait(timeout=60) == 128 + signal.SIGKILL
        finally:
            monitor.stdin.close()


@pytest.mark.parametrize(
    ("signum", "prelude"),
    [
        (signal.SIGKILL, ""),
        # an ignored SIGTERM inherited from the zygote must not make the monitor immortal
        (signal.SIGTERM, "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)"),
    ],
    ids=["SIGKILL", "ignored-SIGTERM"],
)
def test_killing_the_monitor_kills_the_jail(tmp_path: Path, signum: int, prelude: str) -> None:
    read_end, write_end = os.pipe()
    body = """
        print("ready", flush=True)
        sys.stdin.read()  # blocks: the test never writes and keeps stdin open
    """
    try:
        with subprocess.Popen(
            [sys.executable, "-I", "-c", SCRIPT, _config(body, prelude=prelude)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=(write_end,),
        ) as monitor:
            os.close(write_end)
            write_end = -1
            assert monitor.stdin is not None
            assert monitor.stdout is not None
            try:
                assert monitor.stdout.readline() == "ready\n"
                # Only the jailed process still holds the pipe's write end (the
                # monitor closed everything): end-of-file means it is dead.
                readable, _, _ = select.select([read_end], [], [], 0)
                assert readable == []
                monitor.send_signal(signum)
                assert monitor.wait(timeout=60) == -signum
                readable, _, _ = select.select([read_end], [], [], 60)
                assert readable == [read_end], "the jailed process outlived its monitor"
                assert os.read(read_end, 1) == b""
            finally:
                monitor.stdin.close()
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_the_monitor_holds_none_of_the_callers_descriptors(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    body = f"""
        os.close({write_end})  # the jail's copy; the monitor must have closed its own
        print("ready", flush=True)
        sys.stdin.read()
    """
    try:
        with subprocess.Popen(
            [sys.executable, "-I", "-c", SCRIPT, _config(body)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=(write_end,),
        ) as monitor:
            os.close(write_end)
            write_end = -1
            assert monitor.stdin is not None
            assert monitor.stdout is not None
            try:
                assert monitor.stdout.readline() == "ready\n"
                readable, _, _ = select.select([read_end], [], [], 60)
                assert readable == [read_end], "the monitor still holds the caller's pipe"
                assert os.read(read_end, 1) == b""
                assert monitor.poll() is None  # while the monitor is alive
            finally:
                monitor.stdin.close()
            assert monitor.wait(timeout=60) == 0
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


# -- the filesystem -------------------------------------------------------------------------


def test_root_holds_only_the_grants_dev_proc_and_tmp(mode: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "caplet.db").write_text("secret", encoding="utf-8")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    result = run_jailed(
        mode,
        tmp_path,
        f"""
        result["root"] = sorted(os.listdir("/"))
        result["passwd"] = os.path.exists("/etc/passwd")
        result["state"] = os.path.exists({str(state)!r})
        result["db"] = os.path.exists({str(state / "caplet.db")!r})
        try:
            os.listdir({str(tmp_path)!r})
        except OSError as exc:
            result["list_parent"] = exc.errno
        result["parent_mode"] = os.stat({str(tmp_path)!r}).st_mode & 0o777
        try:
            os.mkdir("/new")
        except OSError as exc:
            result["mkdir_root"] = exc.errno
        """,
        [(plugin, False)],
    )
    expected = {"dev", "proc", "tmp"} | {g.path.split("/")[1] for g in runtime_grants()}
    assert set(result["root"]) == expected
    assert result["passwd"] is False
    assert result["state"] is False
    assert result["db"] is False
    # the grant's ancestors exist only as traverse-only scaffolding
    assert result["list_parent"] == errno.EACCES
    assert result["parent_mode"] & 0o666 == 0  # search only (umask may clear more)
    assert result["mkdir_root"] == errno.EROFS


def test_read_only_grant_is_readable_but_not_writable(mode: str, tmp_path: Path) -> None:
    granted = tmp_path / "snapshot"
    granted.mkdir()
    (granted / "plugin.py").write_text("VALUE = 1\n", encoding="utf-8")
    result = run_jailed(
        mode,
        tmp_path,
        f"""
        root = {str(granted)!r}
        result["text"] = open(root + "/plugin.py").read()
        result["errors"] = []
        for attempt in (
            lambda: open(root + "/plugin.py", "a"),
            lambda: open(root + "/new.py", "w"),
            lambda: os.chmod(root + "/plugin.py", 0o755),
            lambda: os.unlink(root + "/plugin.py"),
        ):
            try:
                attempt()
                result["errors"].append(0)
            except OSError as exc:
                result["errors"].append(exc.errno)
        """,
        [(granted, False)],
    )
    assert result["text"] == "VALUE = 1\n"
    assert result["errors"] == [errno.EROFS] * 4
    assert (granted / "plugin.py").read_text(encoding="utf-8") == "VALUE = 1\n"
    assert sorted(p.name for p in granted.iterdir()) == ["plugin.py"]


def test_writable_grant_is_writable_and_the_host_sees_it(mode: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run_jailed(
        mode,
        tmp_path,
        f"""
        with open({str(out / "report.txt")!r}, "w") as handle:
            handle.write("from the jail")
        """,
        [(out, True)],
    )
    assert (out / "report.txt").read_text(encoding="utf-8") == "from the jail"


def test_writable_grant_nested_in_a_read_only_one(mode: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "out").mkdir(parents=True)
    result = run_jailed(
        mode,
        tmp_path,
        f"""
        open({str(tree / "out" / "ok")!r}, "w").close()
        try:
            open({str(tree / "no")!r}, "w")
        except OSError as exc:
            result["outer"] = exc.errno
        """,
        [(tree / "out", True), (tree, False)],
    )
    assert result["outer"] == errno.EROFS
    assert (tree / "out" / "ok").exists()
    assert not (tree / "no").exists()


def test_a_host_mount_below_a_read_only_grant_is_read_only_too(mode: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    # A private user+mount namespace of the script's own (never the host's)
    # puts a writable tmpfs below the grant before the jail copies it (MS_REC).
    prelude = f"""
        from caplet._syscall import CLONE_NEWNS, CLONE_NEWUSER, MS_PRIVATE, MS_REC, mount, unshare
        uid, gid = os.geteuid(), os.getegid()
        unshare(CLONE_NEWUSER | CLONE_NEWNS)
        for name, text in (("setgroups", "deny"), ("uid_map", f"{{uid}} {{uid}} 1"),
                           ("gid_map", f"{{gid}} {{gid}} 1")):
            with open(f"/proc/self/{{name}}", "w") as handle:
                handle.write(text)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        mount("tmpfs", {str(tree / "sub")!r}, "tmpfs", 0, "size=1m")
        open({str(tree / "sub" / "seen")!r}, "w").close()
    """
    result = run_jailed(
        mode,
        tmp_path,
        f"""
        result["seen"] = os.path.exists({str(tree / "sub" / "seen")!r})
        try:
            open({str(tree / "sub" / "new")!r}, "w")
        except OSError as exc:
            result["errno"] = exc.errno
        """,
        [(tree, False)],
        prelude=prelude,
    )
    assert result["seen"] is True  # the submount came along (MS_REC) ...
    assert result["errno"] == errno.EROFS  # ... and is sealed read-only


def test_dotdot_from_a_grant_does_not_reach_an_ungranted_sibling(mode: str, tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("k", encoding="utf-8")
    result = run_jailed(
        mode,
        tmp_path,
        f"""
        up = {str(granted)!r} + "/.."
        try:
            os.listdir(up)
        except OSError as exc:
            result["listing"] = exc.errno
        result["via_dotdot"] = os.path.exists(up + "/secret/key")
        result["via_proc_root"] = os.path.exists("/proc/1/root" + {str(secret / "key")!r})
        os.chdir({str(granted)!r})
        result["relative"] = os.path.exists("../secret/key")
        """,
        [(granted, False)],
    )
    assert result["listing"] == errno.EACCES
    assert result["via_dotdot"] is False
    assert result["via_proc_root"] is False
    assert result["relative"] is False


def test_tmp_is_private_and_size_limited(mode: str, tmp_path: Path) -> None:
    (tmp_path / "host-file").write_text("host", encoding="utf-8")
    made_inside = tmp_path / "made-inside"
    result = run_jailed(
        mode,
        tmp_path,
        f"""
        result["tmp"] = sorted(os.listdir("/tmp"))
        result["host_file"] = os.path.exists({str(tmp_path / "host-file")!r})
        os.makedirs({str(made_inside)!r})
        open({str(made_inside / "x")!r}, "w").close()
        info = os.statvfs("/tmp")
        result["bytes"] = info.f_blocks * info.f_frsize
        result["cwd"] = os.getcwd()
        try:
            with open("/tmp/big", "wb") as handle:
                handle.write(b"x" * (9 << 20))
        except OSError as exc:
            result["full"] = exc.errno
        """,
        options={"tmp_size_mb": 8, "workdir": "/tmp/job"},
    )
    under_tmp = {g.path.split("/")[2] for g in runtime_grants() if g.path.startswith("/tmp/")}
    assert set(result["tmp"]) == {"job"} | under_tmp
    assert result["host_file"] is False
    assert result["bytes"] == 8 << 20
    assert result["full"] == errno.ENOSPC
    assert result["cwd"] == "/tmp/job"
    assert not made_inside.exists()


def test_dev_holds_only_the_safe_devices(mode: str, tmp_path: Path) -> None:
    result = run_jailed(
        mode,
        tmp_path,
        """
        result["dev"] = sorted(os.listdir("/dev"))
        with open("/dev/null", "w") as handle:
            handle.write("discarded")
        with open("/dev/urandom", "rb") as handle:
            result["random"] = len(handle.read(16))
        with open("/dev/zero", "rb") as handle:
            result["zero"] = handle.read(4).hex()
        try:
            open("/dev/new", "w")
        except OSError as exc:
            result["create"] = exc.errno
        """,
    )
    assert result["dev"] == sorted(
        ["fd", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero"]
    )
    assert result["random"] == 16
    assert result["zero"] == "00000000"
    assert result["create"] == errno.EROFS


def test_proc_sys_is_read_only(mode: str, tmp_path: Path) -> None:
    result = run_jailed(
        mode,
        tmp_path,
        """
        try:
            with open("/proc/sys/kernel/hostname", "w") as handle:
                handle.write("changed")
        except OSError as exc:
            result["errno"] = exc.errno
        result["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
        """,
    )
    assert result["errno"] == errno.EROFS
    # Not dumpable, yet its own /proc/self still works; and nothing leaked in
    # (an fd of a host directory would lead out): stdio plus listdir's own fd.
    assert result["fds"] == [0, 1, 2, 3]


# -- namespaces and privileges --------------------------------------------------------------


def test_inotify_instances_are_bounded_per_jail(mode: str, tmp_path: Path) -> None:
    # ucounts are charged up the user-namespace tree to the namespace's
    # creator (kernel/ucount.c, inc_ucount): a red-team plugin took all 128
    # of host root's inotify instances, and inotify_init1 failed for every
    # root process on the machine (systemd, udev, the host itself) with
    # EMFILE while its worker lived. The jail's own limit must bind first.
    result = run_jailed(
        mode,
        tmp_path,
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        made = []
        while len(made) < 200:
            fd = libc.inotify_init1(0)
            if fd < 0:
                break
            made.append(fd)
        for fd in made:
            os.close(fd)
        result["instances"] = len(made)
        """,
    )
    assert result["instances"] <= 16


def test_hostname_is_the_jails(mode: str, tmp_path: Path) -> None:
    body = 'import socket; result["hostname"] = socket.gethostname()'
    assert run_jailed(mode, tmp_path, body)["hostname"] == "caplet"
    named = run_jailed(mode, tmp_path, body, options={"hostname": "worker-7"})
    assert named["hostname"] == "worker-7"


def test_no_network_but_unix_sockets_work(mode: str, tmp_path: Path) -> None:
    result = run_jailed(
        mode,
        tmp_path,
        """
        import socket
        result["interfaces"] = [name for _, name in socket.if_nameindex()]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(("127.0.0.1", 9))
            except OSError as exc:
                result["connect"] = exc.errno
        left, right = socket.socketpair(socket.AF_UNIX)
        left.sendall(b"ping")
        result["unix"] = right.recv(4).decode()
        """,
    )
    assert result["interfaces"] == ["lo"]
    assert result["connect"] == errno.ENETUNREACH
    assert result["unix"] == "ping"


def test_every_capability_is_dropped(mode: str, tmp_path: Path) -> None:
    result = run_jailed(
        mode,
        tmp_path,
        """
        fields = dict(
            line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
            if ":\\t" in line
        )
        for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
            result[key] = fields[key].strip()
        result["uid"] = os.geteuid()
        from caplet._syscall import MS_RDONLY, MS_REMOUNT, mount
        try:
            mount(None, "/tmp", None, MS_REMOUNT | MS_RDONLY)
        except OSError as exc:
            result["mount"] = exc.errno
        """,
    )
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert result[key] == "0000000000000000", key
    assert result["NoNewPrivs"] == "1"
    assert result["uid"] == os.geteuid()
    assert result["mount"] == errno.EPERM


# -- failures ----------------------------------------------------------------------------------


def test_missing_grant_raises_sandbox_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = run_jailed("direct", tmp_path, "", [(missing, False)], expect_exit=SANDBOX_ERROR_EXIT)
    assert str(missing) in str(result["error"])
    assert "does not exist" in str(result["error"])
    assert result["pid"] == result["host_pid"]  # refused before any namespace was made


def test_failure_inside_the_jail_names_step_errno_and_fix(mode: str, tmp_path: Path) -> None:
    granted = tmp_path / "ro"
    granted.mkdir()
    result = run_jailed(
        mode,
        tmp_path,
        "",
        [(granted, False)],
        options={"workdir": str(granted / "work")},
        expect_exit=SANDBOX_ERROR_EXIT,
    )
    message = str(result["error"])
    assert result["pid"] == 1  # raised in the jail, before any plugin code
    assert "working directory" in message
    assert str(granted / "work") in message
    assert "EROFS" in message
    assert "writable grant" in message
    assert not (granted / "work").exists()


def test_grant_through_a_symlink_inside_another_grant_is_refused(mode: str, tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (outer / "link").symlink_to(target)
    result = run_jailed(
        mode,
        tmp_path,
        "",
        [(outer, False), (outer / "link", False)],
        expect_exit=SANDBOX_ERROR_EXIT,
    )
    message = str(result["error"])
    assert str(outer / "link") in message
    assert "symbolic link" in message
    assert str(target) in message  # the fix: grant the resolved path


#: Wraps ``_jail.mount`` in the jailed script: when the nested grant's own
#: descriptor is bound, first swap its mount point for a symbolic link to the
#: jail's /dev, as another plugin writing the outer directory can do at
#: any moment (it has only to flip the two names in a loop until a start lands).
SWAP_AT_BIND = """
import caplet._sandbox._jail as _jail_module
_real_mount = _jail_module.mount
_swapped = []
# The other plugin's view of the share: its own writable bind (here, a
# descriptor of the host directory taken before the jail covers anything).
_share = os.open(config["share"], os.O_PATH | os.O_DIRECTORY)

def _swapping_mount(source, target, fstype, flags, data=None):
    if (
        not _swapped
        and source
        and source.startswith("/proc/self/fd/")
        and os.readlink(source) == config["swap"]
    ):
        _swapped.append(target)
        os.rename("sub", "sub.aside", src_dir_fd=_share, dst_dir_fd=_share)
        os.symlink(config["link"], "sub", dir_fd=_share)
    return _real_mount(source, target, fstype, flags, data)

_jail_module.mount = _swapping_mount
"""


def test_a_nested_grant_lands_nowhere_else_when_its_mount_point_becomes_a_link(
    mode: str, tmp_path: Path
) -> None:
    # The red team's race, made deterministic: plugin B has fs.read:/share and
    # fs.write:/share/sub; plugin A (fs.write:/share) flips share/sub with a
    # link into B's jail (here its /dev; in the attack /plugin, so that B's
    # worker imports A's code: reproduced with two plugins and a flipping
    # thread). A mount that follows the link puts B's writable
    # grant, full of A's files, over that part of B's jail.
    share = tmp_path / "share"
    sub = share / "sub"
    sub.mkdir(parents=True)
    (sub / "planted").write_text("by the other plugin", encoding="utf-8")
    jail_root = os.path.realpath("/tmp")  # where the jail builds its root
    prelude = (
        SWAP_AT_BIND.replace('config["swap"]', repr(str(sub)))
        .replace('config["share"]', repr(str(share)))
        .replace('config["link"]', repr(jail_root + "/dev"))
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            SCRIPT,
            _config(
                """
                result["dev"] = sorted(os.listdir("/dev"))
                """,
                [(share, False), (sub, True)],
                prelude=prelude,
                mode=mode,
            ),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=60,
    )
    lines = completed.stdout.strip().splitlines()
    assert lines, completed.stderr
    result = json.loads(lines[-1])
    # Refusing to start is fine; starting with the grant anywhere but at its
    # own path is not.
    if completed.returncode == 0:
        assert "planted" not in result["dev"], "the grant was mounted over the jail's /dev"
    else:
        assert completed.returncode == SANDBOX_ERROR_EXIT, completed.stderr


def test_invalid_spec_is_refused_before_unsharing(tmp_path: Path) -> None:
    result = run_jailed(
        "direct", tmp_path, "", options={"workdir": "relative/dir"}, expect_exit=SANDBOX_ERROR_EXIT
    )
    assert "workdir 'relative/dir'" in str(result["error"])
    assert result["pid"] == result["host_pid"]


# -- the probe --------------------------------------------------------------------------------


def test_probe_reports_usable_namespaces() -> None:
    assert probe_namespaces() is None


def test_probe_honours_the_test_only_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_LAYERS_ENV, "landlock, namespaces")
    reason = probe_namespaces()
    assert reason is not None
    assert DISABLE_LAYERS_ENV in reason
    monkeypatch.setenv(DISABLE_LAYERS_ENV, "landlock,seccomp")
    assert probe_namespaces() is None


# -- mount propagation ----------------------------------------------------------------------

#: Runs as the "host" inside a user and mount namespace of its own (so that it
#: may mount), forks a jail the way a spare does and reports what it saw.
PROPAGATION_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from caplet._sandbox._grants import PathGrant
    from caplet._sandbox._jail import (
        JailSpec, build_root, enter_namespaces, finish_jail, runtime_grants
    )
    from caplet._syscall import mount, umount2

    case, directory = sys.argv[1], sys.argv[2]
    to_host_r, to_host_w = os.pipe()
    to_jail_r, to_jail_w = os.pipe()
    if case == "unmount":
        # Mounted before the jail copies the host's tree.
        mount("tmpfs", directory, "tmpfs", 0, "size=64k")
    if os.fork() == 0:
        enter_namespaces()  # this process is the monitor from here; pid 1 goes on
        grants = runtime_grants()
        if case == "unmount":
            prepared = build_root(JailSpec(grants=grants))
            os.write(to_host_w, b"r")
            os.read(to_jail_r, 1)  # the host has unmounted it
            with open("/proc/self/mountinfo") as info:
                seen = os.path.basename(directory) in info.read()
            os.write(to_host_w, b"P" if seen else b"F")
        else:
            spec = JailSpec(grants=(*grants, PathGrant(directory)))
            finish_jail(build_root(JailSpec(grants=grants)), spec)
            os.write(to_host_w, b"r")
            os.read(to_jail_r, 1)  # the host has mounted over a path inside the grant
            seen = os.listdir(os.path.join(directory, "sub"))
            os.write(to_host_w, b"P" if seen else b"F")
        os._exit(0)
    assert os.read(to_host_r, 1) == b"r"
    if case == "unmount":
        umount2(directory, 0)
    else:
        sub = os.path.join(directory, "sub")
        mount("tmpfs", sub, "tmpfs", 0, "size=64k")
        with open(os.path.join(sub, "marker"), "w") as handle:
            handle.write("from the host, after the jail was made")
    os.write(to_jail_w, b"g")
    print(json.dumps({"outcome": os.read(to_host_r, 1).decode()}))
    """
)


def _propagation(case: str, directory: Path) -> str:
    """Run PROPAGATION_SCRIPT as a "host" whose mounts are shared, as systemd makes
    them (a host whose mounts are private propagates nothing to anyone)."""
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux unshare is needed (apt-get install util-linux)"
    completed = subprocess.run(
        [
            *(unshare, "--user", "--map-root-user", "--mount", "--propagation", "shared"),
            *(sys.executable, "-I", "-c", PROPAGATION_SCRIPT, case, str(directory)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    outcome: str = json.loads(completed.stdout.strip().splitlines()[-1])["outcome"]
    return outcome


def test_a_prepared_jail_does_not_keep_a_file_system_the_host_unmounts(tmp_path: Path) -> None:
    # A spare waits with its namespaces made and its root built; a file
    # system the host unmounts meanwhile must not stay mounted in its copy
    # of the host's tree (a LUKS or loop device would stay "busy").
    mounted = tmp_path / "unmounted-by-the-host"
    mounted.mkdir()
    assert _propagation("unmount", mounted) == "F", "the jail still holds the unmounted tree"


def test_a_host_mount_under_a_grant_never_appears_inside(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    (granted / "sub").mkdir(parents=True)
    assert _propagation("mount", granted) == "F", "a mount made by the host reached the jail"
