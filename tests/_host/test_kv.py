"""``ctx.kv`` and quarantine belong to a plugin's identity, its name *and* where it is
(decide14), through real hosts, real workers and one real SQLite state directory."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import msgpack
import pytest

from caplet import PluginHost
from caplet._host._loading import LoadingRules
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._trust._problems import ProblemKind
from caplet._trust._sqlite import SqliteStore
from tests.conftest import make_distribution

KV = """
def create_functions(config):
    def put(ctx, key, value):
        ctx.kv.set(key, value)
        return ctx.kv.get(key)

    def get(ctx, key):
        return ctx.kv.get(key, "absent")

    def keys(ctx):
        return ctx.kv.keys()

    return {"main": {"put": put, "get": get, "keys": keys}}
"""

MANIFEST = """
name = "notes"
version = "1.0.0"
description = "Keeps notes."

[modules.main]
functions = ["put", "get", "keys"]
"""


def project(root: Path, source: str = KV) -> Path:
    """A project's plugins directory holding a plugin ``notes`` with *source*."""
    plugin = root / "plugins" / "notes"
    plugin.mkdir(parents=True)
    (plugin / "plugin.toml").write_text(MANIFEST)
    (plugin / "plugin.py").write_text(source)
    return root / "plugins"


@contextmanager
def hosts(
    state_dir: Path, launcher: SandboxLauncher, *plugins_dirs: Path
) -> Iterator[list[PluginHost]]:
    """One host per plugins directory, all on one state directory (one user's)."""
    with ExitStack() as stack:
        made = []
        for directory in plugins_dirs:
            host = PluginHost(
                directory,
                state_dir=state_dir,
                launcher=launcher,
                discover=False,
                auditor=None,
                loading=LoadingRules(),
            )
            stack.enter_context(host)
            host.discover()
            made.append(host)
        yield made


