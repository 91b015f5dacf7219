"""Counting seccomp denials end to end: real workers forked by the zygote.

Each worker's filter returns SECCOMP_RET_USER_NOTIF for what it denies; the
zygote answers every notification with EPERM, counts it, and reports the
counts after the exit status on the worker's status pipe, where
``SubprocessWorker.denials`` finds them once the worker has been reaped.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from caplet._errors import CallTimeoutError, WorkerCrashedError
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import (
    SandboxLauncher,
    isolation_report,
)
from caplet._sandbox._subprocess import SubprocessWorker

PLUGIN = """
import ctypes, errno, os, socket, threading

FLOODED = [0]


def create_functions(config):
    libc = ctypes.CDLL(None, use_errno=True)

    def inet(times):
        seen = []
        for _ in range(times):
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
                seen.append("ok")
            except OSError as exc:
                seen.append(errno.errorcode[exc.errno])
        return seen

    def ptrace():
        ctypes.set_errno(0)
        result = libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
        return [result, errno.errorcode.get(ctypes.get_errno(), "none")]

    def descriptors():
        links = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                links[fd] = os.readlink(f"/proc/self/fd/{fd}")
            except FileNotFoundError:
                pass  # listdir's own descriptor, closed by now
        return links

    def crash(times):
        inet(times)
        os._exit(3)

    def flood():
        def loop():
            while True:
                try:
                    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                except OSError:
                    FLOODED[0] += 1
        threading.Thread(target=loop, daemon=True).start()
        return True

    def flooded():
        return FLOODED[0]

    def spin():
        while True:
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except OSError:
                pass

    def echo(value):
        return value

    return {"demo": {
        "inet": inet, "ptrace": ptrace, "descriptors": descriptors, "crash": crash,
        "flood": flood, "flooded": flooded, "spin": spin, "echo": echo,
    }}
