"""The sandboxing launcher end to end: a zygote forks workers into real kernel jails."""

from __future__ import annotations

import dataclasses
import errno
import importlib.util
import os
import py_compile
import select
import shutil
import socket
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from caplet._errors import CallTimeoutError, PluginCallError, WorkerCrashedError, WorkerStartError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._sandbox._subprocess import SubprocessWorker
from caplet._trust._hashing import tree_hash
from tests.conftest import NEEDS_CGROUP, ROOT, give_to_worker

PROBE = """
import errno, os, socket

def create_functions(config):
    def attempt(action):
        try:
            return {"ok": True, "value": action()}
        except OSError as exc:
            return {"ok": False, "errno": errno.errorcode.get(exc.errno, str(exc.errno))}

    def read(path):
        return attempt(lambda: open(path, "rb").read(64).decode("latin-1"))

    def write(path, text):
        def action():
            with open(path, "w") as handle:
                handle.write(text)
            return len(text)
        return attempt(action)

    def listdir(path):
        return attempt(lambda: sorted(os.listdir(path)))

    def connect(port):
        def action():
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return "connected"
        return attempt(action)

    def execute():
        return attempt(lambda: os.execv("/bin/true", ["true"]))

    def kill(pid):
        return attempt(lambda: os.kill(pid, 0))

    def identity():
        return {
            "file": __file__,
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "hostname": socket.gethostname(),
            "fds": sorted(os.listdir("/proc/self/fd")),
        }

    def spin():
        while True:
            pass

    def allocate(megabytes):
        return len(bytearray(megabytes * 1024 * 1024))

    return {"probe": {
        "read": read, "write": write, "listdir": listdir, "connect": connect,
        "execute": execute, "kill": kill, "identity": identity, "spin": spin,
        "allocate": allocate,
    }}
"""
FUNCTIONS = (
    "read",
    "write",
    "listdir",
    "connect",
    "execute",
    "kill",
    "identity",
    "spin",
    "allocate",
)


def _spec(
    tmp_path: Path, name: str, source: str, functions: tuple[str, ...], **limits: Any
) -> WorkerSpec:
    """A WorkerSpec for a plugin whose snapshot holds ``source`` as plugin.py."""
    snapshot = tmp_path / name
    snapshot.mkdir(exist_ok=True)
    (snapshot / "plugin.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return WorkerSpec(
        plugin=name,
        snapshot_dir=snapshot,
        entry="plugin.py",
        config={},
        modules={"probe": functions},
        workdir=tmp_path,
        **limits,
    )


class Start(Protocol):
    def __call__(self, *grants: PathGrant, memory_mb: int | None = 512) -> SubprocessWorker: ...


@pytest.fixture
def start(tmp_path: Path, launcher: SandboxLauncher) -> Iterator[Start]:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text(textwrap.dedent(PROBE), encoding="utf-8")
    workers: list[SubprocessWorker] = []

    def _start(*grants: PathGrant, memory_mb: int | None = 512) -> SubprocessWorker:
        workdir = tmp_path / f"work{len(workers)}"
        workdir.mkdir()
        spec = WorkerSpec(
            plugin="probe",
            snapshot_dir=snapshot,
            entry="plugin.py",
            config={},
            modules={"probe": FUNCTIONS},
            workdir=workdir,
            grants=grants,
            memory_mb=memory_mb,
        )
        worker = launcher.start(spec)
        workers.append(worker)
        return worker

    yield _start
    for worker in workers:
        worker.close()


def call(worker: SubprocessWorker, function: str, *args: object) -> Any:
    return worker.call("probe", function, args, {}, timeout_s=10)


def test_every_layer_is_in_force_here(launcher: SandboxLauncher) -> None:
    layers = launcher.layers()
    assert {layers[name] for name in ("namespaces", "rlimits", "landlock", "seccomp")} == {""}
    if ROOT or not layers["cgroup"]:
        assert layers["cgroup"] == ""
        assert launcher.isolation == "sandbox: namespaces, rlimits, landlock, seccomp, cgroup"
    else:  # an unprivileged user without a delegated cgroup: optional, and said why
        assert layers["cgroup"].startswith("cannot create a pids cgroup")
        assert launcher.isolation == "sandbox: namespaces, rlimits, landlock, seccomp"


