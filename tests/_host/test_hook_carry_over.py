"""steer31's row: a hook's place among the others is part of what an approval pins.

An approval recorded the events a plugin subscribes to (``ApprovalRecord.hooks``), not
where its handler runs among the others: a new version that moved its hook on an
``ABORT`` event from last to first carried over ("nothing widened") and stopped every
other subscriber before it ran. Now an approval pins ``event@priority``
(:mod:`caplet._host._hook_pins`), and a hook moved ahead needs consent.
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
    assert not outcome, "enabled on the approval of a version whose hook ran last"
    assert (
        f"moves its hook on application event {EVENT!r} ahead, to priority 0 from the approved 900"
    ) in outcome.reason
    assert host.emit(EVENT, {"id": 2})["logger"].status is HookCallStatus.OK


def test_near_miss_a_hook_moved_later_carries_the_approval_over(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    # running later gives up the power to stop the others: nothing widened
    hook_plugin(make_plugin, "logger", priority=500)
    sorter = hook_plugin(make_plugin, "sorter", handler="boom", priority=400)
    host.discover()
    for name in ("logger", "sorter"):
        host.audit(name)
        assert host.approve(name)
        assert host.enable(name)
    assert host.disable("sorter")
    manifest = sorter / "plugin.toml"
    manifest.write_text(manifest.read_text().replace("priority = 400", "priority = 900"))
    host.discover()
    host.audit("sorter")
    assert host.enable("sorter")


def test_an_approval_that_kept_only_events_vouches_for_no_hook_order(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    # an approval recorded before the order was pinned: where its hook ran is unknown,
    # so changed content that keeps the subscription asks again, saying why
    import dataclasses

    plugin = hook_plugin(make_plugin, "sorter", priority=900)
    host.discover()
    host.audit("sorter")
    assert host.approve("sorter")
    record = host.manager.store.get_approval("sorter")
    assert record is not None
    assert record.hooks == (f"{EVENT}@900",)
    host.manager.store.put_approval(dataclasses.replace(record, hooks=(EVENT,)))
    source = plugin / "plugin.py"
    source.write_text(source.read_text() + "\n# new content\n")
    host.discover()
    host.audit("sorter")
    outcome = host.enable("sorter")
    assert not outcome
    assert "the approval did not record where it ran among the others" in outcome.reason


def test_an_approved_place_that_is_no_ascii_number_vouches_for_no_order() -> None:
    # a hand-edited row: "²" is a digit to str.isdigit and int() of it raises
    from caplet._host._hook_pins import _approved_places

    assert _approved_places([f"{EVENT}@²", "other:event@7"]) == {EVENT: None, "other:event": 7}
