"""The folders where every caplet process of one user meets its peers (attack24).

Named by the uid alone (``caplet-<uid>`` in ``/run/user/<uid>`` and ``/tmp``), so
another user may make one first: a link to a folder of theirs, a folder of
theirs, one others may write. Each is refused through the descriptor it was
opened by, no beacon is made in it, and a host left without any meeting folder
says so and shares no writable grant or program.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from caplet import PluginHost
from caplet._host._grant_check import GrantPlan
from caplet._host._meeting import PEER_BASES_ENV, meeting_bases, open_meetings
from caplet._host._run_dir import RunDir
from caplet._sandbox._grants import PathGrant
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests._host.test_grant_check import make_runner
from tests.conftest import ROOT, PluginFactory, fifo_released, give_to_worker, rooted

#: Any uid but ours and root's (nobody's).
_OTHER_UID = 65534


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A base like /tmp: every user's, sticky."""
    path = tmp_path / "tmp-like"
    path.mkdir()
    path.chmod(0o1777)
    monkeypatch.setenv(PEER_BASES_ENV, str(path))
    return path


def _plant(base: Path, how: str, tmp_path: Path) -> Path:
    """What another user made at the meeting folder's name before the user's first host."""
    folder = base / f"caplet-{os.geteuid()}"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    if how == "a link to their folder":
        folder.symlink_to(theirs)
    elif how == "a folder others may write":
        folder.mkdir()
        folder.chmod(0o777)
    else:  # a folder of another user's: only root can give one away, so only as root
        folder.mkdir(mode=0o700)
        os.chown(folder, _OTHER_UID, _OTHER_UID)
    return theirs


#: What another user may have made (a user cannot make a folder of another's, so that
#: case runs as root; the others both ways).
PLANTED = ["a link to their folder", "a folder others may write"] + (
    ["another user's folder"] if ROOT else []
)


@pytest.mark.parametrize("how", PLANTED)
def test_a_meeting_folder_someone_else_made_first_is_never_used(
    base: Path, tmp_path: Path, how: str
) -> None:
    """Never used, and no longer a denial of service (attack24 left it open: every
    ``fs.write`` and ``proc.exec`` of the user's hosts was refused): the hosts meet in
    ``caplet-<uid>.1``, the user's own, and say what holds the name."""
    theirs = _plant(base, how, tmp_path)
    expected = {
        "a link to their folder": "is no folder of its own, a symbolic link or a file",
        "a folder others may write": "has mode 0777: others may have put files in it",
        "another user's folder": f"belongs to uid {_OTHER_UID}, not to you",
    }[how]
    planted = base / f"caplet-{os.geteuid()}"
    alternate = base / f"caplet-{os.geteuid()}.1"
    meetings = open_meetings(meeting_bases())
    try:
        assert [m.name for m in meetings if m.fd >= 0] == [alternate]
        assert meetings[0].passed_over == ((planted, meetings[0].passed_over[0][1]),)
        assert expected in meetings[0].passed_over[0][1]
    finally:
        for meeting in meetings:
            if meeting.fd >= 0:
                os.close(meeting.fd)
    assert alternate.stat().st_mode & 0o777 == 0o700
    first = RunDir(tmp_path / "one")
    second = RunDir(tmp_path / "two")
    try:
        assert not first.unseen
        # Both names guarded: no grant may reach either.
        assert set(first.meeting_folders) == {planted, alternate}
        (note,) = first.meeting_notes
        assert f"{planted} {expected}" in note
        assert f"the caplet processes of this user meet in {alternate} instead" in note
        first.publish_code([(tmp_path / "lib", False)])
        assert (tmp_path / "lib", False) in second.peer_code()
    finally:
        first.close()
        second.close()
    assert list(theirs.iterdir()) == [], "a beacon was made in a folder another user controls"


def test_hosts_join_the_folder_the_others_meet_in_after_the_name_is_freed(
    base: Path, tmp_path: Path
) -> None:
    """A host started after the planted folder was removed joins ``.1`` where the running
    hosts are, rather than making ``caplet-<uid>`` again (which would split them)."""
    planted = base / f"caplet-{os.geteuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    first = RunDir(tmp_path / "one")
    try:
        planted.rmdir()
        second = RunDir(tmp_path / "two")
        try:
            assert second.meeting_folders == (base / f"caplet-{os.geteuid()}.1",)
            first.publish_code([(tmp_path / "lib", False)])
            assert (tmp_path / "lib", False) in second.peer_code()
        finally:
            second.close()
    finally:
        first.close()
    assert not planted.exists()


