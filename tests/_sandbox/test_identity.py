"""Who a worker is on the host (issue 13, point 1): never root.

The attack first: as root, a plugin with a writable grant copied the
interpreter into it and made it set-uid; on the host that was a set-uid-root
program any local user could run. Every test here runs real workers in the
real sandbox; what they assert depends on whether the suite runs as root
(CI does both: `.ci/run` runs the sandbox tests as root and as a user).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from caplet import PolicyError
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._identity import (
    REAL_UID_BASE,
    REAL_UID_SPAN,
    WorkerIdentity,
    hand_over,
    worker_identity,
)
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import give_to_worker

ROOT = os.geteuid() == 0

WHO = """
import os, shutil, sys

def create_functions(config):
    def who():
        status = {}
        with open("/proc/self/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                status[key] = value.strip()
        with open("/proc/self/uid_map") as handle:
            uid_map = handle.read().split()
        return {
            "ids": list(os.getresuid()) + list(os.getresgid()),
            "groups": os.getgroups(),
            "caps": [status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
            "no_new_privs": status["NoNewPrivs"],
            "uid_map": uid_map,
            "cwd_owner": os.stat(".").st_uid,
        }

    def drop(out):
        # The red team's move: the interpreter copied into a writable grant.
        target = os.path.join(out, "python")
        shutil.copyfile(sys.executable, target)
        os.chmod(target, 0o755)
        made = os.path.join(out, "made.txt")
        with open(made, "w") as handle:
            handle.write("x")
        return [os.stat(target).st_uid, os.stat(made).st_uid, os.stat(out).st_uid]

    return {"probe": {"who": who, "drop": drop}}
"""


def _spec(tmp_path: Path, *grants: PathGrant) -> WorkerSpec:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text(WHO, encoding="utf-8")
    workdir = tmp_path / "work"
    workdir.mkdir()
    return WorkerSpec(
        plugin="who",
        snapshot_dir=snapshot,
        entry="plugin.py",
        config={},
        modules={"probe": ("who", "drop")},
        workdir=workdir,
        grants=grants,
    )


def test_a_worker_never_runs_as_root_and_holds_nothing(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    identity = launcher.identity
    with launcher.start(_spec(tmp_path)) as worker:
        who = worker.call("probe", "who", (), {}, timeout_s=10)
        monitor = worker.pid
    assert isinstance(who, dict)
    real = _real_uid(identity, monitor)
    expected = [real] + [identity.uid] * 2 + [identity.gid] * 3
    assert who["ids"] == expected
    assert 0 not in who["ids"]
    assert who["caps"] == ["0000000000000000"] * 5
    assert who["no_new_privs"] == "1"
    assert who["cwd_owner"] == identity.uid  # its /tmp/work is its own
    if ROOT:
        assert identity == worker_identity()  # the default: never root
        assert who["groups"] == []  # root's group 0 is gone
        # Host root stays mapped for the jail's builder; no process keeps it.
        # The worker's own real uid is the third id mapped.
        mapped = ["0", "0", "1", str(identity.uid), str(identity.uid), "1"]
        assert who["uid_map"] == [*mapped, str(real), str(real), "1"]
    else:
        assert identity.uid == os.geteuid()
        assert who["uid_map"] == [str(os.geteuid()), str(os.geteuid()), "1"]


def _real_uid(identity: WorkerIdentity, monitor: int) -> int:
    """The real uid the worker whose jail's monitor is ``monitor`` must have."""
    if ROOT:
        # attack10: a root host's workers each count per-user kernel
        # resources (epoll watches, descriptors in flight) under their own uid.
        assert identity.own_real_uids
        assert REAL_UID_BASE < REAL_UID_BASE + monitor < REAL_UID_BASE + REAL_UID_SPAN
        return REAL_UID_BASE + monitor
    assert not identity.own_real_uids
    return identity.uid


def test_what_a_plugin_writes_in_a_grant_is_the_workers_never_roots(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    spec = _spec(tmp_path, PathGrant(str(out), writable=True))
    with launcher.start(spec) as worker:
        owners = worker.call("probe", "drop", (str(out),), {}, timeout_s=10)
    assert owners == [launcher.identity.uid] * 3
    # Seen from the host: nothing root-owned appeared in the grant.
    for name in ("python", "made.txt"):
        info = (out / name).stat()
        assert info.st_uid == launcher.identity.uid
        assert info.st_uid != 0 or not ROOT


@pytest.mark.skipif(not ROOT, reason="the monitor runs as the host's user when caplet is not root")
def test_the_jails_monitor_gives_up_root_too(launcher: SandboxLauncher, tmp_path: Path) -> None:
    with launcher.start(_spec(tmp_path)) as worker:
        status = Path(f"/proc/{worker.pid}/status").read_text(encoding="ascii")
        monitor = worker.pid
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    # Real, effective, saved, filesystem: the real uid is the jail's own.
    real = _real_uid(launcher.identity, monitor)
    assert uids == [str(real)] + [str(launcher.identity.uid)] * 3


def test_the_default_identity_is_the_hosts_own_or_an_unprivileged_one() -> None:
    identity = worker_identity()
    if ROOT:
        assert identity.privileged
        assert identity.uid != 0
        assert identity.gid != 0
    else:
        assert not identity.privileged
        assert (identity.uid, identity.gid) == (os.geteuid(), os.getegid())


@pytest.mark.parametrize(
    ("uid", "gid", "message"),
    [
        (0, None, "policy worker_uid = 0: workers never run as root"),
        (None, 0, "policy worker_gid = 0: workers never run as root"),
        (-1, None, "policy worker_uid = -1: expected a host id between 1 and 4294967294"),
        (2**32, None, "expected a host id between 1 and 4294967294"),
        (True, None, "policy worker_uid = True: expected a host id"),
        (
            REAL_UID_BASE + 7,
            None,
            f"policy worker_uid = {REAL_UID_BASE + 7}: {REAL_UID_BASE}-"
            f"{REAL_UID_BASE + REAL_UID_SPAN - 1} are the workers' own real uids (one per "
            "worker); choose an id outside that range (default 65532) or leave it unset",
        ),
    ],
)
def test_a_root_or_malformed_worker_identity_is_refused(
    uid: int | None, gid: int | None, message: str
) -> None:
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        worker_identity(uid, gid)


@pytest.mark.skipif(ROOT, reason="an unprivileged host may run workers only as itself")
def test_an_unprivileged_host_cannot_take_another_identity() -> None:
    with pytest.raises(PolicyError) as info:
        worker_identity(os.geteuid() + 1, None)
    assert "an unprivileged process can run workers only as itself" in str(info.value)
    assert "user_namespaces(7)" in str(info.value)


@pytest.mark.skipif(not ROOT, reason="choosing the identity needs root")
def test_a_configured_identity_is_the_one_workers_get(tmp_path: Path) -> None:
    identity = worker_identity(4242, 4343)
    assert identity.describe() == "uid 4242, gid 4343 (policy worker_uid/worker_gid)"
    sandbox = SandboxLauncher(strict=True, identity=identity)
    try:
        with sandbox.start(_spec(tmp_path)) as worker:
            who = worker.call("probe", "who", (), {}, timeout_s=10)
    finally:
        sandbox.close()
    assert isinstance(who, dict)
    assert who["ids"][1:] == [4242] * 2 + [4343] * 3
    assert REAL_UID_BASE < who["ids"][0] < REAL_UID_BASE + REAL_UID_SPAN


def test_hand_over_gives_a_directory_to_the_worker_only_on_a_root_host(tmp_path: Path) -> None:
    folder = tmp_path / "grant"
    folder.mkdir()
    inside = folder / "keep.txt"
    inside.write_text("x", encoding="utf-8")
    identity = worker_identity()
    hand_over(folder, identity)
    assert folder.stat().st_uid == identity.uid
    assert inside.stat().st_uid == os.geteuid()  # the directory only, never its contents


@pytest.mark.skipif(not ROOT, reason="only a root host drops its plain workers to another uid")
def test_a_plain_worker_of_a_root_host_never_runs_as_root(tmp_path: Path) -> None:
    from caplet._errors import WorkerStartError
    from caplet._sandbox._subprocess import SubprocessLauncher

    spec = _spec(tmp_path)
    plain = SubprocessLauncher()
    if not _reachable_by(Path(sys.executable).resolve(), plain.identity):
        # This machine's interpreter sits under a root-only directory (/root):
        # the plain worker cannot even start as the unprivileged uid, and says so.
        with pytest.raises(WorkerStartError) as info:
            plain.start(spec)
        assert f"cannot start a worker process as uid {plain.identity.uid}" in str(info.value)
        assert "never runs a worker as root" in str(info.value)
        return
    with plain.start(spec) as worker:
        who = worker.call("probe", "who", (), {}, timeout_s=10)
    assert isinstance(who, dict)
    assert 0 not in who["ids"]


def _reachable_by(path: Path, identity: WorkerIdentity) -> bool:
    for directory in path.parents:
        mode = directory.stat().st_mode
        owner = directory.stat().st_uid
        bit = stat.S_IXUSR if owner == identity.uid else stat.S_IXOTH
        if not mode & bit:
            return False
    return shutil.which(str(path)) is not None


def test_root_of_a_namespace_that_maps_nothing_else_runs_workers_as_itself(
    tmp_path: Path,
) -> None:
    # `unshare -r`, some rootless containers: uid 0 here is not the host's
    # root, and no other id exists to switch to.
    script = (
        "from caplet._sandbox._identity import worker_identity\n"
        "from caplet import PolicyError\n"
        "identity = worker_identity()\n"
        "print(identity.uid, identity.privileged, identity.source)\n"
        "try:\n"
        "    worker_identity(4242, None)\n"
        "except PolicyError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "0 False the only id of this user namespace"
    assert "maps no other id (/proc/self/uid_map)" in second


def test_doctor_says_who_workers_run_as() -> None:
    from caplet._sandbox._sandboxed import isolation_report

    identity = worker_identity()
    shown = isolation_report().details["workers run as"]
    assert shown.startswith(f"uid {identity.uid}, gid {identity.gid} (")
    if not ROOT:
        assert shown.endswith("caplet's own user: never root on the host")


DEATH = """
import ctypes

def create_functions(config):
    def deathsig():
        libc = ctypes.CDLL(None, use_errno=True)
        signal = ctypes.c_int(-1)
        libc.prctl(2, ctypes.byref(signal), 0, 0, 0)  # PR_GET_PDEATHSIG
        return {"deathsig": signal.value, "uid": os.geteuid(), "real": os.getuid()}

    return {"probe": {"deathsig": deathsig}}
"""


def test_a_worker_without_a_jail_still_dies_with_the_zygote_after_the_uid_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Best-effort isolation on a machine without user namespaces: the zygote
    # arms PR_SET_PDEATHSIG, then _become_worker switches to the worker's
    # uid, which silently clears it. A host killed mid-call then leaves the
    # plugin running, unsandboxed by any pid namespace, for ever.
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces")
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "plugin.py").write_text("import os\n" + DEATH, encoding="utf-8")
    workdir = tmp_path / "work"
    workdir.mkdir()
    spec = WorkerSpec(
        plugin="death",
        snapshot_dir=snapshot,
        entry="plugin.py",
        config={},
        modules={"probe": ("deathsig",)},
        workdir=workdir,
    )
    best = SandboxLauncher(strict=False)
    try:
        assert "missing: namespaces" in best.isolation
        with best.start(spec) as worker:
            answer = worker.call("probe", "deathsig", (), {}, timeout_s=10)
            pid = worker.pid
    finally:
        best.close()
    assert isinstance(answer, dict)
    assert answer["uid"] == best.identity.uid
    assert answer["deathsig"] == 9  # SIGKILL
    # Without a jail the worker is its own process in the host's pid namespace:
    # its real uid is its own too (attack10), and the switch kept the death signal.
    assert answer["real"] == (REAL_UID_BASE + pid if ROOT else best.identity.uid)
