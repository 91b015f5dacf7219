"""The zygote's pre-forked spare under the interleavings a loaded machine produces.

Regression tests for "the worker exited with code 71 before it was ready;
its stderr was empty", seen a few times per test run under load: the spare
closed the zygote's descriptors with ``os.closerange(0, 0)``, which CPython
turns into ``close_range(0, ~0U)``: *every* descriptor, its request socket
and stderr included. On an idle machine the spare died before the next
request, the zygote's send to it failed and the worker was forked directly
(so the spare never served anyone); on a loaded one the request reached the
spare before it had run, and the spare died with it, silently.

``CAPLET_TEST_LATE_SPARE`` forces that interleaving deterministically: every
spare waits until its request is queued before it sets itself up.
"""

from __future__ import annotations

import itertools
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import caplet
from caplet._errors import WorkerGoneError, WorkerStartError
from caplet._sandbox._jail import runtime_grants
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher, SandboxStartError
from caplet._sandbox._zygote_client import _Zygote
from caplet._sandbox._zygote_spare import DIES_AT_SPARE_ENV, LATE_SPARE_ENV, LATE_SPARE_FAILS
from tests.conftest import NEEDS_CGROUP, child_pids

PLUGIN = """
def create_functions(config):
    return {"demo": {"echo": lambda value: value}}
"""

#: Two denied calls at import time, then a failure: the start fails after
#: the seccomp filter has counted something.
DENIED_THEN_BROKEN = """
import socket

for _ in range(2):
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        pass
raise RuntimeError("broken on purpose")
"""

_CAPLET_ROOT = str(Path(caplet.__file__).resolve().parents[1])


def _spec(tmp_path: Path, index: int, source: str = PLUGIN) -> WorkerSpec:
    snapshot = tmp_path / f"snapshot{index}"
    workdir = tmp_path / f"work{index}"
    snapshot.mkdir()
    workdir.mkdir()
    (snapshot / "plugin.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return WorkerSpec(
        plugin="spare",
        snapshot_dir=snapshot,
        entry="plugin.py",
        config={},
        modules={"demo": ("echo",)},
        workdir=workdir,
    )


def _in_child(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter: never close descriptors of pytest itself."""
    prelude = f"import sys\nsys.path.insert(0, {_CAPLET_ROOT!r})\n"
    return subprocess.run(
        [sys.executable, "-I", "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_close_fds_except_keeps_fd_zero_and_every_listed_descriptor() -> None:
    result = _in_child(
        """
        import os
        from caplet._syscall import close_fds_except

        def is_open(fd):
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True

        kept, dropped = os.pipe()
        close_fds_except({0, 1, 2, kept})
        state = [is_open(fd) for fd in (0, 1, 2, kept, dropped)]
        close_fds_except({1, 2})
        state.append(is_open(0))
        state.append(is_open(kept))
        print(state)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, True, True, True, False, False, False]"


def test_a_spare_that_runs_only_after_its_request_arrived_starts_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LATE_SPARE_ENV, "1")
    launcher = SandboxLauncher(strict=True)
    try:
        for index in range(3):  # the first spare, and the ones forked after each claim
            worker = launcher.start(_spec(tmp_path, index))
            try:
                assert worker.call("demo", "echo", (index,), {}, timeout_s=10) == index
            finally:
                worker.close()
    finally:
        launcher.close()


def test_a_spare_that_fails_after_its_request_arrived_says_what_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LATE_SPARE_ENV, LATE_SPARE_FAILS)
    launcher = SandboxLauncher(strict=True)
    try:
        with pytest.raises(WorkerStartError) as info:
            launcher.start(_spec(tmp_path, 0))
    finally:
        launcher.close()
    message = str(info.value)
    assert "exited with code 71 before it was ready" in message
    # The failing step and its errno, from the worker's own log (fail closed:
    # no worker ran).
    assert re.search(
        r"caplet sandbox setup failed: SandboxError: sandbox setup: a test-only fault "
        r"\(CAPLET_TEST_LATE_SPARE=fail\) failed: Input/output error \(EIO\)\s*$",
        message,
    ), message