def test_worker_sees_its_own_world(start: Start) -> None:
    worker = start()
    identity = call(worker, "identity")
    assert identity["pid"] == 1, "the worker is pid 1 of its own pid namespace"
    assert identity["env"] == {}
    assert identity["cwd"] == "/tmp/work"
    assert identity["hostname"] == "caplet"
    assert identity["file"] == "/plugin/plugin.py", "the snapshot's host path is not revealed"
    assert worker.pid != os.getpid()


def test_host_files_are_not_visible(start: Start, tmp_path: Path) -> None:
    secret = tmp_path / "state" / "caplet.db"
    secret.parent.mkdir()
    secret.write_text("approvals")
    worker = start()
    assert call(worker, "read", "/etc/passwd")["ok"] is False
    assert call(worker, "read", str(secret))["ok"] is False
    assert call(worker, "listdir", str(tmp_path))["ok"] is False


def test_read_only_and_writable_grants(start: Start, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("hello")
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    worker = start(PathGrant(str(data)), PathGrant(str(out), writable=True))
    assert call(worker, "read", str(data / "in.txt")) == {"ok": True, "value": "hello"}
    assert call(worker, "write", str(data / "new.txt"), "x")["ok"] is False
    assert call(worker, "read", str(data / ".." / "out" / "nothing"))["ok"] is False
    assert call(worker, "write", str(out / "result.txt"), "done") == {"ok": True, "value": 4}
    assert (out / "result.txt").read_text() == "done"
    assert call(worker, "read", str(data / ".." / "state"))["ok"] is False


def test_no_network_no_exec_no_signals_to_the_host(start: Start) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        worker = start()
        assert call(worker, "connect", port)["ok"] is False
    assert call(worker, "execute") == {"ok": False, "errno": "EPERM"}
    assert call(worker, "kill", os.getpid())["ok"] is False


def test_timeout_kills_the_whole_jail(start: Start) -> None:
    worker = start()
    with pytest.raises(CallTimeoutError, match="timed out after 300 ms"):
        worker.call("probe", "spin", (), {}, timeout_s=0.3)
    assert not worker.alive
    assert not Path(f"/proc/{worker.pid}").exists()


def test_memory_limit(start: Start) -> None:
    worker = start(memory_mb=256)
    with pytest.raises((PluginCallError, WorkerCrashedError)):
        call(worker, "allocate", 1024)


def test_strict_refuses_when_a_layer_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "landlock")
    strict = SandboxLauncher(strict=True)
    try:
        assert strict.layers()["landlock"].startswith("disabled")
        spec = _spec(tmp_path, "probe", PROBE, FUNCTIONS)
        with pytest.raises(WorkerStartError, match="isolation 'strict' needs the landlock layer"):
            strict.start(spec)
    finally:
        strict.close()
    best = SandboxLauncher(strict=False)
    try:
        assert "missing: landlock" in best.isolation
        worker = best.start(spec)
        assert call(worker, "identity")["pid"] == 1
        worker.close()
    finally:
        best.close()


FORKER = """
import os

def create_functions(config):
    def bomb(limit):
        children = []
        try:
            for _ in range(limit):
                pid = os.fork()
                if pid == 0:
                    os.read(os.open("/dev/zero", os.O_RDONLY), 1)  # stay alive, cheaply
                    os._exit(0)
                children.append(pid)
        except OSError as exc:
            return {"forked": len(children), "errno": exc.errno}
        return {"forked": len(children), "errno": 0}

    return {"probe": {"bomb": bomb}}
"""


