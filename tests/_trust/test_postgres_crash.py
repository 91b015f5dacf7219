"""kill -9 during writes to a PostgreSQL store leaves the old state or the new one (issue 18).

The same method as tests/_trust/test_crash_safety.py: a real ``caplet``
process (here with ``CAPLET_STORE`` naming a PostgreSQL database) lists its
write steps in one traced run (every transaction of the store reports
"begun", "statements run, not committed" and "committed" through
:func:`caplet._atomic.write_step`), then a fresh copy of the same starting
state is killed by SIGKILL at each step. A copy is a database made from a
template of the starting one, plus a copy of the node's plugins and state
directory. After each kill the server has rolled the cut transaction back:
the store opens, ``caplet doctor --check-state`` exits 0, and an approval is
either absent or pinned to the right hash with the audit it rests on.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from caplet._host._loading import LoadingRules
from caplet._host._manager import PluginManager
from caplet._trust._hashing import tree_hash
from caplet._trust._postgres import PostgresStore
from tests.conftest import PluginFactory
from tests.crashkit import copy_world, doctor, kill_at, write_steps
from tests.pgserver import PgServer

PLAIN = LoadingRules()


def state_args(root: Path) -> list[str]:
    return ["--plugins-dir", str(root / "plugins"), "--state-dir", str(root / "state")]


def copy_database(server: PgServer, template: str) -> str:
    """A new database holding exactly what *template* holds; its URL."""
    name = f"k_{uuid.uuid4().hex[:12]}"
    server.psql(f"CREATE DATABASE {name} TEMPLATE {template}")
    return server.url(name)


@pytest.mark.slow
def test_kill_9_at_every_write_step_of_approve_on_postgres(
    tmp_path: Path, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From an empty database: create the schema, audit, approve, log; killed at each step."""
    world = tmp_path / "world"
    PluginFactory(world / "plugins")("hello")
    digest = tree_hash(world / "plugins" / "hello")
    template = f"tpl_{uuid.uuid4().hex[:12]}"
    pg_server.psql(f"CREATE DATABASE {template}")

    def args(root: Path) -> list[str]:
        return ["approve", "hello", "--yes", "--json", *state_args(root)]

    traced = copy_database(pg_server, template)
    steps = write_steps(
        args(copy_world(world, tmp_path / "traced")),
        tmp_path / "approve.trace",
        env={"CAPLET_STORE": traced},
    )
    assert any(s.startswith("postgres ") and "migration" in s for s in steps)
    assert any("writing the audit of 'hello'" in s for s in steps)
    assert any("writing the approval of 'hello'" in s for s in steps)

    outcomes = set()
    for step in range(1, len(steps) + 1):
        label = steps[step - 1]
        url = copy_database(pg_server, template)
        root = copy_world(world, tmp_path / f"run-{step}")
        kill_at(args(root), step, env={"CAPLET_STORE": url})
        with PostgresStore(url) as store:
            assert store.check() == (), label
            approval = store.get_approval("hello")
            audit = store.get_audit(digest)  # decodes every field, or raises
        monkeypatch.setenv("CAPLET_STORE", url)
        report = doctor(*state_args(root))
        assert report["store"] == url
        assert report["problems"] == [], label
        if approval is not None:
            assert approval.content_hash == digest, label
            assert audit is not None, f"approved without the audit it rests on ({label})"
        if audit is not None:
            assert (audit.plugin, audit.content_hash) == ("hello", digest), label
        outcomes.add(approval is not None)
        # The store is usable as it is: the interrupted approval can be redone.
        with PluginManager(
            root / "plugins", state_dir=root / "state", loading=PLAIN, store=url
        ) as manager:
            manager.discover()
            manager.audit("hello")
            assert manager.approve("hello"), label
    assert outcomes == {False, True}
