"""The host's run directory: private, in the state directory, swept after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from caplet._host import _run_locks
from caplet._host._inode_chain import inode_chain
from caplet._host._run_dir import RUN_SUBDIR, RunDir
from caplet._trust._paths import user_state_dir


def test_a_run_directory_is_private_and_removed_on_close(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "state")
    assert run.path.parent == tmp_path / "state" / RUN_SUBDIR
    assert run.path.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    snapshot = run.path / "p-1"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text("x", encoding="utf-8")
    snapshot.chmod(0o555)  # read-only like a real snapshot
    run.close()
    run.close()  # idempotent
    assert not run.path.exists()
    assert list((tmp_path / "state" / RUN_SUBDIR).iterdir()) == []


def test_a_killed_hosts_run_directory_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / "src")!r})
        from pathlib import Path
        from caplet._host._run_dir import RunDir
        run = RunDir(Path({str(state)!r}))
        (run.path / "snapshot").mkdir()
        print(run.path, flush=True)
        time.sleep(600)
        """
    )
    alive = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    killed = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert alive.stdout is not None
        assert killed.stdout is not None
        alive_dir = Path(alive.stdout.readline().strip())
        killed_dir = Path(killed.stdout.readline().strip())
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert killed_dir.exists()  # nobody could clean up after SIGKILL
        fresh = RunDir(state)  # the next host
        try:
            assert not killed_dir.exists()
            assert not Path(f"{killed_dir}.lock").exists()
            assert alive_dir.exists(), "a live host's run directory is never taken for litter"
        finally:
            fresh.close()
    finally:
        alive.kill()
        alive.wait()
        killed.kill()
        killed.wait()
        for stream in (alive.stdout, killed.stdout):
            if stream is not None:
                stream.close()


def test_a_host_starting_while_another_sweeps_keeps_a_lock_its_peers_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found as a flaky test under load (two hosts started together): another host's
    # sweep ran between this host's mkstemp and its flock, took the unlocked file for a
    # dead host's and unlinked it. This host then locked a file no name reached: its
    # peers' grant checks (round 4: write on one host, run on another) did not see it
    # alive, and its directory was never swept after a crash. The other host's sweep is
    # run at that instant, deterministically.
    state = tmp_path / "state"
    RunDir(state).close()  # the run directory exists, as for a second host
    parent = state / RUN_SUBDIR
    made = tempfile.mkstemp
    raced: list[str] = []

    def mkstemp_then_a_peer_sweeps(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = made(*args, **kwargs)
        if not raced:
            raced.append(name)
            _run_locks.sweep(parent)  # another host starting in the same instant
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_a_peer_sweeps)
    run = RunDir(state)
    try:
        assert raced
        assert not Path(raced[0]).exists()  # the first file was swept
        lock = Path(f"{run.path}.lock")
        assert lock.exists(), "the lock this host holds is reachable by its name"
        assert _run_locks.alive(str(lock)), "its peers see it alive"
        assert run.path.is_dir()
    finally:
        run.close()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("code.json", json.dumps([["/tmp/a\x00b", True], ["/usr/lib", False]])),
        ("code.json", "[" * 100_000),
        ("grants.json", '{"x": {"writable": [["/a", Infinity, 1]], "programs": []}}'),
        ("grants.json", json.dumps({"x": {"writable": [["/a\x00", 1, 1]], "programs": []}})),
        ("grants.json", json.dumps({"x": {"writable": [], "programs": ["/bin/a\x00b"]}})),
        ("grants.json", "{" + '"a":{' * 100_000),
    ],
)
def test_a_malformed_peer_file_is_read_as_nothing_of_it(
    tmp_path: Path, name: str, text: str
) -> None:
    """A live peer's code.json or grants.json that is no host's (attack21): a path with a
    NUL (every later enable in every other process died in inode_chain's stat with
    ValueError), JSON nested past Python's stack (RecursionError), Infinity for a device
    (OverflowError). The entries that are well formed are still read."""
    me, peer = RunDir(tmp_path), RunDir(tmp_path)
    try:
        (peer.path / name).write_text(text, encoding="utf-8")
        kept = ((Path("/usr/lib"), False),) if "/usr/lib" in text else ()
        assert me.peer_code() == kept
        assert me.peer_plans() == {}
        for path, _ in me.peer_code():
            assert inode_chain(path)
    finally:
        me.close()
        peer.close()


def test_a_host_on_another_state_directory_keeps_a_beacon_its_peers_read(tmp_path: Path) -> None:
    # attack22: hosts of one user on different state directories saw none of each
    # other's published folders. Each keeps a beacon in the user's run folder.
    project = RunDir(tmp_path / "project-state")
    default = RunDir(user_state_dir())
    try:
        beacons = [p for p in (user_state_dir() / RUN_SUBDIR).iterdir() if p.name.endswith(".lock")]
        assert len(beacons) == 2, "the default host's run directory and the project's beacon"
        project.publish_code([(tmp_path / "lib", False)])
        assert (tmp_path / "lib", False) in default.peer_code()
        default.publish_code([(tmp_path / "app", True)])
        assert (tmp_path / "app", True) in project.peer_code()
    finally:
        project.close()
        default.close()
    assert list((user_state_dir() / RUN_SUBDIR).glob("caplet-run-*")) == [], "beacon removed"


def test_a_host_never_reads_itself_as_a_peer_through_another_spelling(tmp_path: Path) -> None:
    # Near miss of the beacon: a state directory named through a link to the user's
    # own spells the user's run folder otherwise; the host is still not its own peer.
    user_state_dir().mkdir(parents=True, exist_ok=True)
    link = tmp_path / "state-link"
    link.symlink_to(user_state_dir())
    run = RunDir(link)
    try:
        run.publish_code([(tmp_path / "lib", False)])
        assert run.peer_code() == ()
        assert run.peer_plans() == {}
    finally:
        run.close()
