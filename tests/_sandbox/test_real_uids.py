"""A real uid per worker on a root host (attack10's per-user counts).

The attack (tests/_sandbox/test_seccomp_ipc.py, the descriptors in flight;
docs/security.md, attack10): the kernel charges epoll watches, descriptors in
flight over ``SCM_RIGHTS`` and pipe buffers to the *real* uid, and every
worker of a root host shared one, so one plugin hoarding them starved the
others. The defence: each worker's real uid is its own
(``REAL_UID_BASE`` + its jail monitor's pid) while its effective, saved and
filesystem uid stay the shared worker uid its grants are owned by. What must
keep working: a worker granted ``proc.exec`` keeps the shared real uid, so
the programs it runs are not put in the kernel's secure-exec mode and shells
do not try to drop to another uid; a namespace that cannot map the range
falls back to the shared real uid and ``caplet doctor`` says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from caplet import PluginHost, Policy
from caplet._sandbox._identity import (
    REAL_UID_BASE,
    REAL_UID_SPAN,
    WorkerIdentity,
    worker_identity,
)
from caplet._sandbox._sandboxed import _real_uids, isolation_report
from tests._sandbox.seccompkit import call, fool_the_review, sandboxed_host, write_plugin

ROOT = os.geteuid() == 0

WHO = """
import subprocess

def ids():
    return list(os.getresuid())

def shell():
    done = subprocess.run(
        ["/bin/bash", "-c", "echo ran"], capture_output=True, text=True, env={"TMPDIR": "/tmp"}
    )
    return {"ids": list(os.getresuid()), "out": done.stdout, "err": done.stderr}
"""


@pytest.mark.skipif(not ROOT, reason="only a root host has other uids to give its workers")
def test_each_worker_of_a_root_host_counts_under_a_real_uid_of_its_own(
    plugins_dir: Path, state_dir: Path
) -> None:
    write_plugin(plugins_dir, "one", WHO, ("ids",))
    write_plugin(plugins_dir, "two", WHO, ("ids",))
    shared = worker_identity().uid
    with sandboxed_host(plugins_dir, state_dir, "one", "two") as host:
        first = call(host, "one", "ids")
        second = call(host, "two", "ids")
    for ids in (first, second):
        assert ids[1:] == [shared, shared]  # files: the shared worker uid, as before
        assert REAL_UID_BASE < ids[0] < REAL_UID_BASE + REAL_UID_SPAN
    assert first[0] != second[0]


def test_a_worker_that_may_exec_keeps_the_shared_real_uid_and_its_shell_runs_plainly(
    plugins_dir: Path, state_dir: Path
) -> None:
    # With a real uid other than the effective one, the programs it starts
    # would run in secure-exec mode (AT_SECURE: TMPDIR and LD_* dropped) and
    # bash would try to drop to the real uid, which seccomp refuses, on every start.
    write_plugin(plugins_dir, "runner", WHO, ("shell",), capabilities=("proc.exec:/bin/bash",))
    shared = worker_identity().uid
    with sandboxed_host(plugins_dir, state_dir, "runner") as host:
        out = call(host, "runner", "shell")
    assert out == {"ids": [shared] * 3, "out": "ran\n", "err": ""}


# A user namespace that maps 65,536 ids (a container's usual map) and not the
# range: run as root of it, written by the parent still in the host's namespace.
_IN_A_CONTAINER = """
import os, sys
from caplet._syscall import CLONE_NEWUSER, unshare

