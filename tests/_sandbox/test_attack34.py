"""attack34: the twenty-first session's "changed modes" filter attacked in a real worker.

The twenty-first session made seccomp refuse a ``chmod`` that lets every local user write
(attack31: the granted folder 0700 made 0777). A mode is also set when a file, folder or
FIFO is *made*: the kernel gives it the mode asked for less the umask, and the umask is the
worker's to set. ``os.umask(0)`` then ``os.mkdir(p, 0o777)`` made a folder every local user
may write, inside the user's granted folder, with no ``chmod`` at all; ``open()``'s 0o666
made a file they may rewrite. The worker now starts with the other-write bit in its umask,
and seccomp refuses a ``umask`` that clears it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import PluginFactory

SOURCE = """
import ctypes
import errno
import os
import stat

DATA = {data!r}
STEPS = {steps!r}


def create_functions(config):
    def run():
        out = {{}}

        def probe(name, action):
            try:
                out[name] = action()
            except OSError as exc:
                out[name] = errno.errorcode.get(exc.errno, str(exc.errno))

        def created(name, make):
            def action():
                make(os.path.join(DATA, name))
                return oct(stat.S_IMODE(os.lstat(os.path.join(DATA, name)).st_mode))
            return action

        def file(path, mode=0o666):
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, mode))

        for step in STEPS:
            if step == "umask0":
                probe(step, lambda: oct(os.umask(0)))
            elif step == "umask-again":
                probe(step, lambda: oct(os.umask(0)))
            elif step == "libc-umask0":
                probe(step, lambda: ctypes.CDLL(None, use_errno=True).umask(0))
            elif step == "umask077":
                probe(step, lambda: oct(os.umask(0o077)))
            elif step == "umask022":
                probe(step, lambda: oct(os.umask(0o022)))
            elif step == "mkdir":
                probe(step, created("drop", lambda p: os.mkdir(p, 0o777)))
            elif step == "sticky":
                probe(step, created("tmp", lambda p: os.mkdir(p, 0o1777)))
            elif step == "open":
                probe(step, created("shared.txt", file))
            elif step == "fifo":
                probe(step, created("pipe", lambda p: os.mkfifo(p, 0o666)))
            elif step == "mknod":
                probe(step, created("node", lambda p: os.mknod(p, stat.S_IFREG | 0o666)))
            elif step == "makedirs":
                probe(step, created("a/b", os.makedirs))
            elif step == "shelve":
                import dbm.dumb  # reads the umask with os.umask(0), os.umask(old)

                def shelved():
                    db = dbm.dumb.open(os.path.join(DATA, "db"), "c")
                    db[b"k"] = b"v"
                    db.close()
                    return oct(os.umask(0o077))

                probe(step, shelved)
            elif step == "write":
                probe(step, created("report.txt", lambda p: open(p, "w").write("ok")))
        return out

    return {{"main": {{"run": run}}}}
"""


def _granted_folder(tmp_path: Path) -> Path:
    data = tmp_path / "granted"
    data.mkdir(mode=0o700)
    if os.geteuid() == 0:
        # A root host's worker has a uid of its own: it may write here as in a shared
        # folder; what it makes inside is its own either way.
        data.chmod(0o703)
    return data


def _run(
    data: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    steps: list[str],
) -> dict[str, object]:
    make_plugin(
        "maker",
        source=SOURCE.format(data=str(data), steps=steps),
        extra=f'capabilities = ["fs.write:{data}"]\n',
    )
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher, red_team=True) as host:
        assert host.enable("maker", consent=True)
        out: dict[str, object] = host.call("maker", "main.run")
    return out


def _others_may_write(path: Path) -> bool:
    return bool(os.lstat(path).st_mode & stat.S_IWOTH)


@pytest.mark.security
@pytest.mark.parametrize("made", ["mkdir", "sticky", "open", "fifo", "mknod"])
def test_nothing_a_worker_makes_is_writable_by_every_local_user(
    tmp_path: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    made: str,
) -> None:
    """``umask(0)`` (``os.umask``, or the system call through ctypes) then a creating
    call's own mode: whatever was made, no other user may write it."""
    data = _granted_folder(tmp_path)
    steps = ["umask0", "umask-again", "libc-umask0", made]
    out = _run(data, plugins_dir, state_dir, launcher, make_plugin, steps)
    # os.umask keeps the bit the filter requires (the worker's wrapper), so the idiom
    # that reads the umask works and the mask keeps others' write bit ...
    assert int(str(out["umask-again"]), 8) & stat.S_IWOTH, out
    # ... and the system call itself is refused: glibc's umask() returns the call's
    # -EPERM as -1 (it never sets errno for umask).
    assert out["libc-umask0"] == -1, out
    names = {"mkdir": "drop", "sticky": "tmp", "open": "shared.txt", "fifo": "pipe"}
    made_path = data / names.get(made, "node")
    assert made_path.exists(), out
    assert not _others_may_write(made_path), (made, out)


@pytest.mark.security
def test_a_worker_starts_with_a_umask_that_keeps_others_from_writing(
    tmp_path: Path,
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
) -> None:
    """Whatever umask the host runs with (a service's 0 included), a worker's starts with
    the other-write bit: a folder made 0o777 without a umask call is not every user's.
    A launcher of its own, so its zygote starts under the host's umask 0."""
    data = _granted_folder(tmp_path)
    old = os.umask(0)
    own = SandboxLauncher(strict=True)
    try:
        out = _run(data, plugins_dir, state_dir, own, make_plugin, ["mkdir", "open"])
    finally:
        own.close()
        os.umask(old)
    assert not _others_may_write(data / "drop"), out
    assert not _others_may_write(data / "shared.txt"), out


@pytest.mark.security
def test_near_miss_honest_umasks_and_creating_calls_keep_working(
    tmp_path: Path,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
) -> None:
    """A umask that keeps the other-write bit (0o022, 0o077) is set as asked, the idiom
    that reads the umask works, and files and folders are made with ``open()``'s and
    ``makedirs``' own modes, less it."""
    data = _granted_folder(tmp_path)
    steps = ["umask022", "makedirs", "write", "shelve", "umask077", "open"]
    out = _run(data, plugins_dir, state_dir, launcher, make_plugin, steps)
    assert out["makedirs"] == "0o755", out
    assert out["write"] == "0o644", out
    # dbm.dumb (shelve's fallback) reads the umask by setting 0 and back: it works, and
    # leaves the umask as it found it.
    assert out["shelve"] == "0o22", out
    assert out["umask077"] == "0o77", out
    assert out["open"] == "0o600", out
    assert (data / "report.txt").read_text() == "ok"