def test_every_name_planted_leaves_the_host_unseen_and_says_so(base: Path, tmp_path: Path) -> None:
    """The fail-safe: another user who made all 64 names first; the host names three of
    them and how many more."""
    name = f"caplet-{os.geteuid()}"
    for suffix in ("", *(f".{n}" for n in range(1, 64))):
        (base / f"{name}{suffix}").mkdir()
        (base / f"{name}{suffix}").chmod(0o777)
    run = RunDir(tmp_path / "state")
    try:
        assert f"{base / name} has mode 0777: others may have put files in it" in run.unseen
        assert "(and 61 more names like it)" in run.unseen
    finally:
        run.close()


def test_a_base_others_may_write_that_is_not_sticky_is_never_used(
    base: Path, tmp_path: Path
) -> None:
    # Another user could rename the folder away and put theirs in its place.
    base.chmod(0o777)
    (meeting,) = open_meetings(meeting_bases())
    assert meeting.fd == -1
    assert "may be written by others and is not sticky (mode 0777)" in meeting.refusal
    assert not (base / f"caplet-{os.geteuid()}").exists()


def test_a_meeting_folder_is_made_private_and_reused_by_the_next_host(
    base: Path, tmp_path: Path
) -> None:
    # Near miss: the user's own folder, made by the first host, is every later host's.
    first = RunDir(tmp_path / "one")
    second = RunDir(tmp_path / "two")
    try:
        folder = base / f"caplet-{os.geteuid()}"
        assert folder.stat().st_mode & 0o777 == 0o700
        assert first.meeting_folders == second.meeting_folders == (folder,)
        assert not first.unseen
        first.publish_code([(tmp_path / "lib", False)])
        assert (tmp_path / "lib", False) in second.peer_code()
    finally:
        first.close()
        second.close()
    assert [p.name for p in folder.iterdir() if p.name.startswith("caplet-run-")] == []


WRITER = """
def create_functions(config):
    def write(path, text):
        with open(path, "w") as handle:
            handle.write(text)
        return True

    def read(path):
        with open(path) as handle:
            return handle.read()

    return {"main": {"write": write, "read": read}}
"""


def _writer(make_plugin: PluginFactory, name: str = "writer", kind: str = "fs.write") -> None:
    """A plugin that writes and reads files, granted ``kind`` over its configured root."""
    make_plugin(
        name,
        source=WRITER,
        extra=rooted(kind),
        modules='[modules.main]\nfunctions = ["write", "read"]\n',
    )