"""
FUNCTIONS = ("inet", "ptrace", "descriptors", "crash", "flood", "flooded", "spin", "echo")


class Start(Protocol):
    def __call__(self, launcher_: SandboxLauncher | None = None) -> SubprocessWorker: ...


@pytest.fixture
def start(tmp_path: Path, launcher: SandboxLauncher) -> Iterator[Start]:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    workers: list[SubprocessWorker] = []

    def _start(launcher_: SandboxLauncher | None = None) -> SubprocessWorker:
        workdir = tmp_path / f"work{len(workers)}"
        workdir.mkdir()
        spec = WorkerSpec(
            plugin="counted",
            snapshot_dir=snapshot,
            entry="plugin.py",
            config={},
            modules={"demo": FUNCTIONS},
            workdir=workdir,
        )
        worker = (launcher_ or launcher).start(spec)
        workers.append(worker)
        return worker

    yield _start
    for worker in workers:
        worker.close()


def call(worker: SubprocessWorker, function: str, *args: object, timeout_s: float = 10) -> Any:
    return worker.call("demo", function, args, {}, timeout_s=timeout_s)


def test_counting_works_here(launcher: SandboxLauncher) -> None:
    assert launcher.counting_problem() == ""


def test_denials_fail_with_eperm_and_are_counted_once_the_worker_is_reaped(start: Start) -> None:
    worker = start()
    assert call(worker, "inet", 3) == ["EPERM", "EPERM", "EPERM"]
    assert call(worker, "ptrace") == [-1, "EPERM"]
    assert dict(worker.denials) == {}, "counts are reported when the worker ends"
    worker.close()
    assert dict(worker.denials) == {"socket": 3, "ptrace": 1}


def test_a_worker_without_denials_reports_none(start: Start) -> None:
    worker = start()
    assert call(worker, "echo", "hi") == "hi"
    worker.close()
    assert dict(worker.denials) == {}


def test_the_plugin_keeps_neither_the_listener_nor_the_handover_socket(start: Start) -> None:
    worker = start()
    links = call(worker, "descriptors")
    assert not [link for link in links.values() if "seccomp" in link], links
    # stdin/stdout (/dev/null), stderr (the log) and the channel; nothing at 4.
    assert sorted(links) == ["0", "1", "2", "3"], links
    assert links["3"].startswith("socket:"), links


def test_counts_survive_a_crash(start: Start) -> None:
    worker = start()
    with pytest.raises(WorkerCrashedError, match="exited with code 3"):
        call(worker, "crash", 2)
    assert dict(worker.denials) == {"socket": 2}


def test_a_flooding_worker_does_not_stall_the_zygote_or_other_workers(start: Start) -> None:
    flooder = start()
    assert call(flooder, "flood") is True
    before = call(flooder, "flooded")
    # While its thread floods denied calls, the zygote still spawns and
    # other workers still run (and their own denials are served too).
    other = start()
    assert call(other, "inet", 2) == ["EPERM", "EPERM"]
    for value in range(20):
        assert call(other, "echo", value) == value
    during = call(flooder, "flooded")
    assert during > before, "the flood was served (answered) while the others ran"
    # A plugin spinning on a denied call in its main thread is killed at its deadline.
    with pytest.raises(CallTimeoutError, match="timed out after 300 ms"):
        call(flooder, "spin", timeout_s=0.3)
    assert not flooder.alive
    assert flooder.denials["socket"] >= during
    assert flooder.denials["socket"] > 0
    assert call(other, "echo", "still served") == "still served"
    third = start()
    assert call(third, "echo", "fresh") == "fresh"
    other.close()
    assert dict(other.denials) == {"socket": 2}


@pytest.mark.parametrize("how", ["kernel-probe-off", "launcher-off"])
def test_without_counting_denials_still_fail_with_eperm(
    how: str, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    if how == "kernel-probe-off":
        # What a kernel without user notification looks like to the zygote.
        monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "seccomp_counting")
        uncounted = SandboxLauncher(strict=True)
    else:
        uncounted = SandboxLauncher(strict=True, count_denials=False)
    try:
        assert uncounted.counting_problem() != ""
        assert "seccomp" in uncounted.isolation
        worker = start(uncounted)
        assert call(worker, "inet", 2) == ["EPERM", "EPERM"]
        assert call(worker, "ptrace") == [-1, "EPERM"]
        worker.close()
        assert dict(worker.denials) == {}
    finally:
        uncounted.close()


def test_doctor_says_whether_denials_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isolation_report().details["seccomp_counting"].startswith("yes")
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "seccomp_counting")
    report = isolation_report()
    assert report.details["seccomp_counting"].startswith("no (disabled by")
    assert report.complete, "counting is not a layer: strict isolation still runs"


_FAILED_HANDOVER = """
import errno, json, os, socket
from caplet._sandbox._zygote_child import _hand_over
from caplet._sandbox._seccomp import apply_seccomp

padding = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]  # the pair lands above fd 4
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
os.dup2(theirs.fileno(), 4)
theirs.close()
ours.close()  # the zygote is gone: nobody will take the listener
listener = apply_seccomp(allow_exec=False, notify=True)
try:
    _hand_over(listener)
    handed = "handed over"
except OSError as exc:
    handed = errno.errorcode[exc.errno]
kept = []
for fd in (listener, 4):
    try:
        os.fstat(fd)
        kept.append(fd)
    except OSError:
        pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    inet = "ok"
except OSError as exc:
    inet = errno.errorcode[exc.errno]
print(json.dumps({"handed": handed, "kept": kept, "inet": inet}))
"""


def test_a_failed_handover_raises_keeps_nothing_and_denied_calls_stay_denied() -> None:
    import json
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", _FAILED_HANDOVER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # The zygote's child exits on that error (fail closed); even if it did
    # not, with no supervisor left a denied call fails (ENOSYS,
    # seccomp_unotify(2)) instead of running.
    assert json.loads(proc.stdout) == {"handed": "EPIPE", "kept": [], "inet": "ENOSYS"}