def test_denials_counted_during_a_failed_start_travel_with_the_error(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    assert launcher.counting_problem() == ""
    with pytest.raises(SandboxStartError, match="broken on purpose") as info:
        launcher.start(_spec(tmp_path, 0, DENIED_THEN_BROKEN))
    assert dict(info.value.denials) == {"socket": 2}
    assert "the sandbox denied: socket 2 time(s)" in str(info.value)


def test_a_failed_start_without_denials_keeps_its_plain_error(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    with pytest.raises(WorkerStartError, match="broken on purpose") as info:
        launcher.start(_spec(tmp_path, 0, 'raise RuntimeError("broken on purpose")\n'))
    assert not isinstance(info.value, SandboxStartError)


@NEEDS_CGROUP
def test_pid_one_of_a_prepared_spare_is_counted_in_the_spares_pids_cgroup(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    # A spare forks pid 1 of its namespaces before any request, once the
    # zygote has placed it in its cgroup: pid 1 (and everything it forks)
    # must be counted there, not in the zygote's.
    assert "cgroup" in launcher.active_layers()
    worker = launcher.start(_spec(tmp_path, 0))
    try:
        assert worker.call("demo", "echo", ("x",), {}, timeout_s=10) == "x"
        (pid_one,) = child_pids(worker.pid)
        monitor_cgroup = Path(f"/proc/{worker.pid}/cgroup").read_text()
        assert Path(f"/proc/{pid_one}/cgroup").read_text() == monitor_cgroup
        assert re.search(r"caplet-zygote-\d+/(spare|worker)-", monitor_cgroup), monitor_cgroup
    finally:
        worker.close()


@NEEDS_CGROUP
def test_every_start_after_the_first_is_served_by_a_spare_forked_once_the_last_start_was_over(
    tmp_path: Path,
) -> None:
    # The zygote forks the next spare when the host says a start is over
    # (REFILL), not when a spare is claimed: each of these starts must still
    # find one (its monitor is in a spare's cgroup, not a directly forked
    # worker's), including after a start that failed.
    launcher = SandboxLauncher(strict=True)
    try:
        with pytest.raises(WorkerStartError, match="broken on purpose"):
            launcher.start(_spec(tmp_path, 0, 'raise RuntimeError("broken on purpose")\n'))
        for index in range(1, 4):
            worker = launcher.start(_spec(tmp_path, index))
            try:
                assert worker.call("demo", "echo", (index,), {}, timeout_s=10) == index
                cgroup = Path(f"/proc/{worker.pid}/cgroup").read_text()
                assert re.search(r"caplet-zygote-\d+/spare-", cgroup), cgroup
            finally:
                worker.close()
    finally:
        launcher.close()


@NEEDS_CGROUP
def test_a_start_whose_refill_was_lost_still_leaves_a_spare_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No REFILL ever reaches the zygote (a host that lost it): a start never
    # waits for a spare, and the pool refills anyway. A start finds the spare
    # the zygote forked on its own _REFILL_AFTER_S after the last claim, or,
    # sooner, none: it is forked directly, and the next spare right after it,
    # before the zygote reads another request. So no two starts in a row are
    # forked directly, whatever the machine's load makes of the timer (a
    # start that came after it, served by the timer's spare, may well be
    # followed by one that comes too soon for the next).
    monkeypatch.setattr(_Zygote, "refill", lambda self: None)
    launcher = SandboxLauncher(strict=True)
    served = []
    try:
        for index in range(4):
            worker = launcher.start(_spec(tmp_path, index))
            try:
                assert worker.call("demo", "echo", (index,), {}, timeout_s=10) == index
                cgroup = Path(f"/proc/{worker.pid}/cgroup").read_text()
                match = re.search(r"caplet-zygote-\d+/(spare|worker)-", cgroup)
                assert match, cgroup
                served.append(match.group(1))
            finally:
                worker.close()
    finally:
        launcher.close()
    assert served[0] == "spare", served
    assert all("spare" in pair for pair in itertools.pairwise(served)), served


#: A host that starts ``argv[2]`` workers (snapshot and work directory under
#: ``argv[1]``), closes them and its launcher, and exits; it prints the
#: zygote's pid first.
_SHORT_HOST = """
from pathlib import Path
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher

base, starts = Path(sys.argv[1]), int(sys.argv[2])
launcher = SandboxLauncher(strict=False)
launcher.layers()
print(launcher._zygote.process.pid, flush=True)
for index in range(starts):
    worker = launcher.start(
        WorkerSpec(
            plugin="spare",
            snapshot_dir=base / f"snapshot{index}",
            entry="plugin.py",
            config={},
            modules={"demo": ("echo",)},
            workdir=base / f"work{index}",
        )
    )
    worker.close()
launcher.close()
print("closed", flush=True)
"""


@pytest.mark.parametrize(
    ("dies_at_spare", "starts"),
    [(1, 0), (2, 1)],
    ids=["the-first-spare", "the-spare-forked-at-refill"],
)
def test_a_spare_whose_zygote_died_before_placing_it_does_not_outlive_the_host(
    tmp_path: Path, dies_at_spare: int, starts: int
) -> None:
    # A host that exits right after a start (its REFILL sent) gets its zygote
    # killed (PR_SET_PDEATHSIG) while the zygote may be between forking the
    # next spare and placing it in its cgroups. That spare held the zygote's
    # end of the socket it waited on for _PLACED, and had not armed its own
    # PR_SET_PDEATHSIG yet: it waited for ever, holding the host's stderr
    # open (tests/_host/test_update.py's kill -9 at 'healthy' hung on it).
    # The test's hang guard is the host's stderr reaching EOF: that happens
    # only once every process holding it, the spare included, is gone.
    for index in range(starts):
        _spec(tmp_path, index)
    prelude = f"import sys\nsys.path.insert(0, {_CAPLET_ROOT!r})\n"
    host = subprocess.Popen(
        [sys.executable, "-I", "-c", prelude + _SHORT_HOST, str(tmp_path), str(starts)],
        env={**os.environ, DIES_AT_SPARE_ENV: str(dies_at_spare)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: readline takes the first line and nothing after it
    )
    assert host.stdout is not None
    zygote = int(host.stdout.readline())
    try:
        out, err = host.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        # The spare never left the zygote's process group (it had not run setsid).
        os.killpg(zygote, signal.SIGKILL)
        host.kill()
        out, err = host.communicate()
        pytest.fail(f"a spare outlived its zygote and the host, holding its stderr: {err!r}")
    assert (host.returncode, out) == (0, b"closed\n"), err


def test_a_worker_that_exited_while_idle_refuses_the_call_saying_nothing_ran(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    worker = launcher.start(_spec(tmp_path, 0))
    try:
        assert worker.call("demo", "echo", (1,), {}, timeout_s=10) == 1
        (pid_one,) = child_pids(worker.pid)
        pidfd = os.pidfd_open(worker.pid)  # before the kill: the zygote reaps it at once
        try:
            os.kill(pid_one, signal.SIGKILL)
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            assert poller.poll(30_000), "the monitor outlived its worker"
        finally:
            os.close(pidfd)
        with pytest.raises(WorkerGoneError) as info:
            worker.call("demo", "echo", (2,), {}, timeout_s=10)
    finally:
        worker.close()
    message = str(info.value)
    assert f"the worker (pid {worker.pid}) had exited before demo.echo was sent" in message
    assert "exited with code 137" in message  # 128 + SIGKILL, from the jail monitor
    assert "nothing ran (start a new worker)" in message


def test_closing_the_launcher_leaves_no_process_not_even_a_zombie(tmp_path: Path) -> None:
    """The zygote kills and reaps its spare and any worker still running before it exits.

    Before, it exited at once and left them to PR_SET_PDEATHSIG: killed, but
    reparented as zombies to whatever subreaper (or init) is above the host,
    one per launcher closed. The child runs as a subreaper to see them.
    """
    spec = _spec(tmp_path, 0)
    result = _in_child(
        f"""
        import os
        from pathlib import Path
        from caplet._sandbox._launcher import WorkerSpec
        from caplet._sandbox._sandboxed import SandboxLauncher
        from caplet._syscall import set_child_subreaper

        set_child_subreaper()

        def descendants():
            parents = {{}}
            for name in os.listdir("/proc"):
                if name.isdigit():
                    try:
                        text = Path(f"/proc/{{name}}/stat").read_text()
                    except OSError:
                        continue
                    parents[int(name)] = int(text[text.rindex(")") + 2 :].split()[1])
            found, frontier = [], {{os.getpid()}}
            while frontier:
                frontier = {{pid for pid, parent in parents.items() if parent in frontier}}
                found += frontier
            return sorted(found)

        launcher = SandboxLauncher(strict=True)
        worker = launcher.start(
            WorkerSpec(
                plugin="spare",
                snapshot_dir=Path({str(spec.snapshot_dir)!r}),
                entry="plugin.py",
                config={{}},
                modules={{"demo": ("echo",)}},
                workdir=Path({str(spec.workdir)!r}),
            )
        )
        assert worker.call("demo", "echo", (1,), {{}}, timeout_s=10) == 1
        running = len(descendants())  # the zygote, the worker's jail, the next spare
        launcher.close()  # the worker is still running: the zygote must take it down too
        print(running, descendants())
        worker.close()
        """
    )
    assert result.returncode == 0, result.stderr
    running, left = result.stdout.split(" ", 1)
    assert int(running) >= 3
    assert left.strip() == "[]"


LISTER = """
import itertools
import os

def create_functions(config):
    return {"demo": {"echo": lambda value: sorted(os.listdir("/tmp"))}}
"""


def test_a_prepared_spares_warm_up_leaves_nothing_in_the_workers_tmp(
    tmp_path: Path, launcher: SandboxLauncher
) -> None:
    # The jail's /tmp holds the working directory and, where the runtime
    # lives under /tmp (a venv in /tmp, say) and the zygote could not move it
    # to neutral paths (_relocate), the mount points leading to it.
    runtime = {
        Path(grant.inside).parts[2]
        for grant in runtime_grants()
        if grant.inside.startswith("/tmp/") and launcher.relocation_problem()
    }
    worker = launcher.start(_spec(tmp_path, 0, LISTER))
    try:
        assert worker.call("demo", "echo", (None,), {}, timeout_s=10) == sorted({"work", *runtime})
    finally:
        worker.close()


def test_a_dead_zygote_is_released_when_the_next_one_starts() -> None:
    """Its socket and process handle were left to the garbage collector: a
    ResourceWarning in whichever later test collected them."""
    launcher = SandboxLauncher()
    try:
        first = launcher._get_zygote()
        first.process.kill()
        first.process.wait()
        second = launcher._get_zygote()
        assert second is not first
        assert second.alive
        assert first.sock.fileno() == -1, "the dead zygote's socket is closed"
    finally:
        launcher.close()