@pytest.mark.security
def test_another_projects_plugin_of_the_same_name_never_sees_its_kv(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """decide14: ctx.kv was keyed by plugin name. Project Y's `notes` (another author,
    elsewhere on disk) is another plugin and needs consent (attack13d); once a person
    consented to *it*, it read and overwrote the tokens project X's `notes` had stored."""
    theirs = KV.replace('"absent"', '"absent in y"')
    x_dir, y_dir = project(tmp_path / "x"), project(tmp_path / "y", theirs)
    with hosts(state_dir, launcher, x_dir, y_dir) as (x, y):
        assert x.enable("notes", consent=True)
        assert x.call("notes", "main.put", "token", "x's secret") == "x's secret"
        assert y.enable("notes", consent=True), "a person consented to Y's plugin itself"
        assert y.call("notes", "main.get", "token") == "absent in y", "X's token leaked to Y"
        assert y.call("notes", "main.keys") == []
        assert y.call("notes", "main.put", "token", "y's") == "y's"
        assert x.call("notes", "main.get", "token") == "x's secret", "Y overwrote X's token"
        assert y.call("notes", "main.get", "token") == "y's"


@pytest.mark.security
def test_a_quarantine_of_one_plugin_neither_blocks_nor_is_released_by_another(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """decide14: quarantine was keyed by plugin name. Y's `notes` could be quarantined (a
    breaker it trips on purpose) and so take X's out of service, and `caplet release notes`
    in Y lifted the quarantine of X's."""
    theirs = KV.replace('"absent"', '"absent in y"')  # another author's code
    x_dir, y_dir = project(tmp_path / "x"), project(tmp_path / "y", theirs)
    with hosts(state_dir, launcher, x_dir, y_dir) as (x, y):
        assert x.quarantine("notes", "tripped in x")
        x.discover()
        y.discover()
        assert not x.enable("notes", consent=True)
        assert y.enable("notes", consent=True), "X's quarantine blocked Y's plugin"
        info = y.get_plugin("notes")
        assert info is not None
        assert info.quarantine is None
        assert not y.release("notes"), "Y's plugin was never quarantined"
        x.discover()
        refused = x.enable("notes", consent=True)
        assert not refused, "Y's release lifted X's quarantine"
        assert "plugin 'notes' is quarantined (tripped in x)" in refused.reason
        assert y.quarantine("notes", "tripped in y")
        assert x.release("notes")
        x.discover()
        assert x.enable("notes", consent=True), "X's own release lifts X's quarantine"
        y.discover()
        assert not y.enable("notes", consent=True), "and leaves Y's in force"


def test_the_same_plugin_keeps_its_kv_and_its_quarantine_across_hosts(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """Near miss: the same plugin in the same place, in the next process, is itself."""
    x_dir = project(tmp_path / "x")
    with hosts(state_dir, launcher, x_dir) as (x,):
        assert x.enable("notes", consent=True)
        x.call("notes", "main.put", "token", "kept")
    with hosts(state_dir, launcher, x_dir) as (x,):
        assert x.enable("notes", consent=True)
        assert x.call("notes", "main.get", "token") == "kept"
        assert x.quarantine("notes", "tripped")
    with hosts(state_dir, launcher, x_dir) as (x,):
        assert not x.enable("notes", consent=True)
        assert x.release("notes")
        x.discover()
        assert x.enable("notes", consent=True)
        assert x.call("notes", "main.get", "token") == "kept"


def approve(host: PluginHost, name: str) -> None:
    host.discover()
    host.audit(name)
    outcome = host.approve(name)
    assert outcome, outcome.reason


@pytest.mark.security
def test_entries_written_before_places_go_to_the_plugin_its_approval_vouches_for(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """Rows written before caplet kept places, whose approval named none (schema 9 leaves
    them unlocated), are claimed by the approved content itself, enabled on that approval;
    never by another project's plugin of that name, whether a person consented to it for
    one process or the old approval (compared with no place, attack13d) carried over to
    it."""
    theirs = KV.replace("ctx.kv.get(key", "{}.get(key")  # other code, the same manifest
    x_dir, y_dir = project(tmp_path / "x"), project(tmp_path / "y", theirs)
    with hosts(state_dir, launcher, x_dir, y_dir) as (x, y):
        store = x.manager.store
        # What the migration leaves of an older caplet's row: the plugin's name, no place.
        old = msgpack.packb("x's secret")
        assert store.kv_put("notes", "token", old, max_keys=9, max_bytes=99).stored
        approve(x, "notes")
        record = store.get_approval("notes")
        assert record is not None
        store.put_approval(dataclasses.replace(record, location=None))  # approved before 8
        carried = y.enable("notes")
        assert carried, carried.reason
        assert "carried over" in carried.reason, "an approval older than places, as before"
        assert y.call("notes", "main.keys") == [], "a carry-over claims nothing"
        y.disable("notes")
        y.discover()
        assert y.enable("notes", consent=True)
        assert y.call("notes", "main.keys") == [], "a one-off consent claims nothing"
        assert x.enable("notes"), "X's own plugin, on its approval"
        assert x.call("notes", "main.get", "token") == "x's secret"
        assert y.call("notes", "main.get", "token") == "absent"
        [claim] = [d for d in store.decisions("notes") if d.action == "kv"]
        assert claim.target == str((x_dir / "notes").resolve())
        assert claim.detail == (
            "claimed 1 ctx.kv entries written before caplet kept plugin places, on the "
            "approval of this plugin"
        )


def test_a_quarantine_stops_the_same_content_wherever_it_runs(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """Near miss: a quarantine records the content it stopped, and stops that content
    under its name elsewhere too (the same code misbehaves alike; a fleet's nodes keep
    their plugins at other paths); a release where that content runs lifts it."""
    x_dir, y_dir = project(tmp_path / "x"), project(tmp_path / "y")  # the same bytes
    with hosts(state_dir, launcher, x_dir, y_dir) as (x, y):
        assert x.quarantine("notes", "tripped in x")
        y.discover()
        refused = y.enable("notes", consent=True)
        assert not refused
        assert "plugin 'notes' is quarantined (tripped in x)" in refused.reason
        assert y.release("notes")
        x.discover()
        assert x.enable("notes", consent=True)


#: The KV plugin's calls as one function: a distribution's manifest declares ``main.run``.
DIST_KV = """
def create_functions(config):
    def run(ctx, op, key, value=None):
        if op == "put":
            ctx.kv.set(key, value)
        return ctx.kv.get(key, "absent")

    return {"main": {"run": run}}
"""


@contextmanager
def environment_host(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher, site: Path
) -> Iterator[PluginHost]:
    """A host finding installed plugins in *site* only (and an empty plugins directory)."""
    empty = tmp_path / f"no-plugins-{len(list(tmp_path.glob('no-plugins-*')))}"
    empty.mkdir()
    with PluginHost(
        empty,
        state_dir=state_dir,
        launcher=launcher,
        discover=False,
        auditor=None,
        loading=LoadingRules(),
        dist_path=[site],
    ) as host:
        host.discover()
        yield host


@pytest.mark.security
def test_another_environments_distribution_of_the_same_name_is_another_plugin(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """attack15: an installed plugin's place was `distribution NAME`, the same in every
    environment. A cloned project's virtual environment installing a fork under the same
    distribution name (other code, nothing widened) was enabled on the operator's approval
    with no question ("carried over") and read the original's ctx.kv."""
    ours = tmp_path / "app" / ".venv" / "lib" / "python3.11" / "site-packages"
    theirs = tmp_path / "clone" / ".venv" / "lib" / "python3.11" / "site-packages"
    make_distribution(ours, source=DIST_KV)
    make_distribution(theirs, source=DIST_KV.replace('"absent"', '"absent in the fork"'))
    with environment_host(tmp_path, state_dir, launcher, ours) as app:
        approve(app, "hello")
        assert app.enable("hello")
        assert app.call("hello", "main.run", "put", "token", "app's secret") == "app's secret"
    with environment_host(tmp_path, state_dir, launcher, theirs) as clone:
        refused = clone.enable("hello")
        assert not refused, "the fork was enabled on another environment's approval"
        assert "consent" in refused.reason, refused.reason
        assert clone.enable("hello", consent=True), "a person consented to the fork itself"
        assert clone.call("hello", "main.run", "get", "token") == "absent in the fork"
    # The near miss: the approved plugin in its own environment, in the next process (a new
    # Python in the same environment is the same place: tests/_trust/test_source.py).
    with environment_host(tmp_path, state_dir, launcher, ours) as app:
        assert app.enable("hello"), "its own approval"
        assert app.call("hello", "main.run", "get", "token") == "app's secret"
        place = app.manager.require_plugin("hello").location
        assert place == f"distribution acme-plugins in {(tmp_path / 'app' / '.venv').resolve()}"


@pytest.mark.security
def test_entries_at_an_installed_plugins_place_without_environment_go_to_its_approval(
    tmp_path: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    """Rows stored at `distribution NAME` (the place before attack15) are read by no
    plugin until one is approved in its environment: then they are its own, on that
    person's decision, never by a one-off consent."""
    ours = tmp_path / "app" / ".venv" / "lib" / "python3.11" / "site-packages"
    make_distribution(ours, source=DIST_KV)
    with environment_host(tmp_path, state_dir, launcher, ours) as app:
        store = app.manager.store
        assert isinstance(store, SqliteStore)
        old = msgpack.packb("kept since decide14")
        stored = store.kv_put(
            "hello", "token", old, max_keys=9, max_bytes=99, location="distribution acme-plugins"
        )
        assert stored.stored
        [unclaimed] = [p.message for p in store.check() if p.kind is ProblemKind.UNCLAIMED]
        assert (
            "1 ctx.kv entries of plugin 'hello' were stored at 'distribution acme-plugins' "
            "before caplet kept an installed plugin's environment and belong to no plugin yet"
        ) in unclaimed
        assert app.enable("hello", consent=True)
        assert app.call("hello", "main.run", "get", "token") == "absent", "a one-off consent"
        app.disable("hello")
        approve(app, "hello")
        assert app.enable("hello")
        assert app.call("hello", "main.run", "get", "token") == "kept since decide14"
        [claim] = [d for d in store.decisions("hello") if d.action == "kv"]
        assert claim.detail.startswith("claimed 1 ctx.kv entries")
        assert not [p for p in store.check() if p.kind is ProblemKind.UNCLAIMED]
