"""``proc.exec`` runs the approved program and nothing else, even from an anonymous file.

Landlock's execute right names the approved program's inode, and every path
a plugin can write to is mounted or ruled non-executable, but an anonymous
file (memfd_create(2)) lies outside every Landlock hierarchy: copying another
program (here the Python interpreter, visible as the runtime) into a memfd
and running it through ``/proc/self/fd/N`` or fexecve ran it. A worker that
may exec therefore gets only memfds sealed against execution (MFD_NOEXEC_SEAL);
a worker that may not exec keeps plain memfds. Where no memory cgroup bounds
a worker, it gets no memfd at all (tests/_sandbox/test_cgroup.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginCallError, PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._sandbox.seccompkit import call, sandboxed_host, seccomp_log, write_plugin

SOURCE = """
import subprocess

MFD_NOEXEC_SEAL = 0x0008


def smuggle():
    out = {}
    program = open(sys.executable, "rb").read()

    def through_proc():
        fd = os.memfd_create("smuggled", 0)
        os.write(fd, program)
        done = subprocess.run(
            [f"/proc/self/fd/{fd}", "-c", "print('escaped')"],
            pass_fds=(fd,), capture_output=True, text=True,
        )
        out["ran"] = done.stdout.strip()

    out["memfd via /proc/self/fd"] = attempt(through_proc)

    def fexecve():
        fd = os.memfd_create("smuggled", 0)
        os.write(fd, program)
        pid = os.fork()
        if pid == 0:
            try:
                os.execve(fd, ["python", "-c", "pass"], {})
            finally:
                os._exit(9)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            out["fexecve ran"] = True

    out["memfd fexecve"] = attempt(fexecve)

    def sealed():
        fd = os.memfd_create("sealed", MFD_NOEXEC_SEAL)
        os.write(fd, b"data")
        os.close(fd)

    out["sealed memfd"] = attempt(sealed)
    out["python"] = attempt(subprocess.run, [sys.executable, "-c", "pass"])
    out["approved"] = subprocess.run(["true"]).returncode
    return out


def plain_memfd():
    fd = os.memfd_create("buffer", 0)
    os.write(fd, b"data")
    os.lseek(fd, 0, 0)
    data = os.read(fd, 8).decode()
    os.close(fd)
    return data
"""


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    write_plugin(plugins_dir, "runner", SOURCE, ("smuggle",), capabilities=("proc.exec:true",))
    write_plugin(plugins_dir, "buffers", SOURCE, ("plain_memfd",))
    with sandboxed_host(plugins_dir, state_dir, "runner", "buffers") as plugin_host:
        yield plugin_host


def _memfds(host: PluginHost) -> bool:
    """Whether workers get memfds here: only where a memory cgroup bounds them."""
    launcher = host.launcher
    assert isinstance(launcher, SandboxLauncher)
    return not launcher.memory_cgroup_problem()


def test_no_other_program_runs_from_an_anonymous_file(host: PluginHost) -> None:
    out = call(host, "runner", "smuggle")
    assert "ran" not in out
    assert "fexecve ran" not in out
    sealed = out.pop("sealed memfd")
    if _memfds(host):
        assert sealed in ("ok", "EINVAL")  # EINVAL: a kernel before 6.3 has no sealed memfd
    else:
        assert sealed == "EPERM"
    assert out == {
        "memfd via /proc/self/fd": "EPERM",
        "memfd fexecve": "EPERM",
        "python": "EACCES",  # visible as the runtime, never executable (Landlock)
        "approved": 0,
    }
    assert host.disable("runner")
    denied = 2 if _memfds(host) else 3
    assert seccomp_log(host, "runner") == {"memfd_create": f"denied {denied} time(s)"}


def test_a_worker_that_cannot_exec_keeps_plain_memfds(host: PluginHost) -> None:
    if _memfds(host):
        assert call(host, "buffers", "plain_memfd") == "data"
        assert host.disable("buffers")
        assert seccomp_log(host, "buffers") == {}
    else:  # nothing would bound what it holds
        with pytest.raises(PluginCallError, match=r"PermissionError: \[Errno 1\]"):
            call(host, "buffers", "plain_memfd")
        assert host.disable("buffers")
        assert seccomp_log(host, "buffers") == {"memfd_create": "denied 1 time(s)"}
