"""Starting a worker: only from the enable's verified snapshot, with what it registered checked
and logged (boundedly), and every declared function returned."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import CapletError, LifecycleError, PluginHost, WorkerCrashedError
from tests._host.hostkit import SPIN, SPIN_MODULES
from tests.conftest import PluginFactory


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False) as h:
        yield h


def test_undeclared_modules_and_functions_are_rejected_and_logged(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "sneaky",
        source="""
            def create_functions(config):
                return {
                    "main": {"run": lambda: 1, "hidden": lambda: 2},
                    "extra": {"steal": lambda: 3},
                }
        """,
    )
    host.discover()
    assert host.enable("sneaky", consent=True)
    assert sorted(host.rejected_registrations("sneaky")) == ["extra", "main.hidden"]
    with pytest.raises(LifecycleError, match=r"does not declare main\.hidden"):
        host.call("sneaky", "main.hidden")
    refused = [d.target for d in host.manager.store.decisions("sneaky") if d.action == "register"]
    assert sorted(refused) == ["extra", "main.hidden"]
    assert host.call("sneaky", "main.run") == 1


def test_code_is_loaded_only_from_a_verified_snapshot(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    enabled_hash = host.manager.current_hash("p")
    host.enable("p", consent=True)
    # Swap the code after enable: the running worker keeps its snapshot ...
    (directory / "plugin.py").write_text(SPIN.replace("os.getpid()", "-1"), encoding="utf-8")
    assert host.call("p", "main.pid") > 0
    # ... and a restarted worker loads the enable's own snapshot again (issue
    # 13, point 5): what was audited and consented to, never the changed tree.
    with pytest.raises(WorkerCrashedError):
        host.call("p", "main.crash")
    assert host.call("p", "main.pid") > 0
    assert host.manager.enabled_hash("p") == enabled_hash
    assert host.manager.current_hash("p") != enabled_hash  # the change is seen, not loaded


NOISY = """
def create_functions(config):
    # Thousands of modules the manifest does not declare: each one rejected,
    # each rejection a row in the host's decision log, at every worker start.
    table = {"main": {"run": lambda: "ok"}}
    for index in range(5000):
        table[f"m{index}"] = {}
    return table
"""


def test_rejected_registrations_cannot_flood_the_decision_log(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    # Measured by the red team: 150000 rejected names made 150000 rows (23 MB of
    # state database, 13 s of host time) per worker start, and a worker that
    # os._exit(0)s from a timer thread after answering is restarted by the next
    # call without a breaker failure (nothing ran): a start per call.
    make_plugin("noisy", source=NOISY)
    host.discover()
    for _ in range(3):  # three worker starts
        assert host.enable("noisy", consent=True)
        assert host.call("noisy", "main.run") == "ok"
        assert host.disable("noisy")
    decisions = host.manager.store.decisions("noisy", limit=100_000)
    registers = [d for d in decisions if d.action == "register"]
    assert len(registers) <= 100
    # Still on record: the first names, and how many more there were.
    assert any(d.target == "m0" for d in registers)
    # Each start's collapsed row; the third start's may still be held by the
    # denial rate limit (60 per minute, issue 15) for the summary row written at close.
    assert sum(d.target == "4980 more" for d in registers) >= 2


def test_a_declared_function_create_functions_does_not_return_is_refused_at_enable(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """Issue 15: it was accepted, and still advertised in the agent's system message."""
    make_plugin(
        "partial",
        source="def create_functions(config):\n    return {'main': {'run': lambda: 1}}\n",
        modules='[modules.main]\nfunctions = ["run", "missing", "gone"]\n',
    )
    host.discover()
    outcome = host.enable("partial", consent=True)
    assert not outcome
    assert outcome.reason == (
        "plugin 'partial' declares main.missing, main.gone in its manifest, but "
        "create_functions did not return them; return every declared function, or remove "
        "it from the manifest's [modules]"
    )
    assert host.manager.require_plugin("partial").state.value != "enabled"
    assert "missing" not in host.get_system_message_additions()
    assert host.worker_pid("partial") is None


def test_an_enable_snapshot_rewritten_after_the_enable_is_never_loaded(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    host.enable("p", consent=True)
    assert host.call("p", "main.pid") > 0
    snapshot = host.manager.enabled_snapshot("p")
    assert snapshot is not None
    # The attack: the enable's own snapshot rewritten in place by whoever can
    # reach the host's run directory; every later start must refuse it
    # (checked by the host's copy, or by the jail's, see Launcher.copies_snapshot).
    snapshot.path.chmod(0o700)
    (snapshot.path / "plugin.py").chmod(0o600)
    (snapshot.path / "plugin.py").write_text(SPIN.replace("os.getpid()", "-1"), encoding="utf-8")
    with pytest.raises(WorkerCrashedError):
        host.call("p", "main.crash")
    with pytest.raises(CapletError, match=r"changed (since|after) it was (audited and )?approved"):
        host.call("p", "main.pid")