def test_a_host_no_peer_can_see_shares_no_writable_grant_and_says_so(
    base: Path,
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fail safe: a host with a beacon in no meeting folder is seen by no process of
    another home or state directory, which would run a program its plugin rewrote
    (round 4) or grant a write over its imports (attack22): its enables of
    ``fs.write`` and ``proc.exec`` are refused naming why, and it warns at once.
    Near miss: a plugin with ``fs.read`` only is enabled and runs."""
    base.chmod(0o777)  # not sticky: another user could rename any folder in it away
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n", encoding="utf-8")
    give_to_worker(data)
    for name, kind in (("writer", "fs.write"), ("reader", "fs.read")):
        _writer(make_plugin, name, kind)
    with (
        caplog.at_level(logging.WARNING, logger="caplet"),
        make_host(plugins_dir, tmp_path / "state", launcher) as host,
    ):
        host.discover()
        outcome = host.enable("writer", config={"root": str(data)}, consent=True)
        assert not outcome, "a host no peer can see shared a writable grant"
        assert (
            "plugin 'writer': capability 'fs.write:${config.root}': this process could not "
            "publish where every caplet process of this user looks"
        ) in outcome.reason
        assert "may be written by others and is not sticky (mode 0777)" in outcome.reason
        reader = host.enable("reader", config={"root": str(data)}, consent=True)
        assert reader, reader.reason
        assert host.call("reader", "main.read", str(data / "a.txt")) == "a\n"
    assert any("could not publish where every caplet process" in r.message for r in caplog.records)


def test_no_plugin_may_write_where_the_hosts_meet(
    base: Path,
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
) -> None:
    # A worker of a user's host is the user: with fs.write over /tmp it could remove
    # the beacons (the hosts unseen) or plant a FIFO for a peer's grants.json. The
    # meeting folder is guarded as caplet's state: no writable grant contains it, and a
    # read grant gets it hidden. Near miss: a folder beside it in the base is granted.
    beside = base / "notes"
    beside.mkdir()
    give_to_worker(beside)
    _writer(make_plugin)
    with make_host(plugins_dir, tmp_path / "state", launcher) as host:
        host.discover()
        folder = base / f"caplet-{os.geteuid()}"
        outcome = host.enable("writer", config={"root": str(base)}, consent=True)
        assert not outcome, "a plugin was given write access where the hosts meet"
        assert f"is writable and contains {folder}, another caplet state directory" in (
            outcome.reason
        )
        inside = host.enable("writer", config={"root": str(folder)}, consent=True)
        assert not inside
        assert f"contains {folder}, another caplet state directory" in inside.reason
        outcome = host.enable("writer", config={"root": str(beside)}, consent=True)
        assert outcome, outcome.reason
        assert host.call("writer", "main.write", str(beside / "todo.txt"), "kept")


def test_no_plugin_may_write_where_a_refused_meeting_folder_is(
    base: Path,
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """attack26, left open: a refused meeting folder was no guarded path, so a plugin
    granted ``fs.write`` over its base (a user's own 0777 folder there) was enabled, and
    it could ``chmod 700`` the folder (Landlock does not govern chmod) and plant what
    the next host reads in it. The host meets its peers in a second base, so it is
    seen and the refusal is the guard's, not the unseen host's."""
    refused = tmp_path / "refused-base"
    refused.mkdir()
    refused.chmod(0o1777)
    give_to_worker(refused)
    folder = refused / f"caplet-{os.geteuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv(PEER_BASES_ENV, f"{base}{os.pathsep}{refused}")
    _writer(make_plugin)
    with make_host(plugins_dir, tmp_path / "state", launcher) as host:
        host.discover()
        outcome = host.enable("writer", config={"root": str(refused)}, consent=True)
        assert not outcome, "a plugin was given write access over a refused meeting folder"
        # The refused name or the alternate the host met in beside it (either is guarded);
        # or, since meet29, the refused folder itself: a folder of the user's in a base
        # others may change, or one others may write, cannot be checked (either refuses).
        folder_named = re.escape(str(folder))
        assert re.search(
            rf"contains {folder_named}(\.1)?, another caplet state directory"
            rf"|{folder_named} (lies in {re.escape(str(refused))}, which|is a folder of yours)",
            outcome.reason,
        ), outcome.reason


@pytest.fixture
def apart(base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``base``, the only place where the hosts of the test meet: the user's platform
    state directory cannot be made (a file where its parent would be), as for two
    processes of different homes and state directories, where attack28 matters."""
    blocked = tmp_path / "a-file"
    blocked.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked / "state"))
    return base


Started = TypeVar("Started")


