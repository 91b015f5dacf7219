"""Recovery of interrupted updates: dead updates are finished, live ones are left alone."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from caplet import PluginManager
from caplet._audit._model import Verdict
from caplet._errors import StoreError
from caplet._findings import RiskLevel
from caplet._host._journal import JOURNAL_DIR, UpdateJournal, UpdateStep, write_journal
from caplet._host._loading import LoadingRules
from caplet._trust._hashing import tree_hash
from caplet._trust._sqlite import SqliteStore
from caplet._trust._store import ApprovalRecord
from tests.conftest import PluginFactory


def interrupted(plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory) -> Path:
    """A plugin whose old folder was moved out and new one moved in, then the process died."""
    old = make_plugin("p")
    digest = tree_hash(old)
    work = plugins_dir / ".caplet-update-p"
    journal = UpdateJournal(
        plugin="p",
        step=UpdateStep.SWAPPING,
        plugin_dir=str(old),
        work_dir=str(work),
        old_digest=digest,
    )
    journal.backup_dir.parent.mkdir(parents=True)
    old.rename(journal.backup_dir)
    make_plugin("p", source="def create_functions(config):\n    return {}\n")
    write_journal(state_dir, journal)
    return work


def test_a_dead_update_is_rolled_back_at_the_next_discovery(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    work = interrupted(plugins_dir, state_dir, make_plugin)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        assert "run(*args" in (plugins_dir / "p" / "plugin.py").read_text(), "the old version"
    assert not work.exists()
    assert not list((state_dir / JOURNAL_DIR).glob("*.json"))


def test_a_rolled_back_update_restores_the_approval_with_its_defaults(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    # The journal carries both approvals through a crash; the defaults an
    # approval recorded (red-team finding 8) must come back with it.
    work = interrupted(plugins_dir, state_dir, make_plugin)
    journal_path = state_dir / JOURNAL_DIR / "p.json"
    journal = TypeAdapter(UpdateJournal).validate_json(journal_path.read_bytes())
    old = ApprovalRecord(
        name="p",
        content_hash=journal.old_digest,
        capabilities=("fs.read:${config.root}",),
        approved_at=1.0,
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        version="1.0.0",
        requires=(),
        defaults=(("root", "/srv/data"), ("port", 8443.0), ("flag", None)),
    )
    new = dataclasses.replace(old, content_hash="sha256-" + "c" * 64, defaults=(("root", "/"),))
    recorded = dataclasses.replace(
        journal, step=UpdateStep.RECORDED, old_approval=old, new_approval=new
    )
    write_journal(state_dir, recorded)
    with SqliteStore(state_dir) as store:
        store.put_approval(new)  # the crash came after the store was rewritten
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
        assert manager.store.get_approval("p") == old
    assert not work.exists()


def test_a_live_update_of_another_process_is_left_alone(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    work = interrupted(plugins_dir, state_dir, make_plugin)
    holder_code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from caplet._host._journal import holding_update_lock
        with holding_update_lock(Path({str(state_dir)!r}), "p", blocking=True):
            print("held", flush=True)
            sys.stdin.readline()
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", holder_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
            manager.discover()
        assert work.exists(), "a live update's work folder is not touched"
        assert (state_dir / JOURNAL_DIR / "p.json").exists()
        holder.kill()
        holder.wait()
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
    assert not work.exists()


def test_a_corrupt_journal_is_reported_not_guessed(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    (state_dir / JOURNAL_DIR).mkdir(parents=True)
    journal = state_dir / JOURNAL_DIR / "p.json"
    journal.write_text("{not json")
    with (
        PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager,
        pytest.raises(StoreError) as info,
    ):
        manager.discover()
    assert f"update journal {journal} cannot be read" in str(info.value)
    assert "then delete the journal" in str(info.value)


def test_recovery_never_follows_a_link_put_at_the_work_folders_name(
    plugins_dir: Path, state_dir: Path, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # attack14: an update died with the old folder in `.caplet-update-p/old/p`; whoever
    # can write the plugins directory renamed the work folder away and put a link in its
    # place, to a folder holding an `old/p` of their own. Recovery followed it: their
    # folder became the plugin, the new version was moved into their directory (a
    # `discard` folder made there by the host) and the real old version was lost.
    work = interrupted(plugins_dir, state_dir, make_plugin)
    kept = plugins_dir / "moved-away"
    work.rename(kept)
    theirs = tmp_path / "theirs"
    make_plugin("p", source="def create_functions(config):\n    return {'x': {}}\n")
    (theirs / "old").mkdir(parents=True)
    (plugins_dir / "p").rename(theirs / "old" / "p")
    make_plugin("p", source="def create_functions(config):\n    return {}\n")
    new = tree_hash(plugins_dir / "p")
    work.symlink_to(theirs)
    with PluginManager(plugins_dir, state_dir=state_dir, loading=LoadingRules()) as manager:
        manager.discover()
    assert tree_hash(plugins_dir / "p") == new, "the folder in place stays, nothing of theirs"
    assert sorted(p.name for p in theirs.iterdir()) == ["old"], "nothing moved into theirs"
    assert sorted(p.name for p in (theirs / "old").iterdir()) == ["p"]
    assert (kept / "old" / "p" / "plugin.py").exists(), "the old version is where it was"
    assert not work.is_symlink(), "the link is removed, not followed"
    assert not list((state_dir / JOURNAL_DIR).glob("*.json"))
