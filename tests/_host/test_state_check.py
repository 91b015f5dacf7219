"""check_state: every part of caplet's state checked, damage told apart from warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet import PluginManager, ProblemKind, StateReport, check_state
from caplet._host._journal import (
    JOURNAL_DIR,
    UpdateJournal,
    UpdateStep,
    holding_update_lock,
    write_journal,
)
from caplet._host._loading import LoadingRules
from caplet._trust._keyring import KEYRING_DIR
from caplet._trust._lockfile import update_lockfile
from caplet._trust._sqlite import DB_FILENAME
from tests.conftest import PluginFactory

PLAIN = LoadingRules()


@pytest.fixture
def approved(make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path) -> Path:
    """Plugin hello audited, approved and pinned; returns the lock file."""
    make_plugin("hello")
    lockfile = plugins_dir.parent / "caplet.lock"
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN) as manager:
        manager.discover()
        manager.audit("hello")
        assert manager.approve("hello")
        entry = manager.lock_entry("hello")
        update_lockfile(lockfile, lambda lock: lock.with_entry(entry))
    return lockfile


def kinds(report: StateReport) -> list[ProblemKind]:
    return [p.kind for p in report.problems]


def test_no_state_yet_is_healthy_and_stays_absent(tmp_path: Path) -> None:
    state = tmp_path / "state"
    report = check_state(state, lockfile=tmp_path / "caplet.lock")
    assert report.ok
    assert report
    assert report.problems == ()
    assert report.database is None
    assert not state.exists(), "checking never creates the state"


def test_the_default_state_dir_is_the_managers() -> None:
    report = check_state()
    assert report.ok
    assert report.state_dir == Path.home() / ".local" / "state" / "caplet"
    assert report.lockfile is None


def test_healthy_state(approved: Path, state_dir: Path) -> None:
    report = check_state(state_dir, lockfile=approved)
    assert report.problems == ()
    assert report.database == state_dir / DB_FILENAME
    assert report.lockfile == approved


def test_leftover_temporary_files_are_warnings_naming_the_fix(
    approved: Path, state_dir: Path
) -> None:
    leftovers = [
        state_dir / ".caplet.db.abcd1234.tmp",
        state_dir / JOURNAL_DIR / ".hello.json.abcd1234.tmp",
        state_dir / KEYRING_DIR / ".0123456789ABCDEF.pub.abcd1234.tmp",
        approved.parent / ".caplet.lock.abcd1234.tmp",
    ]
    for path in leftovers:
        path.parent.mkdir(exist_ok=True)
        path.write_text("half")
    (approved.parent / ".notes.txt.abcd1234.tmp").write_text("not caplet's: not reported")
    report = check_state(state_dir, lockfile=approved)
    assert report.ok
    assert report.damaged == ()
    assert [p.path for p in report.warnings] == [str(p) for p in leftovers]
    assert kinds(report) == [ProblemKind.TEMP_FILE] * 4
    message = report.warnings[-1].message
    assert f"temporary file {leftovers[-1]} is left from a write that was interrupted" in message
    assert f"delete it (rm {leftovers[-1]}) when no caplet command is running" in message


def test_a_database_that_cannot_be_opened_is_damage(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    db = state_dir / DB_FILENAME
    db.write_bytes(b"this is not SQLite" * 300)
    report = check_state(state_dir)
    assert not report.ok
    (problem,) = report.damaged
    assert problem.kind is ProblemKind.CORRUPT
    assert problem.path == str(db)
    assert f"state database {db} is corrupt or not a caplet database" in problem.message
    assert f"mv {db} {db}.bak" in problem.message
    assert db.read_bytes() == b"this is not SQLite" * 300


def test_a_bad_trusted_key_file_is_damage(approved: Path, state_dir: Path) -> None:
    keys = state_dir / KEYRING_DIR
    keys.mkdir()
    (keys / "0123456789ABCDEF.pub").write_text("not a key\n")
    report = check_state(state_dir, lockfile=approved)
    (problem,) = report.damaged
    assert problem.kind is ProblemKind.RECORD
    assert problem.path == str(keys)
    assert f"trusted key file {keys / '0123456789ABCDEF.pub'} cannot be used" in problem.message
    assert "caplet trust remove 0123456789ABCDEF" in problem.message


def test_a_broken_lock_file_is_damage(approved: Path, state_dir: Path) -> None:
    approved.write_text(approved.read_text().replace('verdict = "approve"', 'verdict = "maybe"'))
    report = check_state(state_dir, lockfile=approved)
    (problem,) = report.damaged
    assert problem.kind is ProblemKind.LOCKFILE
    assert f"lock file {approved}, plugin 'hello', field 'verdict'" in problem.message


def _interrupted(plugins_dir: Path, state_dir: Path, step: UpdateStep) -> Path:
    live = plugins_dir / "hello"
    write_journal(
        state_dir,
        UpdateJournal(
            plugin="hello",
            step=step,
            plugin_dir=str(live),
            work_dir=str(plugins_dir / ".caplet-update-hello"),
            old_digest="sha256-" + "0" * 64,
        ),
    )
    return state_dir / JOURNAL_DIR / "hello.json"


@pytest.mark.parametrize(
    ("step", "how"),
    [(UpdateStep.STAGED, "rolls it back"), (UpdateStep.COMMITTED, "rolls it forward")],
)
def test_an_interrupted_update_is_a_warning_naming_the_command_that_finishes_it(
    approved: Path, plugins_dir: Path, state_dir: Path, step: UpdateStep, how: str
) -> None:
    journal = _interrupted(plugins_dir, state_dir, step)
    report = check_state(state_dir, lockfile=approved)
    assert report.ok
    (problem,) = report.warnings
    assert problem.kind is ProblemKind.UNFINISHED_UPDATE
    assert problem.path == str(journal)
    assert f"the update of plugin 'hello' was interrupted at step {step.value}" in problem.message
    assert (
        f"the next caplet command that discovers plugins {how}: run `caplet list "
        f"--plugins-dir {plugins_dir} --state-dir {state_dir}`"
    ) in problem.message
    assert journal.exists(), "checking does not recover"
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN) as manager:
        manager.discover()  # what the named command does
    assert check_state(state_dir, lockfile=approved).problems == ()


def test_an_update_running_now_is_left_alone(
    approved: Path, plugins_dir: Path, state_dir: Path
) -> None:
    journal = _interrupted(plugins_dir, state_dir, UpdateStep.SWAPPING)
    with holding_update_lock(state_dir, "hello", blocking=True):
        report = check_state(state_dir, lockfile=approved)
    assert report.ok
    (problem,) = report.warnings
    assert problem.kind is ProblemKind.UNFINISHED_UPDATE
    assert "plugin 'hello' is being updated by another caplet process right now" in (
        problem.message
    )
    assert journal.exists()


def test_an_unreadable_journal_is_damage(approved: Path, state_dir: Path) -> None:
    journal = state_dir / JOURNAL_DIR / "hello.json"
    journal.parent.mkdir(mode=0o700)
    journal.write_text('{"plugin": "hello", "step": "sideways"}')
    report = check_state(state_dir, lockfile=approved)
    assert not report.ok
    (problem,) = report.damaged
    assert problem.kind is ProblemKind.JOURNAL
    assert f"update journal {journal} cannot be read" in problem.message
    assert "then delete the journal" in problem.message


def test_a_state_directory_the_system_cannot_take_is_a_problem_not_an_oserror(
    tmp_path: Path,
) -> None:
    """check_state never raises for what it finds; a name longer than the file system's
    limit made its first exists() raise OSError (issue 13)."""
    directory = tmp_path / ("n" * 300)
    report = check_state(directory)
    [problem] = report.problems
    assert problem.kind is ProblemKind.CORRUPT
    assert problem.damaged
    assert problem.message == (
        f"the state directory {directory} cannot be examined (File name too long); pass a "
        "state directory caplet can reach (--state-dir or CAPLET_STATE_DIR)"
    )


# -- a shared PostgreSQL store (issue 18) ----------------------------------------------------------


def test_shared_store_is_checked_on_the_server(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, pg_url: str
) -> None:
    import psycopg

    make_plugin("hello")
    with PluginManager(plugins_dir, state_dir=state_dir, loading=PLAIN, store=pg_url) as manager:
        manager.discover()
        manager.audit("hello")
        assert manager.approve("hello")
    report = check_state(state_dir, store=pg_url)
    assert report.ok
    assert report.problems == ()
    assert (report.store, report.database) == (pg_url, None)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE caplet.approvals SET content_hash = 'sha256-bogus'")
    report = check_state(state_dir, store=pg_url)
    assert kinds(report) == [ProblemKind.RECORD]
    assert "row 'hello' of table approvals is invalid" in report.problems[0].message
    assert not (state_dir / DB_FILENAME).exists(), "the node's state directory has no database"


def test_caplet_store_names_the_store_checked(
    monkeypatch: pytest.MonkeyPatch, state_dir: Path, pg_url: str
) -> None:
    monkeypatch.setenv("CAPLET_STORE", pg_url)
    report = check_state(state_dir)
    assert report.ok
    assert report.store == pg_url


def test_unreachable_shared_store_is_damage(state_dir: Path, tmp_path: Path) -> None:
    url = f"postgresql://caplet:secret@/caplet?host={tmp_path}"
    report = check_state(state_dir, store=url)
    assert kinds(report) == [ProblemKind.UNREACHABLE]
    assert not report.ok
    assert "cannot be reached while opening" in report.problems[0].message
    assert "secret" not in report.problems[0].message
    assert report.store == f"postgresql://caplet:***@/caplet?host={tmp_path}"


def test_a_store_address_caplet_cannot_use_is_reported(state_dir: Path) -> None:
    report = check_state(state_dir, store="mysql://root:pw@db/caplet")
    assert kinds(report) == [ProblemKind.CORRUPT]
    assert "caplet has no store of kind 'mysql'" in report.problems[0].message
    assert "pw@" not in report.problems[0].path