def while_planted_and_freed(
    base: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: Callable[[], object],
    second: Callable[[], Started],
) -> Started:
    """attack28's steps around two starts: ``second`` (host B's start) finds no folder of
    the user's (its first pass); at its first ``mkdir`` another user plants
    ``caplet-<uid>``, ``first`` (host A's whole start) passes it over and makes ``.1``,
    and the planted folder is removed; B goes on and makes ``caplet-<uid>``."""
    planted = base / f"caplet-{os.geteuid()}"
    real_mkdir = os.mkdir
    done: list[bool] = []

    def between_the_passes(path: object, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if not done and path == planted.name and dir_fd is not None:
            done.append(True)
            monkeypatch.setattr(os, "mkdir", real_mkdir)
            planted.mkdir()
            planted.chmod(0o777)
            first()
            planted.rmdir()
        real_mkdir(path, mode, dir_fd=dir_fd)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", between_the_passes)
    try:
        made = second()
    finally:
        monkeypatch.setattr(os, "mkdir", real_mkdir)
    assert done, "the second start made no meeting folder"
    return made


def _beacons(folder: Path) -> int:
    """How many hosts keep a beacon in ``folder``."""
    return sum(1 for entry in folder.iterdir() if entry.name.endswith(".lock"))


def _writable(path: Path) -> GrantPlan:
    """What a host publishes for a plugin granted ``fs.write`` over ``path``."""
    info = path.stat()
    grant = PathGrant(str(path), writable=True, device=info.st_dev, inode=info.st_ino)
    return GrantPlan(grants=(grant,))


@pytest.mark.security
def test_a_name_planted_and_freed_while_two_hosts_start_does_not_split_them(
    apart: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attack28: host B finds no folder of the user's; another user plants
    ``caplet-<uid>``; host A passes it over and makes ``.1``; the planted folder is
    removed; B makes ``caplet-<uid>``. The two kept their beacons in two folders and
    never saw each other (a grant of one over what the other runs was not refused,
    attack24's reason for meeting at all). They still publish in the folders they took,
    but each reads the peers of every folder of the user's: they see each other, and a
    host started later (in B's folder) sees both."""
    started: list[RunDir] = []
    second = while_planted_and_freed(
        apart,
        monkeypatch,
        lambda: started.append(RunDir(tmp_path / "one")),
        lambda: RunDir(tmp_path / "two"),
    )
    (first,) = started
    third = RunDir(tmp_path / "three")
    hosts = (first, second, third)
    try:
        name = f"caplet-{os.geteuid()}"
        assert (_beacons(apart / f"{name}.1"), _beacons(apart / name)) == (1, 2), "no split"
        for index, run in enumerate(hosts):
            assert not run.unseen
            run.publish_code([(tmp_path / f"lib{index}", False)])
        for index, run in enumerate(hosts):
            others = {(tmp_path / f"lib{other}", False) for other in range(3) if other != index}
            assert others <= set(run.peer_code()), f"host {index} does not see the others"
        data = tmp_path / "data"
        data.mkdir()
        first.publish({"writer": _writable(data)})
        for run in (second, third):
            assert "writer (enabled by another caplet process)" in run.peer_plans()
        # Every name that is there is guarded in every host, whichever it took.
        for run in hosts:
            assert {apart / name, apart / f"{name}.1"} <= set(run.meeting_folders)
    finally:
        for run in hosts:
            run.close()


def _waits_on_a_lock(thread: threading.Thread) -> bool:
    """Whether ``thread`` comes to wait for an flock(2) of this process's (a blocked
    request, ``->`` in /proc/locks) rather than ending. Polls a condition; the
    deadline only keeps a deadlock from hanging the suite."""
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:
        for line in Path("/proc/locks").read_text(encoding="ascii").splitlines():
            fields = line.split()
            if fields[1:3] == ["->", "FLOCK"] and fields[5] == str(os.getpid()):
                return True
        thread.join(0.01)
    return False


@pytest.mark.security
def test_hosts_in_two_folders_publish_one_after_the_other(
    apart: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attack21's lock across attack28's split: an enable's last check and its
    publication hold a lock every host of the user takes, whichever folder it meets in.
    While host A checks and publishes, B's publication waits, then its check reads what
    A published (A's locks were its own folders', B's its own: neither waited, and each
    checked before the other published)."""
    started: list[RunDir] = []
    second = while_planted_and_freed(
        apart,
        monkeypatch,
        lambda: started.append(RunDir(tmp_path / "one")),
        lambda: RunDir(tmp_path / "two"),
    )
    (first,) = started
    data = tmp_path / "data"
    data.mkdir()
    seen: list[set[str]] = []
    waited: list[bool] = []
    publishing = threading.Thread(
        target=lambda: second.publish({}, check=lambda peers: seen.append(set(peers)))
    )

    def meanwhile(_peers: object) -> None:
        publishing.start()  # under A's locks
        waited.append(_waits_on_a_lock(publishing))

    try:
        first.publish({"writer": _writable(data)}, check=meanwhile)
        publishing.join()
        assert waited == [True], "B published while A was between its check and its write"
        assert seen == [{"writer (enabled by another caplet process)"}]
    finally:
        first.close()
        second.close()


@pytest.mark.security
def test_a_folder_made_private_again_is_read_and_what_others_left_there_is_not(
    apart: Path, tmp_path: Path
) -> None:
    """The same split without a race: the user's own ``caplet-<uid>`` is open to others
    when host A starts (A meets in ``.1``), then the user makes it private again and
    host B meets there. What another user left in it meanwhile (a lock file they hold,
    a beacon whose ``grants.json`` is a FIFO or a forged grant over ``/``, a FIFO for a
    lock file, which the starting host sweeps) is no host of this user's: read as
    nothing, never waited on. As root the files are another
    uid's; as a user they can only be the user's own (a FIFO, then, is read as nothing
    without waiting)."""
    folder = apart / f"caplet-{os.geteuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    first = RunDir(tmp_path / "one")
    # Another user's leavings, while the folder was open to them.
    lock = folder / "caplet-run-left.lock"
    lock.write_text("", encoding="utf-8")
    left = folder / "caplet-run-left"
    left.mkdir()
    os.mkfifo(left / "grants.json")
    forged = folder / "caplet-run-forged"
    forged.mkdir()
    (forged / "grants.json").write_text(
        '{"forged": {"writable": [["/", 1, 2]], "programs": []}}', encoding="utf-8"
    )
    (folder / "caplet-run-forged.lock").write_text("", encoding="utf-8")
    os.mkfifo(folder / "caplet-run-fifo.lock")  # what a starting host sweeps
    if ROOT:
        for path in (
            lock,
            left,
            left / "grants.json",
            forged,
            *forged.iterdir(),
            folder / "caplet-run-fifo.lock",
        ):
            os.chown(path, _OTHER_UID, _OTHER_UID)
        os.chown(folder / "caplet-run-forged.lock", _OTHER_UID, _OTHER_UID)
    held = [os.open(path, os.O_RDONLY) for path in (lock, folder / "caplet-run-forged.lock")]
    try:
        for fd in held:
            fcntl.flock(fd, fcntl.LOCK_SH)
        folder.chmod(0o700)
        with fifo_released(folder / "caplet-run-fifo.lock"):
            second = RunDir(tmp_path / "two")
        try:
            # Not taken for a dead host's lock (opened, waited on, then unlinked).
            assert stat.S_ISFIFO((folder / "caplet-run-fifo.lock").lstat().st_mode)
            assert _beacons(folder) == 4
            assert _beacons(apart / f"{folder.name}.1") == 1
            first.publish_code([(tmp_path / "lib1", False)])
            second.publish_code([(tmp_path / "lib2", False)])
            with fifo_released(left / "grants.json"):
                assert (tmp_path / "lib1", False) in second.peer_code()
                assert (tmp_path / "lib2", False) in first.peer_code()
                data = tmp_path / "data"
                data.mkdir()
                first.publish({"writer": _writable(data)})
                plans = second.peer_plans()
            assert "writer (enabled by another caplet process)" in plans
            if ROOT:
                assert "forged (enabled by another caplet process)" not in plans
        finally:
            second.close()
    finally:
        for fd in held:
            os.close(fd)
        first.close()


def _tool(tmp_path: Path) -> tuple[Path, Path]:
    """``/data`` of round 4's story and the program in it another plugin runs."""
    data = tmp_path / "data"
    data.mkdir()
    tool = data / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    give_to_worker(data)
    return data, tool


@pytest.mark.security
@pytest.mark.parametrize("order", ["writer-first", "runner-first"])
def test_hosts_split_by_a_planted_name_still_refuse_a_writer_of_the_others_program(
    apart: Path,
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    order: str,
) -> None:
    """attack28's escape, end to end: two hosts of the user with different homes and
    state directories, split by the planted name. Host A enables a plugin that may
    write ``/data``; host B enables one approved to run ``/data/tool`` (or the other
    order): the writer could rewrite what the runner runs (round 4). Refused, naming
    the other process's plugin; near miss: once it is disabled there, granted here."""
    data, tool = _tool(tmp_path)
    make_runner(make_plugin, tool)
    _writer(make_plugin)
    with contextlib.ExitStack() as stack:
        started: list[PluginHost] = []
        second = while_planted_and_freed(
            apart,
            monkeypatch,
            lambda: started.append(
                stack.enter_context(make_host(plugins_dir, tmp_path / "state-a", launcher))
            ),
            lambda: stack.enter_context(make_host(plugins_dir, tmp_path / "state-b", launcher)),
        )
        (first,) = started
        name = f"caplet-{os.geteuid()}"
        assert (_beacons(apart / f"{name}.1"), _beacons(apart / name)) == (1, 1), "no split"
        first.discover()
        second.discover()
        writer, runner = (first, second) if order == "writer-first" else (second, first)
        if order == "writer-first":
            assert writer.enable("writer", config={"root": str(data)}, consent=True)
            outcome = runner.enable("runner", consent=True)
            other = "writer"
        else:
            assert runner.enable("runner", consent=True)
            outcome = writer.enable("writer", config={"root": str(data)}, consent=True)
            other = "runner"
        assert not outcome, "a plugin of one host may write what a plugin of the other runs"
        assert f"{other} (enabled by another caplet process)" in outcome.reason
        assert str(tool) in outcome.reason
        first_on = writer if order == "writer-first" else runner
        assert first_on.disable(other)
        retried = (
            runner.enable("runner", consent=True)
            if order == "writer-first"
            else writer.enable("writer", config={"root": str(data)}, consent=True)
        )
        assert retried, retried.reason


#: How the user's own meeting folder may come to be one that cannot be checked (as
#: root every folder can be read, whatever its mode).
CANNOT_CHECK = ["opened to others"] + ([] if ROOT else ["made unreadable"])


@pytest.mark.security
@pytest.mark.parametrize("how", CANNOT_CHECK)
def test_a_meeting_folder_that_cannot_be_checked_refuses_what_others_must_know(
    apart: Path,
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    how: str,
) -> None:
    """Host A meets in ``caplet-<uid>``; the user then opens that folder to others
    (``chmod 777``: anyone may have changed or removed what A published) or makes it
    unreadable. Host B, started after, passes it over and meets in ``.1``: A's grants
    were unseen and B enabled a writer over A's runner's program. Now every host
    refuses ``fs.write`` and ``proc.exec`` while it is so, naming the folder, also when
    it happens while an enable waits for consent (the check under the lock). Near
    misses: ``fs.read`` is enabled; the folder made private again is read again."""
    folder = apart / f"caplet-{os.geteuid()}"
    mode = {"opened to others": 0o777, "made unreadable": 0o000}[how]
    data, tool = _tool(tmp_path)
    make_runner(make_plugin, tool)
    for name, kind in (("writer", "fs.write"), ("reader", "fs.read"), ("other", "fs.write")):
        _writer(make_plugin, name, kind)
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(make_host(plugins_dir, tmp_path / "state-a", launcher))
        first.discover()
        assert first.enable("runner", consent=True)
        folder.chmod(mode)
        stack.callback(folder.chmod, 0o700)
        second = stack.enter_context(make_host(plugins_dir, tmp_path / "state-b", launcher))
        assert _beacons(apart / f"{folder.name}.1") == 1, "B met A in its folder"
        second.discover()
        outcome = second.enable("writer", config={"root": str(data)}, consent=True)
        assert not outcome, "a writer was granted while a meeting folder cannot be checked"
        assert f"{folder} is a folder of yours that " in outcome.reason
        assert "the other caplet processes of this user cannot all be checked" in outcome.reason
        assert "plugin 'writer': capability 'fs.write:${config.root}'" in outcome.reason
        # A's own next enable too: its peers may not find it any more.
        again = first.enable("writer", config={"root": str(data)}, consent=True)
        assert not again
        assert f"{folder}, where this process meets the others, is no longer" in again.reason
        reader = second.enable("reader", config={"root": str(data)}, consent=True)
        assert reader, reader.reason
        # Private again: read again, and A's runner is in the way of B's writer.
        folder.chmod(0o700)
        outcome = second.enable("writer", config={"root": str(data)}, consent=True)
        assert not outcome
        assert "runner (enabled by another caplet process)" in outcome.reason
        beside = tmp_path / "beside"
        beside.mkdir()
        give_to_worker(beside)

        def meanwhile(_request: object) -> bool:
            folder.chmod(mode)  # after the plan, before the publication
            return True

        late = second.enable("other", config={"root": str(beside)}, consent=meanwhile)
        folder.chmod(0o700)
        assert not late, "a writer was published while a meeting folder cannot be checked"
        assert f"{folder} is a folder of yours that " in late.reason
        granted = second.enable("other", config={"root": str(beside)}, consent=True)
        assert granted, granted.reason
