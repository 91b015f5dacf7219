"""steer31's open row: a hook's priority is not part of what an approval pins.

An approval records the events a plugin subscribes to (``ApprovalRecord.hooks``), not
where its handler runs among the others. A new version that moves its hook on an
``ABORT`` event from last to first carries over ("nothing widened") and stops every other
subscriber before it runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import HookCallStatus, PluginHost
from tests._host.test_hooks import EVENT, hook_plugin
from tests.conftest import PluginFactory


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False) as h:
        yield h


@pytest.mark.security
@pytest.mark.xfail(
    strict=True,
    reason="steer31 open: a hook moved to run first on an ABORT event carries over an "
    "approval (ApprovalRecord.hooks records events, not priorities) and stops the others",
)
def test_a_hook_moved_ahead_of_the_others_needs_consent(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    hook_plugin(make_plugin, "logger", priority=500)
    sorter = hook_plugin(make_plugin, "sorter", handler="boom", priority=900)
    host.discover()
    for name in ("logger", "sorter"):
        host.audit(name)
        assert host.approve(name)
        assert host.enable(name)
    host.define_hook(EVENT, error_policy="abort")
    before = host.emit(EVENT, {"id": 1})
    assert before["logger"].status is HookCallStatus.OK  # approved: it runs last
    assert host.disable("sorter")
    manifest = sorter / "plugin.toml"
    manifest.write_text(manifest.read_text().replace("priority = 900", "priority = 0"))
    host.discover()
    host.audit("sorter")
    outcome = host.enable("sorter")
    moved = host.emit(EVENT, {"id": 2})
    assert moved["logger"].status is HookCallStatus.NOT_RUN  # what the carry-over allows
    assert not outcome, "enabled on the approval of a version whose hook ran last"
