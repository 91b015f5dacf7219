"""SubprocessLauncher: starting a worker, end to end with real child processes.

What the worker inherits, how a plugin that fails to load or to start is
reported, and what a worker may claim when it is ready. The calls over a
started worker's channel are tests/_sandbox/test_channel_worker.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from caplet._errors import PluginCallError, WorkerStartError
from caplet._sandbox._launcher import Launcher, Worker
from caplet._sandbox._subprocess import SubprocessLauncher
from tests._sandbox.workerkit import VALUES
from tests.conftest import own_identity

from .conftest import Launch


def test_launcher_satisfies_the_protocols(launch: Launch) -> None:
    launcher: Launcher = SubprocessLauncher(identity=own_identity())
    assert launcher.isolation == "process"
    worker: Worker = launch(VALUES)
    assert worker.alive
    assert worker.pid > 0


def test_undeclared_modules_and_functions_are_rejected(launch: Launch) -> None:
    worker = launch(
        """
        def create_functions(config):
            return {
                "demo": {"run": lambda: "ok", "secret": lambda: "leak"},
                "extra": {"steal": lambda: "leak"},
            }
        """
    )
    assert dict(worker.started.registered) == {"demo": ("run",)}
    assert worker.started.rejected == ("demo.secret", "extra")
    assert worker.call("demo", "run", [], {}, timeout_s=30) == "ok"
    for module, function in (("demo", "secret"), ("extra", "steal")):
        with pytest.raises(PluginCallError) as caught:
            worker.call(module, function, [], {}, timeout_s=30)
        assert caught.value.exc_type == "LookupError"
        assert f"unknown function {module}.{function}; registered: demo.run" in str(caught.value)
    assert worker.alive


def test_the_worker_runs_with_nothing_inherited(launch: Launch) -> None:
    spec = launch.spec(
        """
        import os, sys
        def create_functions(config):
            def run():
                names = os.listdir("/proc/self/fd")
                fds = {}
                for name in names:
                    try:
                        fds[name] = os.readlink("/proc/self/fd/" + name)
                    except FileNotFoundError:
                        pass  # the descriptor listdir itself used, closed by now
                return {
                    "env": dict(os.environ),
                    "cwd": os.getcwd(),
                    "fds": fds,
                    "channel": int(sys.argv[1]),
                    "sid": os.getsid(0),
                    "pid": os.getpid(),
                    "isolated": sys.flags.isolated,
                    "bytecode": sys.dont_write_bytecode,
                }
            return {"demo": {"run": run}}
        """
    )
    worker = launch.start(spec)
    seen = worker.call("demo", "run", [], {}, timeout_s=30)
    assert isinstance(seen, dict)
    assert seen["env"] == {}
    assert seen["cwd"] == str(spec.workdir)
    assert set(seen["fds"]) == {"0", "1", "2", str(seen["channel"])}
    assert seen["fds"]["0"] == "/dev/null"
    assert seen["fds"]["1"] == "/dev/null"
    assert seen["sid"] == seen["pid"] == worker.pid
    assert seen["isolated"] == 1
    assert seen["bytecode"] is True
    assert not list(spec.snapshot_dir.rglob("__pycache__"))


def test_sibling_modules_import_both_ways(launch: Launch) -> None:
    worker = launch(
        """
        import helpers
        from . import helpers as relative
        def create_functions(config):
            return {"demo": {"run": lambda: [helpers.VALUE, relative.VALUE, __name__]}}
        """,
        files={"helpers.py": "VALUE = 42\n"},
    )
    assert worker.call("demo", "run", [], {}, timeout_s=30) == [42, 42, "caplet_plugin.plugin"]


def test_entry_in_a_subdirectory(launch: Launch) -> None:
    spec = launch.spec(
        """
        def create_functions(config):
            return {"demo": {"run": lambda: __name__}}
        """,
        entry="pkg/main.py",
    )
    worker = launch.start(spec)
    assert worker.call("demo", "run", [], {}, timeout_s=30) == "caplet_plugin.pkg.main"


def test_import_error_is_a_start_error_with_the_plugins_message(launch: Launch) -> None:
    spec = launch.spec("import nonexistent_module_for_caplet\n")
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    message = str(caught.value)
    assert message.startswith("plugin 'demo' could not be loaded from plugin.py: ")
    assert (
        "ModuleNotFoundError: No module named 'nonexistent_module_for_caplet' "
        "(while importing plugin.py)"
    ) in message
    assert message.endswith("fix the plugin and start it again")


def test_create_functions_raising_is_a_start_error(launch: Launch) -> None:
    spec = launch.spec(
        """
        def create_functions(config):
            raise RuntimeError("the api_key setting is empty")
        """
    )
    with pytest.raises(
        WorkerStartError,
        match=r"plugin 'demo' could not be loaded from plugin\.py: RuntimeError: "
        r"the api_key setting is empty \(in create_functions\)",
    ):
        launch.start(spec)


def test_missing_create_functions_names_the_entry(launch: Launch) -> None:
    spec = launch.spec("VALUE = 1\n")
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    assert "plugin.py does not define create_functions(config); add it" in str(caught.value)


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ("[1, 2]", "create_functions in plugin.py returned list, expected a dict"),
        ('{"demo": 5}', "returned int for module 'demo', expected a dict"),
        ('{"demo": {"run": 5}}', "returned int for demo.run, which is not callable"),
        ("{1: {}}", "returned a module name of type int"),
    ],
)
def test_create_functions_must_return_the_right_shape(
    launch: Launch, returned: str, expected: str
) -> None:
    spec = launch.spec(f"def create_functions(config):\n    return {returned}\n")
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    assert "plugin 'demo' could not be loaded" in str(caught.value)
    assert expected in str(caught.value)


def test_exit_during_import_reports_code_and_stderr(launch: Launch) -> None:
    spec = launch.spec(
        """
        import os, sys
        sys.stderr.write("cannot find my data file\\n")
        sys.stderr.flush()
        os._exit(5)
        """
    )
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    message = str(caught.value)
    assert message.startswith("plugin 'demo': the worker exited with code 5 before it was ready")
    assert "cannot find my data file" in message


def test_slow_start_is_killed_after_the_start_timeout(launch: Launch) -> None:
    spec = launch.spec("while True:\n    pass\n", start_timeout_s=0.5)
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    assert "plugin 'demo': the worker did not become ready within 0.5 s and was killed" in str(
        caught.value
    )


def test_missing_workdir_is_a_start_error(launch: Launch, tmp_path: Path) -> None:
    spec = launch.spec("def create_functions(config):\n    return {}\n")
    assert spec.workdir is not None
    spec.workdir.rmdir()
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    assert "plugin 'demo': cannot start a worker process" in str(caught.value)
    assert str(spec.workdir) in str(caught.value)


def test_config_that_cannot_cross_is_a_start_error(launch: Launch) -> None:
    spec = launch.spec("def create_functions(config):\n    return {}\n", config={"n": 2**70})
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    assert "config['n'] is an int outside the 64-bit range" in str(caught.value)


def test_worker_cannot_claim_undeclared_registrations(launch: Launch) -> None:
    spec = launch.spec(
        """
        import os, sys
        from caplet._sandbox._protocol_encode import encode_ready
        os.write(int(sys.argv[1]), encode_ready(0, {"demo": ["run"], "evil": ["x"]}, []))
        def create_functions(config):
            return {"demo": {"run": lambda: 1}}
        """
    )
    with pytest.raises(WorkerStartError) as caught:
        launch.start(spec)
    assert "claimed to register undeclared module 'evil'" in str(caught.value)
    assert "and was killed" in str(caught.value)


@pytest.mark.parametrize(
    "change", [{"snapshot_hash": "sha256-" + "0" * 64}, {"workdir": None}], ids=["hash", "workdir"]
)
def test_a_plain_process_never_starts_from_a_snapshot_it_would_have_to_check(
    launch: Launch, change: dict[str, object]
) -> None:
    # Only a launcher that copies_snapshot (a jail) is handed the enable's own
    # snapshot with the hash to check, and no working directory; a plain
    # process loads what it is given, where it is told.
    assert launch.launcher.copies_snapshot is False
    spec = launch.spec("def create_functions(config):\n    return {'demo': {'run': lambda: 1}}\n")
    with pytest.raises(WorkerStartError, match="cannot check the snapshot it is given"):
        launch.start(dataclasses.replace(spec, **change))  # type: ignore[arg-type]
