"""The call path: a plugin's exception, a timeout or a crash never takes the host down, and a
worker that died while idle is replaced without counting as a failure."""

from __future__ import annotations

import logging
import os
import select
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import (
    CallTimeoutError,
    LifecycleError,
    PluginCallError,
    PluginHost,
    Policy,
    WorkerCrashedError,
)
from tests._host.hostkit import SPIN, SPIN_MODULES
from tests.conftest import PluginFactory, child_pids


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False) as h:
        yield h


def _kill_and_wait(victim: int, watched: int) -> None:
    """SIGKILL ``victim``, then block until ``watched`` has exited.

    The pidfd is opened first: the zygote reaps ``watched`` at once, after
    which its pid could no longer be opened (pidfd_open(2): readable at exit).
    """
    pidfd = os.pidfd_open(watched)
    try:
        os.kill(victim, signal.SIGKILL)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        assert poller.poll(30_000), f"pid {watched} did not exit"
    finally:
        os.close(pidfd)


def test_plugin_exception_comes_back_with_its_message(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    host.enable("p", consent=True)
    with pytest.raises(PluginCallError, match="raised ValueError: no such thing") as info:
        host.call("p", "main.boom", "no such thing")
    assert info.value.exc_type == "ValueError"
    before = host.worker_pid("p")
    assert before is not None
    with pytest.raises(PluginCallError):
        host.call("p", "main.boom", "again")
    assert host.worker_pid("p") == before, "the worker survives an exception"


def test_timeout_kills_the_worker_and_the_host_survives(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    host.enable("p", consent=True)
    host.call("p", "main.pid")
    first = host.worker_pid("p")
    with pytest.raises(CallTimeoutError, match="timed out after 400 ms"):
        host.call("p", "main.spin")
    assert host.worker_pid("p") is None
    assert not Path(f"/proc/{first}").exists(), "the killed worker was reaped"
    assert host.call("p", "main.pid") == 1
    assert host.worker_pid("p") not in (None, first), "the next call starts a fresh worker"
    decisions = host.manager.store.decisions("p")
    assert any(d.action == "call" and not d.allowed and "timed out" in d.detail for d in decisions)


def test_crash_is_reported_and_the_host_survives(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    host.enable("p", consent=True)
    with pytest.raises(WorkerCrashedError, match="7"):
        host.call("p", "main.crash")
    assert isinstance(host.call("p", "main.pid"), int)


def test_calling_a_plugin_that_is_not_enabled(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    host.discover()
    with pytest.raises(LifecycleError, match=r"not enabled .*caplet call --enable p"):
        host.call("p", "main.run")


def test_disable_through_the_manager_also_stops_calls(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p")
    host.discover()
    host.enable("p", consent=True)
    assert host.call("p", "main.run") == {"args": [], "config": {}}
    assert host.manager.disable("p")
    with pytest.raises(LifecycleError, match="not enabled"):
        host.call("p", "main.run")


def test_a_worker_that_died_while_idle_is_replaced_without_a_failure(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    assert host.enable("p", consent=True)
    assert host.call("p", "main.pid") == 1
    monitor = host.worker_pid("p")
    assert monitor is not None
    # Kill the worker itself (it holds the channel), then wait for its monitor.
    (pid_one,) = child_pids(monitor)
    _kill_and_wait(pid_one, monitor)
    # The warm path does not ask whether the worker runs; the refused frame
    # tells it, and the call goes to a new worker as if nothing happened.
    assert host.call("p", "main.pid") == 1
    assert host.worker_pid("p") not in (None, monitor)
    assert host.breaker("p").failures == 0
    assert not [d for d in host.manager.store.decisions("p") if d.action == "call"]


class _Clock:
    """The host clock moved by hand (the state refresh reads it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_plugins_message_cannot_forge_lines_in_the_hosts_log_through_a_quarantine(
    plugins_dir: Path,
    state_dir: Path,
    make_plugin: PluginFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # attack10: a quarantine's reason quotes the last failure, the plugin's own
    # exception message, raw; a host that follows the quarantine logged it raw
    # in the embedding application's log (CWE-117, as the round-3 discovery fix).
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    forged = "2026-11-26 22:00:00 WARNING caplet: plugin p approved by the operator"
    policy = Policy(failure_threshold=1, quarantine_after=1)
    clock = _Clock()
    with (
        PluginHost(plugins_dir, state_dir=state_dir, policy=policy) as a,
        PluginHost(plugins_dir, state_dir=state_dir, policy=policy, clock=clock) as b,
    ):
        assert b.enable("p", consent=True)
        assert b.call("p", "main.pid") > 0
        assert a.enable("p", consent=True)
        with pytest.raises(PluginCallError):
            a.call("p", "main.boom", f"no such thing\n{forged}\r\x1b[2K")
        quarantine = a.manager.store.get_quarantine("p", a.manager.require_plugin("p").location)
        assert quarantine is not None
        assert "\n" not in quarantine.reason, quarantine.reason
        assert "\\x0a" + forged in quarantine.reason, quarantine.reason
        clock.now += b.policy.state_refresh_s
        with caplog.at_level(logging.INFO, logger="caplet"):
            with pytest.raises(LifecycleError, match="quarantined"):
                b.call("p", "main.pid")
    followed = [r.getMessage() for r in caplog.records if "quarantined elsewhere" in r.getMessage()]
    assert followed, [r.getMessage() for r in caplog.records]
    for message in followed:
        assert "\n" not in message, message
        assert "\r" not in message, message
        assert "\x1b" not in message, message
