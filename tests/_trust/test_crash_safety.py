"""kill -9 during approve, lock and audit leaves the old or the new state (issue 8, point 4).

Each operation runs as a real ``caplet`` process that SIGKILLs itself at one
of its state write steps (the test-only hook of :mod:`caplet._atomic`: the
boundaries of every atomic file write and every SQLite write transaction),
and it is killed at *every* step it has, each time starting from its own
copy of the same state. After each kill: the store opens,
``caplet doctor --check-state`` exits 0, and the state is the old one or the
new one: an approval absent or pinned to the right hash (and never without
the audit it was based on), the lock file's old bytes or a complete new
file, a cached audit absent or complete. Each test also checks that both
outcomes happened, so the kill points really span the operation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from caplet._host._loading import LoadingRules
from caplet._host._manager import PluginManager
from caplet._trust._hashing import tree_hash
from caplet._trust._lockfile import Lockfile, read_lockfile, update_lockfile
from caplet._trust._sqlite import SqliteStore
from tests._audit.llm_server import LLMServer, serve
from tests.conftest import PluginFactory
from tests.crashkit import copy_world, doctor, kill_each, warnings_only, write_steps

PLAIN = LoadingRules()
MODEL_ID = "openai:scripted-model"


def state_args(root: Path) -> list[str]:
    return ["--plugins-dir", str(root / "plugins"), "--state-dir", str(root / "state")]


# -- approve ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_at_every_write_step_of_approve(tmp_path: Path) -> None:
    """From nothing (no state directory yet): create, migrate, audit, approve, log."""
    world = tmp_path / "world"
    PluginFactory(world / "plugins")("hello")
    digest = tree_hash(world / "plugins" / "hello")

    def args(root: Path) -> list[str]:
        return ["approve", "hello", "--yes", "--json", *state_args(root)]

    copy = copy_world(world, tmp_path / "traced")
    steps = write_steps(args(copy), tmp_path / "approve.trace")
    assert any("migration" in s for s in steps)
    assert any("writing the audit of 'hello'" in s for s in steps)
    assert any("writing the approval of 'hello'" in s for s in steps)

    outcomes = set()
    for step, root in kill_each(world, tmp_path, args, range(1, len(steps) + 1)):
        label = steps[step - 1]
        with SqliteStore(root / "state") as store:
            approval = store.get_approval("hello")
            audit = store.get_audit(digest)  # decodes every field, or raises
        warnings_only(doctor(*state_args(root)), "temp-file")
        if approval is not None:
            assert approval.content_hash == digest, label
            assert audit is not None, f"approved without the audit it rests on ({label})"
        if audit is not None:
            assert (audit.plugin, audit.content_hash) == ("hello", digest), label
        outcomes.add(approval is not None)
        # The store is usable as it is: the interrupted approval can be redone.
        with PluginManager(root / "plugins", state_dir=root / "state", loading=PLAIN) as manager:
            manager.discover()
            manager.audit("hello")
            assert manager.approve("hello"), label
    assert outcomes == {False, True}


# -- lock ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_at_every_write_step_of_lock(tmp_path: Path) -> None:
    """The lock file is its old bytes or a complete new file; the other entry survives."""
    world = tmp_path / "world"
    factory = PluginFactory(world / "plugins")
    factory("hello")
    factory("other")
    lockfile = world / "caplet.lock"
    with PluginManager(world / "plugins", state_dir=world / "state", loading=PLAIN) as manager:
        manager.discover()
        for name in ("hello", "other"):
            manager.audit(name)
            assert manager.approve(name)
        entry = manager.lock_entry("other")
        update_lockfile(lockfile, lambda lock: lock.with_entry(entry))
    old = lockfile.read_bytes()
    old_other = read_lockfile(lockfile).entry("other")
    digest = tree_hash(world / "plugins" / "hello")

    def args(root: Path) -> list[str]:
        return ["lock", "hello", "--yes", "--json", *state_args(root)]

    steps = write_steps(args(copy_world(world, tmp_path / "traced")), tmp_path / "lock.trace")
    assert any(s.startswith("atomic_write") and "caplet.lock" in s for s in steps)

    outcomes = set()
    for step, root in kill_each(world, tmp_path, args, range(1, len(steps) + 1)):
        label = steps[step - 1]
        path = root / "caplet.lock"
        report = doctor(*state_args(root))
        warnings_only(report, "temp-file")
        leftovers = [p["path"] for p in report["problems"]]
        if path.read_bytes() == old:
            outcomes.add("old")
        else:
            lock = read_lockfile(path)
            assert lock.names == ("hello", "other"), label
            hello = lock.entry("hello")
            assert hello is not None
            assert hello.digest == digest, label
            assert lock.entry("other") == old_other, label
            outcomes.add("new")
        if "temporary file" in label and "caplet.lock" in label:
            assert any(".caplet.lock." in p for p in leftovers), (label, leftovers)
        # Still usable: pinning again works.
        with PluginManager(root / "plugins", state_dir=root / "state", loading=PLAIN) as manager:
            manager.discover()
            update_lockfile(path, partial(Lockfile.with_entry, entry=manager.lock_entry("hello")))
        assert read_lockfile(path).names == ("hello", "other")
    assert outcomes == {"old", "new"}


# -- audit ----------------------------------------------------------------------------------------


@pytest.fixture
def llm() -> Iterator[LLMServer]:
    yield from serve()


@pytest.mark.slow
def test_kill_9_at_every_write_step_of_an_llm_audit(tmp_path: Path, llm: LLMServer) -> None:
    """The cached deep audit is absent or complete (canaries verified), never half-written."""
    world = tmp_path / "world"
    PluginFactory(world / "plugins")("hello")
    SqliteStore(world / "state").close()
    digest = tree_hash(world / "plugins" / "hello")
    env = {
        "CAPLET_LLM_PROVIDER": "openai",
        "CAPLET_LLM_BASE_URL": llm.url,
        "CAPLET_LLM_MODEL": "scripted-model",
    }

    def args(root: Path) -> list[str]:
        return ["audit", "hello", "--json", *state_args(root)]

    steps = write_steps(
        args(copy_world(world, tmp_path / "traced")), tmp_path / "audit.trace", env=env
    )
    assert any("writing the audit of 'hello'" in s for s in steps)

    outcomes = set()
    points = range(1, len(steps) + 1)
    for step, root in kill_each(world, tmp_path, args, points, env=env):
        label = steps[step - 1]
        with SqliteStore(root / "state") as store:
            audit = store.get_audit(digest, MODEL_ID)
        warnings_only(doctor(*state_args(root)), "temp-file")
        if audit is not None:
            assert audit.model_id == MODEL_ID, label
            assert audit.canary_status is not None, label
            assert audit.canary_status.value == "OK", label
        outcomes.add(audit is not None)
    assert outcomes == {False, True}
    assert len(llm.exchanges) == 1 + len(points), "one model answer per run"
    assert os.environ.get("CAPLET_LLM_BASE_URL") is None, "the suite itself stays static-only"
