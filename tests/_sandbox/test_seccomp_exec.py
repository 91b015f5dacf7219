"""``proc.exec`` runs the approved program and nothing else, even from an anonymous file.

Landlock's execute right names the approved program's inode, and every path
a plugin can write to is mounted or ruled non-executable, but an anonymous
file (memfd_create(2)) lies outside every Landlock hierarchy: copying another
program (here the Python interpreter, visible as the runtime) into a memfd
and running it through ``/proc/self/fd/N`` or fexecve ran it. Sealing the
memfd against execution (MFD_NOEXEC_SEAL) was not enough: the approved
program's ELF interpreter, run as a program, maps any file it can open
(mmap(2) knows no seal, and only a noexec mount stops it). A worker that may
exec therefore gets no memfd, and since memfd29 neither does a worker that may
not exec (a memfd is the one file it could write and map executable:
tests/_sandbox/test_memfd29.py).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginCallError, PluginHost, WorkerCrashedError
from caplet._sandbox._programs import program_grants
from tests._sandbox.seccompkit import call, sandboxed_host, seccomp_log, write_plugin

SOURCE = """
import stat
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


def through_loader(loader, grant):
    # The approved program's ELF interpreter is executable (the kernel opens
    # it for execution), and run as a program it maps any ELF file it can
    # read: a copy the plugin wrote, wherever it wrote it.
    program = open(sys.executable, "rb").read()
    ran = {}

    def run(path, **kwargs):
        done = subprocess.run(
            [loader, path, "-c", "print('escaped')"], capture_output=True, text=True, **kwargs
        )
        if "escaped" in done.stdout:
            ran[path] = True

    def copy_to(directory):
        path = os.path.join(directory, "copied")
        with open(path, "wb") as handle:
            handle.write(program)
        run(path)

    def sealed():
        fd = os.memfd_create("sealed", MFD_NOEXEC_SEAL)
        os.write(fd, program)
        run(f"/proc/self/fd/{fd}", pass_fds=(fd,))

    return {
        "private tmp": attempt(copy_to, os.getcwd()),
        "writable grant": attempt(copy_to, grant),
        "sealed memfd": attempt(sealed),
        "ran": sorted(ran),
    }


def through_stderr(loader):
    # The worker's stderr used to be the host's memfd (its log): a file the
    # plugin could overwrite with a program and hand to the loader.
    program = open(sys.executable, "rb").read()

    def overwrite():
        os.ftruncate(2, 0)
        os.pwrite(2, program, 0)

    overwritten = attempt(overwrite)
    ran = False
    if overwritten == "ok":
        # (A pipe is not even tried: the loader would wait on it for data.)
        fd = os.dup(2)
        done = subprocess.run(
            [loader, f"/proc/self/fd/{fd}", "-c", "print('escaped')"],
            capture_output=True, text=True, pass_fds=(fd,),
        )
        ran = "escaped" in done.stdout
    return {"overwrite": overwritten, "ran": ran, "pipe": stat.S_ISFIFO(os.fstat(2).st_mode)}


def crash(words):
    os.write(2, words.encode())
    os._exit(3)


def plain_memfd():
    fd = os.memfd_create("buffer", 0)
    os.write(fd, b"data")
    os.lseek(fd, 0, 0)
    data = os.read(fd, 8).decode()
    os.close(fd)
    return data
"""


LOADER = """
import subprocess


def through_loader_read(loader, path):
    done = subprocess.run([loader, path, "-c", "print('escaped')"], capture_output=True, text=True)
    return done.stdout.strip()


def noexec(paths):
    return {path: bool(os.statvfs(path).f_flag & os.ST_NOEXEC) for path in paths}


def run(program, *args):
    return subprocess.run([program, *args], capture_output=True, text=True).stdout.strip()
"""


@pytest.fixture
def grant(tmp_path: Path) -> Path:
    """A directory every worker uid may write (root's workers run as another uid)."""
    path = tmp_path / "data"
    path.mkdir()
    path.chmod(0o777)
    return path


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, grant: Path) -> Iterator[PluginHost]:
    write_plugin(
        plugins_dir,
        "runner",
        SOURCE,
        ("smuggle", "through_loader", "through_stderr", "crash"),
        capabilities=("proc.exec:true", f"fs.write:{grant}"),
    )
    write_plugin(plugins_dir, "buffers", SOURCE, ("plain_memfd",))
    with sandboxed_host(plugins_dir, state_dir, "runner", "buffers") as plugin_host:
        yield plugin_host


