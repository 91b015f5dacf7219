"""The folders where every caplet process of one user meets its peers (attack24).

Named by the uid alone (``caplet-<uid>`` in ``/run/user/<uid>`` and ``/tmp``), so
another user may make one first: a link to a folder of theirs, a folder of
theirs, one others may write. Each is refused through the descriptor it was
opened by, no beacon is made in it, and a host left without any meeting folder
says so and shares no writable grant or program.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from caplet._host._meeting import PEER_BASES_ENV, open_meetings
from caplet._host._run_dir import RunDir
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import ROOT, PluginFactory, give_to_worker, rooted

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
    meetings = open_meetings()
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
    (meeting,) = open_meetings()
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
        # The refused name or the alternate the host met in beside it (either is guarded).
        assert re.search(
            rf"contains {re.escape(str(folder))}(\.1)?, another caplet state directory",
            outcome.reason,
        ), outcome.reason


@pytest.mark.security
@pytest.mark.xfail(
    strict=True,
    reason="attack28, open: a host that found no folder of its own makes the first free "
    "name; one who plants and removes caplet-<uid> around another host's start splits them",
)
def test_a_name_planted_and_freed_while_two_hosts_start_does_not_split_them(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host B looks (pass 1: no folder of the user's own yet); another user plants
    ``caplet-<uid>``; host A starts, passes it over and makes ``.1``; the planted folder
    is removed; B, now making the first free name, makes ``caplet-<uid>``. The two never
    see each other (a grant of one over the other's code folders is not refused, attack24's
    reason for meeting at all), and every later host joins B's."""
    planted = base / f"caplet-{os.geteuid()}"
    real_mkdir = os.mkdir
    first_host: list[tuple[Path, int]] = []

    def between_the_passes(path: object, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if not first_host and dir_fd is not None:
            # B is past its first pass: the attacker's turn, then host A's whole start.
            monkeypatch.setattr(os, "mkdir", real_mkdir)
            planted.mkdir()
            planted.chmod(0o777)
            (meeting,) = open_meetings()
            first_host.append((meeting.name, meeting.fd))
            planted.rmdir()
        real_mkdir(path, mode, dir_fd=dir_fd)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", between_the_passes)
    (second,) = open_meetings()
    [(first_name, first_fd)] = first_host
    os.close(first_fd)
    os.close(second.fd)
    assert first_name == base / f"caplet-{os.geteuid()}.1"
    assert second.name == first_name, f"split: {first_name} and {second.name}"
