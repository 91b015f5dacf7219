"""The call path: a plugin's exception, a timeout or a crash never takes the host down, and a
worker that died while idle is replaced without counting as a failure."""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import CallTimeoutError, LifecycleError, PluginCallError, PluginHost, WorkerCrashedError
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