def test_no_other_program_runs_from_an_anonymous_file(host: PluginHost) -> None:
    out = call(host, "runner", "smuggle")
    assert "ran" not in out
    assert "fexecve ran" not in out
    assert out == {
        "sealed memfd": "EPERM",  # no memfd at all: the loader would map one (below)
        "memfd via /proc/self/fd": "EPERM",
        "memfd fexecve": "EPERM",
        "python": "EACCES",  # visible as the runtime, never executable (Landlock)
        "approved": 0,
    }
    assert host.disable("runner")
    assert seccomp_log(host, "runner") == {"memfd_create": "denied 3 time(s)"}


def test_the_approved_programs_loader_runs_no_program_the_plugin_wrote(
    host: PluginHost, grant: Path
) -> None:
    """Red team: ``ld.so COPY`` ran a copied interpreter from the private /tmp, a
    writable grant and a sealed memfd (Landlock's execute right guards execve(2),
    not the loader's mmap(2)). Writable mounts are ``noexec`` and a worker that
    may exec gets no memfd."""
    true = shutil.which("true")
    assert true is not None
    loader = program_grants(true)[-1].path  # the ELF interpreter, resolved
    out = call(host, "runner", "through_loader", loader, str(grant))
    assert out == {
        "private tmp": "ok",  # written, then refused by the loader (the mount is noexec)
        "writable grant": "ok",
        "sealed memfd": "EPERM",
        "ran": [],
    }
    assert host.disable("runner")
    assert seccomp_log(host, "runner") == {"memfd_create": "denied 1 time(s)"}


def test_the_loader_runs_no_program_written_into_the_workers_stderr(host: PluginHost) -> None:
    """Red team round 5: a worker's stderr was the host's memfd (its log), a file
    outside every mount's ``noexec``: the plugin overwrote it with the interpreter
    and ran that through the approved program's loader (``ld.so /proc/self/fd/N``).
    Its stderr is now a pipe the zygote copies into the log."""
    true = shutil.which("true")
    assert true is not None
    loader = program_grants(true)[-1].path
    out = call(host, "runner", "through_stderr", str(loader))
    assert out == {"overwrite": "EINVAL", "ran": False, "pipe": True}  # ftruncate(2) of a pipe


def test_a_crashed_workers_last_words_reach_the_hosts_error(host: PluginHost) -> None:
    """What the worker wrote to stderr just before it died is in the error: the
    zygote copies the rest of the pipe into the log before it reports the exit."""
    words = "last words " + "x" * 200_000 + " the end"  # more than a pipe holds
    with pytest.raises(WorkerCrashedError, match="the end") as caught:
        call(host, "runner", "crash", words)
    assert "exited with code 3" in str(caught.value)


