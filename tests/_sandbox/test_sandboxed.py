"""The sandboxing launcher end to end: a zygote forks workers into real kernel jails."""

from __future__ import annotations

import os
import select
import socket
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
from tests.conftest import give_to_worker

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
    assert set(launcher.layers().values()) == {""}
    assert launcher.isolation == "sandbox: namespaces, rlimits, landlock, seccomp, cgroup"


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