go_read, go_write = os.pipe()
ready_read, ready_write = os.pipe()
child = os.fork()
if child == 0:
    unshare(CLONE_NEWUSER)
    os.write(ready_write, b"u")
    os.read(go_read, 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    from caplet._sandbox._identity import worker_identity
    from caplet._sandbox._sandboxed import _real_uids
    identity = worker_identity()
    print(identity.privileged, identity.own_real_uids, identity.uid)
    print(_real_uids(identity))
    sys.stdout.flush()
    os._exit(0)
os.read(ready_read, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{child}/{name}", "w") as handle:
        handle.write("0 0 65536")
os.write(go_write, b"g")
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not ROOT, reason="writing a map of 65,536 ids needs root")
def test_a_namespace_without_the_range_shares_the_real_uid_and_doctor_says_so(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IN_A_CONTAINER],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    privileged, own, uid = first.split()
    assert (privileged, own) == ("True", "False")
    assert second == (
        f"shared by every worker (uid {uid}): this user namespace does not map uids "
        f"{REAL_UID_BASE}-{REAL_UID_BASE + REAL_UID_SPAN - 1}"
    )


def test_doctor_says_whose_per_user_counts_a_worker_uses() -> None:
    identity = worker_identity()
    shown = isolation_report().details["per-user kernel counts"]
    if ROOT:
        assert shown == (
            f"each worker's own (real uid {REAL_UID_BASE} + its monitor's pid); workers granted "
            f"proc.exec share uid {identity.uid}'s"
        )
    else:
        assert shown == (
            f"shared by every worker and caplet's own user (uid {os.geteuid()}); "
            "run as root to separate them"
        )


# attack12: access(2) answers for the *real* uid, which on a root host is the
# worker's own while every file is reached with the shared effective and
# filesystem uid: a writable grant the worker uid owns read as unwritable
# (and, 0700, as unreadable) to os.access, shutil.which and the libraries that
# probe a cache directory with it, though writing there worked.
ACCESS = """
def probe(grant, locked):
    modes = {"read": os.R_OK, "write": os.W_OK, "search": os.X_OK}
    return {
        "grant": {name: os.access(grant, mode) for name, mode in modes.items()},
        "locked": {name: os.access(locked, mode) for name, mode in modes.items()},
        "listed": attempt(os.listdir, grant),
        "wrote": attempt(lambda: open(os.path.join(grant, "note"), "w").close()),
        "read locked": attempt(os.listdir, locked),
    }
"""


def _owned_by_the_worker(path: Path, mode: int) -> Path:
    path.mkdir(mode=mode)
    if ROOT:
        identity = worker_identity()
        os.chown(path, identity.uid, identity.gid)
    return path


def test_os_access_in_a_worker_answers_for_the_ids_its_files_are_reached_with(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    grant = _owned_by_the_worker(tmp_path / "grant", 0o700)
    write_plugin(plugins_dir, "prober", ACCESS, ("probe",), capabilities=(f"fs.write:{grant}",))
    with sandboxed_host(plugins_dir, state_dir, "prober") as host:
        out = call(host, "prober", "probe", str(grant), "/plugin")
    assert out["listed"] == "ok"
    assert out["wrote"] == "ok"
    assert out["grant"] == {"read": True, "write": True, "search": True}


def test_os_access_still_refuses_what_the_worker_uid_may_not_do(
    plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    # Near miss: answering for the effective ids must not turn a refusal into a
    # yes. A directory inside the grant that the worker uid does not own (root's,
    # 0700, on a root host; its own with no bits elsewhere) is neither readable
    # nor writable, and the read-only snapshot is not writable.
    grant = _owned_by_the_worker(tmp_path / "grant", 0o700)
    locked = grant / "locked"
    locked.mkdir(mode=0o700)
    if not ROOT:
        locked.chmod(0o000)
    write_plugin(
        plugins_dir,
        "prober",
        ACCESS + "\n\ndef snapshot():\n    return os.access('/plugin', os.W_OK)\n",
        ("probe", "snapshot"),
        capabilities=(f"fs.write:{grant}",),
    )
    try:
        with sandboxed_host(plugins_dir, state_dir, "prober") as host:
            out = call(host, "prober", "probe", str(grant), str(locked))
            snapshot = call(host, "prober", "snapshot")
    finally:
        locked.chmod(0o700)
    assert out["read locked"] == "EACCES"
    assert out["locked"] == {"read": False, "write": False, "search": False}
    assert snapshot is False


def test_doctor_names_an_account_inside_the_range_as_why_workers_share_the_real_uid() -> None:
    # attack12: a 'caplet' account whose uid lies in the range turns the own
    # real uids off (its uid would collide with one worker's), and doctor
    # blamed the user namespace, which maps the whole range.
    inside = REAL_UID_BASE + 5
    identity = WorkerIdentity(inside, inside, True, "the 'caplet' account", own_real_uids=False)
    assert _real_uids(identity) == (
        f"shared by every worker (uid {inside}): the 'caplet' account's uid lies in "
        f"{REAL_UID_BASE}-{REAL_UID_BASE + REAL_UID_SPAN - 1}, the workers' own real uids; "
        "give it a uid outside that range"
    )


def test_doctor_keeps_blaming_the_namespace_for_an_account_just_outside_the_range() -> None:
    # Near miss: uids either side of the range are ordinary worker uids.
    for outside in (REAL_UID_BASE - 1, REAL_UID_BASE + REAL_UID_SPAN):
        identity = WorkerIdentity(outside, outside, True, "the 'caplet' account")
        assert _real_uids(identity) == (
            f"shared by every worker (uid {outside}): this user namespace does not map uids "
            f"{REAL_UID_BASE}-{REAL_UID_BASE + REAL_UID_SPAN - 1}"
        )


# attack12: the third line of the jail's uid map (the worker's own real uid)
# cannot be written where the caller's namespace does not map that uid. The
# host's check (_maps_real_uids) keeps that from happening; were the two ever to
# disagree, the failure named only the shared uid and blamed /proc.
_MAP_IN_A_CONTAINER = _IN_A_CONTAINER.replace(
    """    from caplet._sandbox._identity import worker_identity
    from caplet._sandbox._sandboxed import _real_uids
    identity = worker_identity()
    print(identity.privileged, identity.own_real_uids, identity.uid)
    print(_real_uids(identity))
""",
    """    from caplet._errors import SandboxError
    from caplet._sandbox._identity import WorkerIdentity
    from caplet._sandbox._jail_ns import create_namespaces
    own = sys.argv[1] == "own"
    identity = WorkerIdentity(65532, 65532, True, "the default for a root host", own)
    real_uid = identity.real_uid(os.getpid())
    try:
        create_namespaces(identity, real_uid)
        print("mapped")
    except SandboxError as exc:
        print(str(exc).replace(str(real_uid), "REAL"))
""",
)


def _map_in_a_container(tmp_path: Path, real_uids: str) -> str:
    assert "create_namespaces" in _MAP_IN_A_CONTAINER
    done = subprocess.run(
        [sys.executable, "-c", _MAP_IN_A_CONTAINER, real_uids],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(not ROOT, reason="writing a map of 65,536 ids needs root")
def test_a_real_uid_the_namespace_cannot_map_is_named_in_the_failure(tmp_path: Path) -> None:
    assert _map_in_a_container(tmp_path, "own") == (
        "namespace jail: writing /proc/self/uid_map and gid_map for 'uid 65532, gid 65532 and "
        "real uid REAL (one per worker), which this user namespace must map' "
        "failed: Operation not permitted (EPERM); the ids could not be mapped: is /proc "
        "mounted and writable by this user?"
    )


@pytest.mark.skipif(not ROOT, reason="writing a map of 65,536 ids needs root")
def test_a_jail_without_a_real_uid_of_its_own_maps_in_that_namespace(tmp_path: Path) -> None:
    # Near miss: the same namespace maps a jail whose worker shares the real
    # uid (what worker_identity chooses there, _maps_real_uids).
    assert _map_in_a_container(tmp_path, "shared") == "mapped"


# attack12, held: an unprivileged process may set its real uid to its
# effective one (setreuid(2)), the way back to the shared real uid and its
# counts; seccomp refuses every set*id call, whatever the arguments.
TAKE_BACK = """
def take_back(shared):
    before = list(os.getresuid())
    tries = {
        "setresuid": attempt(os.setresuid, shared, -1, -1),
        "setreuid": attempt(os.setreuid, shared, -1),
        "setuid": attempt(os.setuid, shared),
        "setfsuid": "EPERM" if libc.setfsuid(shared) < 0 else "ok",
    }
    return {"tries": tries, "unchanged": list(os.getresuid()) == before, "real": before[0]}
"""


@pytest.mark.skipif(not ROOT, reason="only a root host's workers have a real uid of their own")
def test_a_worker_cannot_take_back_the_shared_real_uid(plugins_dir: Path, state_dir: Path) -> None:
    write_plugin(plugins_dir, "taker", TAKE_BACK, ("take_back",))
    shared = worker_identity().uid
    with sandboxed_host(plugins_dir, state_dir, "taker") as host:
        out = call(host, "taker", "take_back", shared)
    assert out["tries"] == dict.fromkeys(("setresuid", "setreuid", "setuid", "setfsuid"), "EPERM")
    assert out["unchanged"]
    assert REAL_UID_BASE < out["real"] < REAL_UID_BASE + REAL_UID_SPAN


NO_JAIL = """
def who():
    return list(os.getresuid())
"""


@pytest.mark.skipif(not ROOT, reason="only a root host's workers have a real uid of their own")
def test_without_a_jail_each_worker_still_has_a_real_uid_of_its_own(
    plugins_dir: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The no-jail path takes its own pid instead of a monitor's (_become_worker),
    # in the host's user namespace, where RLIMIT_NPROC then counts it alone.
    monkeypatch.setenv("CAPLET_TEST_DISABLE_LAYERS", "namespaces")
    for name in ("one", "two"):
        write_plugin(plugins_dir, name, NO_JAIL, ("who",))
    policy = Policy(isolation="best-effort")  # type: ignore[arg-type]
    with PluginHost(plugins_dir, state_dir=state_dir, policy=policy) as host:
        assert "namespaces" not in host.isolation.split("(")[0], host.isolation
        for name in ("one", "two"):
            fool_the_review(host, name)
            assert host.enable(name, consent=True)
        first, second = call(host, "one", "who"), call(host, "two", "who")
    shared = worker_identity().uid
    assert first[0] != second[0]
    for ids in (first, second):
        assert ids[1:] == [shared, shared]
        assert REAL_UID_BASE < ids[0] < REAL_UID_BASE + REAL_UID_SPAN