@pytest.mark.security
def test_the_loader_runs_no_program_from_a_read_grant(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    """Red team (open until round 4): ``ld.so /shared/copied`` ran an ELF file that
    another plugin's ``fs.write`` (or anyone) put in this plugin's read grant.
    A plugin's read grant that holds no runtime or program is mounted noexec."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copy(sys.executable, shared / "copied")
    (shared / "copied").chmod(0o644)  # no x bit: Landlock would refuse execve anyway
    shared.chmod(0o755)
    write_plugin(
        plugins_dir,
        "reader",
        LOADER,
        ("through_loader_read", "noexec"),
        capabilities=("proc.exec:true", f"fs.read:{shared}"),
    )
    with sandboxed_host(plugins_dir, state_dir, "reader") as host:
        true = shutil.which("true")
        assert true is not None
        loader = program_grants(true)[-1].path
        assert call(host, "reader", "through_loader_read", loader, str(shared / "copied")) == ""
        # The runtime's libraries and the approved program's directory still map.
        lib = str(Path(loader).parent)
        assert call(host, "reader", "noexec", [str(shared), lib]) == {str(shared): True, lib: False}


@pytest.mark.security
def test_a_read_grant_holding_the_approved_program_keeps_it_running(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    """noexec is for data: a read grant that holds an approved program is noexec
    but the program itself is bound again with exec mappings, or it could not start;
    any other ELF file beside it is still refused to the loader."""
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    echo = shutil.which("echo")
    assert echo is not None
    script = tools / "bin" / "hello"
    shutil.copy(echo, script)
    script.chmod(0o755)
    shutil.copy(echo, tools / "copied")
    (tools / "copied").chmod(0o644)
    data = tmp_path / "data"
    data.mkdir()
    for path in (tmp_path, tools, tools / "bin", data):
        path.chmod(0o755)
    write_plugin(
        plugins_dir,
        "tooled",
        LOADER,
        ("run", "noexec", "through_loader_read"),
        capabilities=(f"proc.exec:{script}", f"fs.read:{tools}", f"fs.read:{data}"),
    )
    with sandboxed_host(plugins_dir, state_dir, "tooled") as host:
        assert call(host, "tooled", "run", str(script), "hello") == "hello"
        assert call(host, "tooled", "noexec", [str(tools), str(script), str(data)]) == {
            str(tools): True,
            str(script): False,
            str(data): True,
        }
        true = shutil.which("true")
        assert true is not None
        loader = program_grants(true)[-1].path
        assert call(host, "tooled", "through_loader_read", loader, str(tools / "copied")) == ""


@pytest.mark.security
def test_an_approved_script_runs_through_its_interpreter_and_that_ones_loader(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    """A ``#!/bin/sh`` script approved as the program: the kernel opens ``/bin/sh``
    and then the shell's own ELF interpreter for execution, and Landlock checks
    both opens; the script failed with EACCES when only the first was granted.
    The shell may run, nothing else: ``id`` from the script is refused."""
    tools = tmp_path / "tools"
    tools.mkdir()
    script = tools / "hello"
    script.write_text("#!/bin/sh\necho hello from sh\nid -u 2>/dev/null || echo id refused\n")
    script.chmod(0o755)
    for path in (tmp_path, tools):
        path.chmod(0o755)
    write_plugin(plugins_dir, "scripted", LOADER, ("run",), capabilities=(f"proc.exec:{script}",))
    with sandboxed_host(plugins_dir, state_dir, "scripted") as host:
        assert call(host, "scripted", "run", str(script)) == "hello from sh\nid refused"


@pytest.mark.security
def test_a_read_grant_of_usr_maps_only_the_runtime_and_the_program(
    plugins_dir: Path, state_dir: Path
) -> None:
    """``fs.read:/usr`` holds the runtime's libraries and the approved program, and
    may hold another plugin's writable grant (``/usr/local/share/x``): the grant is
    noexec, the library directories and the program are exec again."""
    true = shutil.which("true")
    assert true is not None
    real_true = os.path.realpath(true)
    if not real_true.startswith("/usr/"):
        pytest.skip(f"`true` is {real_true}, not under /usr")
    write_plugin(
        plugins_dir,
        "usr-reader",
        LOADER,
        ("run", "noexec"),
        capabilities=("proc.exec:true", "fs.read:/usr"),
    )
    with sandboxed_host(plugins_dir, state_dir, "usr-reader") as host:
        runtime_prefix = call(host, "usr-reader", "noexec", ["/usr"])["/usr"]
        flags = call(host, "usr-reader", "noexec", ["/usr/share", "/usr/lib", real_true])
        if runtime_prefix:  # a runtime elsewhere (/caplet, pyenv): /usr is data but for these
            assert flags == {"/usr/share": True, "/usr/lib": False, real_true: False}
        else:  # the runtime's own prefix is /usr (a distribution's Python): all of it maps
            assert flags == {"/usr/share": False, "/usr/lib": False, real_true: False}
        assert call(host, "usr-reader", "run", "true") == ""


def test_a_worker_that_cannot_exec_gets_no_memfd_either(host: PluginHost) -> None:
    # memfd29: it kept plain memfds where a memory cgroup bounded them (as root),
    # and wrote a library or machine code into one to map it executable (an
    # anonymous file is on no noexec mount; tests/_sandbox/test_memfd29.py).
    with pytest.raises(PluginCallError, match=r"PermissionError: \[Errno 1\]"):
        call(host, "buffers", "plain_memfd")
    assert host.disable("buffers")
    assert seccomp_log(host, "buffers") == {"memfd_create": "denied 1 time(s)"}


@pytest.mark.security
def test_the_loader_runs_no_program_the_plugin_ships(plugins_dir: Path, state_dir: Path) -> None:
    """Red team, round 4: a plugin approved for ``proc.exec:true`` shipped a program
    as ``helper.dat`` (no scanner reads a data file) and ran it with every layer on:
    ``ld.so /plugin/helper.dat``. The snapshot is mounted noexec."""
    write_plugin(
        plugins_dir,
        "shipper",
        LOADER,
        ("through_loader_read", "noexec"),
        capabilities=("proc.exec:true",),
    )
    shutil.copy(sys.executable, plugins_dir / "shipper" / "helper.dat")
    with sandboxed_host(plugins_dir, state_dir, "shipper") as host:
        true = shutil.which("true")
        assert true is not None
        loader = program_grants(true)[-1].path
        assert call(host, "shipper", "through_loader_read", loader, "/plugin/helper.dat") == ""
        assert call(host, "shipper", "noexec", ["/plugin"]) == {"/plugin": True}