def test_fork_bomb_is_bounded_by_the_process_limit(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    spec = _spec(tmp_path, "forker", FORKER, ("bomb",), processes=16)
    worker = launcher.start(spec)
    try:
        result: Any = worker.call("probe", "bomb", (1000,), {}, timeout_s=20)
    finally:
        worker.close()
    assert result["errno"] == 11, result  # EAGAIN from fork(2): RLIMIT_NPROC reached
    assert result["forked"] < 16


ESCAPER = """
import os, time

def create_functions(config):
    def escape():
        pid = os.fork()
        if pid == 0:
            os.setsid()  # its own session: no process-group kill reaches it
            time.sleep(600)
            os._exit(0)
        return pid

    return {"probe": {"escape": escape}}
"""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


@NEEDS_CGROUP
def test_descendants_die_with_the_worker_even_without_a_pid_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces")
    best = SandboxLauncher(strict=False)
    try:
        assert "cgroup" in best.active_layers()
        spec = _spec(tmp_path, "escaper", ESCAPER, ("escape",))
        worker = best.start(spec)
        grandchild = worker.call("probe", "escape", (), {}, timeout_s=10)
        assert isinstance(grandchild, int)
        assert _state(grandchild) in ("R", "S"), "the escaped process runs while its worker does"
        pidfd = os.pidfd_open(grandchild)
        try:
            worker.close()
            # The zygote killed the worker's cgroup before reporting its end; the
            # process it escaped into exits (it would otherwise sleep for 600 s).
            # pidfd_open(2): the pidfd turns readable once the process has exited.
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            assert poller.poll(30_000), "the escaped process outlived its worker"
        finally:
            os.close(pidfd)
    finally:
        best.close()


@pytest.fixture
def host_tmp_child() -> Iterator[Path]:
    """A directory of this test right in the host's /tmp, the worker's to write.

    Not under pytest's tmp_path: its parents are private to the user running
    the tests, and a root host's worker runs as another uid.
    """
    child = Path(tempfile.mkdtemp(prefix="caplet-test-", dir="/tmp"))
    child.chmod(0o755)
    give_to_worker(child)
    try:
        yield child
    finally:
        shutil.rmtree(child, ignore_errors=True)


def test_a_grant_of_the_hosts_tmp_is_the_hosts_tmp(start: Start, host_tmp_child: Path) -> None:
    # Issue 13, point 8: the jail's root is a tmpfs over the host's /tmp; a
    # recursive bind of /tmp used to bring that tmpfs along, so the grant
    # wrote into a copy of the plugin's own jail.
    child = host_tmp_child
    worker = start(PathGrant("/tmp", writable=True))
    written = call(worker, "write", str(child / "from-the-jail.txt"), "hello")
    assert written == {"ok": True, "value": 5}
    assert (child / "from-the-jail.txt").read_text(encoding="utf-8") == "hello"
    listing = call(worker, "listdir", "/tmp")
    assert listing["ok"] is True
    assert child.relative_to("/tmp").parts[0] in listing["value"]
    jail_only = set(listing["value"]) - set(os.listdir("/tmp"))
    assert not {"plugin", "proc", "dev"} & jail_only, "not the jail's own root"
    # The worker's own scratch space moved aside: never the host's /tmp/work.
    assert call(worker, "identity")["cwd"] == "/.caplet/work"
    assert call(worker, "write", "/.caplet/work/scratch", "x") == {"ok": True, "value": 1}


WHOLE = """
import os

def create_functions(config):
    def look():
        import fractions, xml.dom.minidom  # stdlib the worker has not imported yet
        return {
            "hostname": open("/etc/hostname").read().strip() != "",
            "lib": len(os.listdir("/lib")) > 0,
            "pid": os.getpid(),
            "proc": sorted(d for d in os.listdir("/proc") if d.isdigit()),
            "half": str(fractions.Fraction(1, 2)),
            "plugin": sorted(os.listdir("/plugin")),
        }

    def write(path):
        try:
            open(path, "w").close()
            return "written"
        except OSError as exc:
            return exc.errno

    return {"probe": {"look": look, "write": write}}
"""


def test_a_read_grant_of_the_whole_filesystem_works_on_a_merged_usr_host(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    # fs.read:/ (a trusted plugin, where the policy allows broad paths) used
    # to fail where /lib is a symbolic link to usr/lib: the runtime's own
    # spelling of /lib was mounted inside the grant, on top of that link.
    spec = dataclasses.replace(
        _spec(tmp_path, "whole", WHOLE, ("look", "write")), grants=(PathGrant("/"),)
    )
    with launcher.start(spec) as worker:
        look = worker.call("probe", "look", (), {}, timeout_s=10)
        refused = worker.call("probe", "write", ("/etc/caplet-must-not-exist",), {}, timeout_s=10)
    assert isinstance(look, dict)
    assert look["hostname"] is True
    assert look["lib"] is True
    assert look["half"] == "1/2"  # the runtime is importable through it
    assert look["pid"] == 1
    assert look["proc"][0] == "1"  # the jail's own /proc, not the host's
    assert look["plugin"] == ["plugin.py"]
    assert refused == errno.EROFS
    assert not Path("/etc/caplet-must-not-exist").exists()


def test_a_masked_directory_shows_nothing_inside_a_read_grant(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    (site / "state").mkdir(parents=True)
    (site / "state" / "caplet.db").write_text("approvals\n", encoding="utf-8")
    (site / "notes.txt").write_text("public\n", encoding="utf-8")
    spec = _spec(tmp_path, "masked", PROBE, FUNCTIONS)
    spec = dataclasses.replace(spec, grants=(PathGrant(str(site)),), masks=(str(site / "state"),))
    with launcher.start(spec) as worker:
        assert call(worker, "read", str(site / "notes.txt")) == {"ok": True, "value": "public\n"}
        assert call(worker, "read", str(site / "state" / "caplet.db"))["ok"] is False
        assert call(worker, "listdir", str(site / "state")) in (
            {"ok": True, "value": []},
            {"ok": False, "errno": "EACCES"},
        )


APPROVED = """
def create_functions(config):
    return {"probe": {"value": lambda: "approved source"}}
"""


def test_a_snapshot_the_jail_copies_is_checked_against_the_approved_hash(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    assert launcher.copies_snapshot  # a jail copies the snapshot into its own tmpfs
    spec = _spec(tmp_path, "checked", APPROVED, ("value",))
    worker = launcher.start(dataclasses.replace(spec, snapshot_hash=tree_hash(spec.snapshot_dir)))
    try:
        assert worker.call("probe", "value", (), {}, timeout_s=10) == "approved source"
    finally:
        worker.close()


def test_a_snapshot_rewritten_after_approval_never_runs(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    # The attack: the enable's snapshot (the host hands it to the jail as is)
    # rewritten between the enable and a start; the rewrite's code would
    # leave a mark in a writable grant the moment it is imported.
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    give_to_worker(outbox)
    spec = _spec(tmp_path, "rewritten", APPROVED, ("value",))
    approved = tree_hash(spec.snapshot_dir)
    (spec.snapshot_dir / "plugin.py").write_text(
        f"open({str(outbox / 'ran')!r}, 'w').close()\n" + textwrap.dedent(APPROVED),
        encoding="utf-8",
    )
    spec = dataclasses.replace(
        spec, snapshot_hash=approved, grants=(PathGrant(str(outbox), writable=True),)
    )
    with pytest.raises(WorkerStartError) as caught:
        launcher.start(spec).close()
    assert "changed after it was approved" in str(caught.value)
    assert f"approved hash {approved}" in str(caught.value)
    assert "disable and enable the plugin again" in str(caught.value)
    assert not (outbox / "ran").exists()


def test_byte_code_planted_in_a_snapshot_never_reaches_the_jail(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    # The attack: an unchecked-hash .pyc (imported without looking at its
    # source) in the snapshot's __pycache__, which the tree hash leaves out.
    spec = _spec(tmp_path, "planted", APPROVED, ("value",))
    planted = tmp_path / "planted.py"
    planted.write_text(APPROVED.replace("approved source", "planted byte code"), encoding="utf-8")
    py_compile.compile(
        str(planted),
        cfile=importlib.util.cache_from_source(str(spec.snapshot_dir / "plugin.py")),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        doraise=True,
    )
    worker = launcher.start(dataclasses.replace(spec, snapshot_hash=tree_hash(spec.snapshot_dir)))
    try:
        assert worker.call("probe", "value", (), {}, timeout_s=10) == "approved source"
    finally:
        worker.close()
