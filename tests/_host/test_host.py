"""PluginHost: calls run in a separate worker process; failures never take the host down."""

from __future__ import annotations

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
    WorkerCrashedError,
)
from tests.conftest import PluginFactory, child_pids

SPIN = """
import os

def create_functions(config):
    def spin():
        while True:
            pass

    def crash():
        os._exit(7)

    def boom(message):
        raise ValueError(message)

    def pid():
        return os.getpid()

    return {"main": {"spin": spin, "crash": crash, "boom": boom, "pid": pid}}
"""
SPIN_MODULES = (
    '[modules.main]\nfunctions = ["spin", "crash", "boom", "pid"]\n[limits]\ntimeout_ms = 400\n'
)


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    with PluginHost(plugins_dir, state_dir=state_dir, discover=False) as h:
        yield h


def test_call_runs_in_a_separate_process(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    assert host.enable("p", consent=True)
    assert host.call("p", "main.pid") == 1, "pid 1 of the worker's own pid namespace"
    worker_pid = host.worker_pid("p")
    assert worker_pid is not None
    assert worker_pid != os.getpid()


def test_functions_returns_declared_callables(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    host.discover()
    host.enable("p", consent=True)
    table = host.functions("p")
    assert list(table) == ["main"]
    assert table["main"]["run"](1, "two") == {"args": [1, "two"], "config": {}}


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


def test_calling_a_plugin_that_is_not_enabled(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p")
    host.discover()
    with pytest.raises(LifecycleError, match=r"not enabled .*caplet call --enable p"):
        host.call("p", "main.run")


def test_unapprove_leaves_a_running_plugin_running(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    host.audit("p")
    assert host.approve("p")
    host.enable("p", consent=True)
    host.call("p", "main.pid")
    pid = host.worker_pid("p")
    assert host.unapprove("p")
    host.call("p", "main.pid")
    assert host.worker_pid("p") == pid


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


def test_disable_stops_the_worker(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("p", source=SPIN, modules=SPIN_MODULES)
    host.discover()
    host.enable("p", consent=True)
    host.call("p", "main.pid")
    pid = host.worker_pid("p")
    assert host.disable("p")
    assert host.worker_pid("p") is None
    assert not Path(f"/proc/{pid}").exists()


def test_enable_reports_a_plugin_that_fails_to_load(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "broken", source="def create_functions(config):\n    raise RuntimeError('no config')\n"
    )
    host.discover()
    outcome = host.enable("broken", consent=True)
    assert not outcome
    assert "no config" in outcome.reason
    assert not host.manager.require_plugin("broken").enabled


def test_enable_again_reconfigures_in_place(host: PluginHost, make_plugin: PluginFactory) -> None:
    make_plugin("c", extra='[config.word]\ntype = "string"\ndefault = "a"\n')
    host.discover()
    host.enable("c", consent=True)
    assert host.call("c", "main.run")["config"] == {"word": "a"}
    outcome = host.enable("c", ["word=b"], consent=True)
    assert outcome.reason == "reconfigured"
    assert host.call("c", "main.run")["config"] == {"word": "b"}


def test_unknown_inline_key_is_refused_with_a_suggestion(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin("c", extra='[config.word]\ntype = "string"\ndefault = "a"\n')
    host.discover()
    outcome = host.enable("c", ["wrod=b"], consent=True)
    assert not outcome
    assert "did you mean 'word'" in outcome.reason


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


def test_worker_environment_holds_only_approved_variables(
    host: PluginHost, make_plugin: PluginFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPLET_TEST_TOKEN", "t0ken")
    monkeypatch.setenv("CAPLET_TEST_OTHER", "nope")
    monkeypatch.setenv("LD_PRELOAD_TEST", "x")
    make_plugin(
        "envy",
        extra='capabilities = ["env.read:CAPLET_TEST_TOKEN", "env.read:LD_PRELOAD_TEST"]',
        source="""
            import os
            def create_functions(config):
                return {"main": {"run": lambda: dict(os.environ)}}
        """,
    )
    host.discover()
    assert host.enable("envy", consent=True)
    assert host.call("envy", "main.run") == {"CAPLET_TEST_TOKEN": "t0ken"}


def test_proc_exec_runs_only_the_named_program(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    make_plugin(
        "runner",
        extra='capabilities = ["proc.exec:true"]',
        modules='[modules.main]\nfunctions = ["run"]\n',
        source="""
            import subprocess, sys
            def create_functions(config):
                def run(argv):
                    if argv[0] == "python":  # the jail's own interpreter
                        argv = [sys.executable, *argv[1:]]
                    try:
                        return subprocess.run(argv, check=False).returncode
                    except OSError as exc:
                        return f"refused: {exc.errno}"
                return {"main": {"run": run}}
        """,
    )
    host.discover()
    outcome = host.enable("runner", consent=True)
    assert outcome, outcome.reason
    assert host.call("runner", "main.run", ["/usr/bin/true"]) == 0
    # Another program is not even visible in the jail ...
    assert host.call("runner", "main.run", ["/usr/bin/false"]) == "refused: 2"
    # ... and Python, which is visible (the runtime), may not be executed: EACCES
    # from Landlock's execute right, granted to the approved program only.
    python = host.call("runner", "main.run", ["python", "-c", "pass"])
    assert python == "refused: 13"
    # The host's spelling of the interpreter names nothing inside (the runtime
    # is at neutral paths, issue 13 point 7).
    host_python = host.call("runner", "main.run", [__import__("sys").executable, "-c", "pass"])
    assert host_python == "refused: 2"


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


def test_keyword_arguments_may_be_named_like_calls_own_parameters(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """Issue 15: host.call("p", "m.f", name="v") was a TypeError (a keyword clashing with
    call's own parameter)."""
    make_plugin(
        "kw",
        source=(
            "def create_functions(config):\n"
            "    def run(name, target, args=()):\n"
            "        return [name, target, list(args)]\n"
            "    return {'main': {'run': run}}\n"
        ),
    )
    host.discover()
    assert host.enable("kw", consent=True)
    assert host.call("kw", "main.run", name="n", target="t", args=[1]) == ["n", "t", [1]]
    assert host.functions("kw")["main"]["run"](name="a", target="b") == ["a", "b", []]
