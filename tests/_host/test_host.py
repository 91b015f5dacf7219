"""PluginHost: calls run in a separate worker process, the lifecycle around them.

The call path's own tests are in test_call_path.py, starting workers in
test_workers.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from tests._host.hostkit import SPIN, SPIN_MODULES
from tests.conftest import PluginFactory


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
