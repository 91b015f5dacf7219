"""Another caplet process's import folders against this one's writable grants (round 19).

Round 17 guarded the host's own ``sys.path`` against writable grants; the red
team's round 19 ran a second, real process on the same state directory with
another ``PYTHONPATH`` (an application, ``caplet mcp`` started by a client):
the first host granted ``fs.write`` over the folder the second imports from,
the plugin wrote a module there, and the second process imported it, outside
every sandbox layer. Each process now publishes the folders it runs code from
(``RunDir.publish_code``); a writable grant over a live peer's is refused, and
a process that finds a live peer's writable grant over its own refuses its
enables (:mod:`caplet._host._peer_code`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import caplet
from caplet import PluginHost
from caplet._host._run_dir import RunDir
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory, give_to_worker, rooted

WRITER = """
def create_functions(config):
    def write(path, text):
        with open(path, "w") as handle:
            handle.write(text)
        return True

    return {"main": {"write": write}}
"""

PLANTED = "print('the plugin ran in the other process', flush=True)\n"

#: The other process: a host on the same state directory whose sys.path holds the
#: folder its PYTHONPATH names. It makes its run directory (what its first enable
#: does), says so, then on one line from the test imports the module the plugin may
#: have planted, or enables a plugin of its own.
PEER = textwrap.dedent(
    """
    import importlib, json, sys
    from pathlib import Path
    from caplet import PluginHost

    host = PluginHost(Path(sys.argv[1]), state_dir=Path(sys.argv[2]), discover=False,
                      auditor=None)
    host.manager.run_dir
    print("ready", flush=True)
    command = sys.stdin.readline().strip()
    if command == "import":
        importlib.invalidate_caches()
        try:
            import r19_planted
        except ImportError:
            print("nothing to import", flush=True)
    else:
        host.discover()
        outcome = host.enable("quiet", consent=True)
        print(json.dumps([bool(outcome), outcome.reason]), flush=True)
    host.close()
    """
)


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


class Peer:
    """The other caplet process, with ``lib`` on its PYTHONPATH."""

    def __init__(
        self, plugins_dir: Path, state_dir: Path, lib: Path, *, home: Path | None = None
    ) -> None:
        # ``home``: the user's home the process runs with (its own state directory's
        # folder when not given, as a process of another HOME).
        user_home = state_dir if home is None else home
        self.process = subprocess.Popen(
            [sys.executable, "-c", PEER, str(plugins_dir), str(state_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            # The caplet this test runs, then the folder it imports from.
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": f"{Path(caplet.__file__).parents[1]}:{lib}",
                "HOME": str(user_home),
                "XDG_STATE_HOME": str(user_home / ".local" / "state"),
                # Where this test's caplet processes meet whatever their HOME (conftest).
                **{k: v for k, v in os.environ.items() if k == "CAPLET_TEST_PEER_BASES"},
            },
        )
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self._line()
        assert self.process.wait(timeout=60) == 0
        return answer

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    """The folder the other process imports from (its PYTHONPATH), the worker may write."""
    path = tmp_path / "project"
    path.mkdir()
    give_to_worker(path)
    return path


def _plugins(make_plugin: PluginFactory) -> None:
    make_plugin(
        "writer",
        source=WRITER,
        extra=rooted("fs.write"),
        modules='[modules.main]\nfunctions = ["write"]\n',
    )
    make_plugin("quiet")


def test_a_writable_grant_over_a_live_peers_import_folder_is_refused(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
) -> None:
    _plugins(make_plugin)
    peer = Peer(plugins_dir, state_dir, lib)
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(lib)}, consent=True)
        if outcome:  # the attack, where the grant is given (main)
            assert host.call("writer", "main.write", str(lib / "r19_planted.py"), PLANTED)
            assert peer.ask("import") != "the plugin ran in the other process", (
                "the plugin's module ran in the other caplet process"
            )
        assert not outcome, "a folder another caplet process imports from was granted writable"
        assert outcome.reason == (
            f"plugin 'writer': capability 'fs.write:${{config.root}}' (path {str(lib)!r}) is "
            f"writable and contains {lib}, a folder another live caplet process of this "
            "user runs Python code from (its sys.path, its runtime or its plugins): a "
            "module written there would run in that process, outside every sandbox layer; a "
            "plugin may never write caplet's own files: grant a directory that does not "
            "contain it"
        )
    finally:
        peer.close()


def test_a_process_finding_a_peers_writable_grant_over_its_imports_refuses_to_enable(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
) -> None:
    # The other order: the grant was given before the process importing from there
    # started (no live process imported from it then).
    _plugins(make_plugin)
    host.discover()
    assert host.enable("writer", config={"root": str(lib)}, consent=True)
    peer = Peer(plugins_dir, state_dir, lib)
    try:
        ok, reason = json.loads(peer.ask("enable"))
    finally:
        peer.close()
    assert not ok, "a process whose imports a peer's plugin may write went on enabling"
    assert reason == (
        f"plugin 'quiet': the writable grant {lib} of plugin writer (enabled by another "
        f"caplet process) contains {lib}, a folder this process runs Python code from (its "
        "sys.path, its runtime or its plugins): a module that plugin writes there would run "
        "here, outside every sandbox layer; disable it in that process, or run this one "
        f"without {lib} on its path (PYTHONPATH, its folder)"
    )


def test_a_writable_grant_beside_a_peers_import_folder_is_granted(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
    tmp_path: Path,
) -> None:
    # The near miss: a data folder beside the other process's library folder is
    # granted, written, and the other process enables its own plugins.
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    _plugins(make_plugin)
    peer = Peer(plugins_dir, state_dir, lib)
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(out)}, consent=True)
        assert outcome, outcome.reason
        assert host.call("writer", "main.write", str(out / "notes.txt"), "kept")
        ok, reason = json.loads(peer.ask("enable"))
        assert ok, reason
    finally:
        peer.close()


def test_a_process_starting_between_a_plan_and_its_publication_is_seen(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """attack21: the writable grants were judged against the peers' code folders when
    planned, and only the peers' grants again at publication, under the lock. A process
    importing from ``lib`` that started in between (here: started by the publication's
    first step, so the order is certain) published its folders after the plan read them
    and checked the peers' grants before this one's were published: neither saw the
    other, and the plugin could write where that process imports from."""
    _plugins(make_plugin)
    peers: list[Peer] = []
    publish = RunDir.publish

    def peer_starts_first(run: RunDir, *args: Any, **kwargs: Any) -> None:
        if not peers:
            peers.append(Peer(plugins_dir, state_dir, lib))
        publish(run, *args, **kwargs)

    monkeypatch.setattr(RunDir, "publish", peer_starts_first)
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(lib)}, consent=True)
        assert peers, "the enable published nothing"
        assert not outcome, "a folder a peer that started meanwhile imports from was granted"
        assert outcome.reason == (
            f"plugin 'writer': the writable grant {lib} contains {lib}, a folder another live "
            "caplet process of this user runs Python code from (its sys.path, its "
            "runtime or its plugins): a module written there would run in that process, "
            "outside every sandbox layer; a plugin may never write caplet's own files: grant "
            "a directory that does not contain it"
        )
    finally:
        for peer in peers:
            peer.close()


def test_a_process_on_another_state_directory_of_the_user_is_a_peer_too(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
    tmp_path: Path,
) -> None:
    """attack22: the folders a process imports from were published in its own state
    directory's run folder and read from the host's: a process of the same user with
    a state directory of its own (``CAPLET_STATE_DIR`` per project, an application's
    ``state_dir=``) was no peer, and the host granted ``fs.write`` over the folder it
    imports from, where the plugin wrote a module that process then imported."""
    _plugins(make_plugin)
    peer = Peer(plugins_dir, tmp_path / "app-state", lib, home=Path(os.environ["HOME"]))
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(lib)}, consent=True)
        if outcome:  # the attack, where the grant is given (main)
            assert host.call("writer", "main.write", str(lib / "r19_planted.py"), PLANTED)
            assert peer.ask("import") != "the plugin ran in the other process", (
                "the plugin's module ran in a caplet process on another state directory"
            )
        assert not outcome, "a folder a process on another state directory imports from was granted"
        assert f"writable and contains {lib}, a folder another live caplet process of this " in (
            outcome.reason
        )
    finally:
        peer.close()


def test_a_process_on_another_state_directory_finds_the_hosts_grant_over_its_imports(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
    tmp_path: Path,
) -> None:
    # The other order, across state directories: the grant first, then the process.
    _plugins(make_plugin)
    host.discover()
    assert host.enable("writer", config={"root": str(lib)}, consent=True)
    peer = Peer(plugins_dir, tmp_path / "app-state", lib, home=Path(os.environ["HOME"]))
    try:
        ok, reason = json.loads(peer.ask("enable"))
    finally:
        peer.close()
    assert not ok, "a process whose imports a plugin of another state directory may write went on"
    assert f"the writable grant {lib} of plugin writer (enabled by another caplet process)" in (
        reason
    )


def test_a_grant_beside_the_import_folder_of_a_process_on_another_state_directory(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    lib: Path,
    tmp_path: Path,
) -> None:
    # Near miss across state directories: a data folder beside the other process's
    # library folder is granted and written, and that process enables its own plugin.
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    _plugins(make_plugin)
    peer = Peer(plugins_dir, tmp_path / "app-state", lib, home=Path(os.environ["HOME"]))
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(out)}, consent=True)
        assert outcome, outcome.reason
        assert host.call("writer", "main.write", str(out / "notes.txt"), "kept")
        ok, reason = json.loads(peer.ask("enable"))
        assert ok, reason
    finally:
        peer.close()


@pytest.mark.parametrize("home", ["another HOME", "a home it cannot write"])
def test_a_process_of_another_home_is_a_peer_too(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    lib: Path,
    tmp_path: Path,
    home: str,
) -> None:
    """attack24: hosts met in the user's platform state directory, which HOME (and
    XDG_STATE_HOME) names: a process run with ``HOME=/tmp/x`` (``sudo -H``, a service
    unit, ``env -i``), or whose home it cannot write (its beacon not made), was no
    peer of the user's ``caplet``, which granted ``fs.write`` over the folder that
    process imports from; the plugin wrote a module there and the process ran it."""
    other = tmp_path / "other-home"
    if home == "another HOME":
        other.mkdir()
    else:
        other.write_text("a file where the home would be\n", encoding="utf-8")
    _plugins(make_plugin)
    peer = Peer(plugins_dir, tmp_path / "app-state", lib, home=other)
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(lib)}, consent=True)
        if outcome:  # the attack, where the grant is given (main)
            assert host.call("writer", "main.write", str(lib / "r19_planted.py"), PLANTED)
            assert peer.ask("import") != "the plugin ran in the other process", (
                "the plugin's module ran in a caplet process of another HOME"
            )
        assert not outcome, "a folder a process of another HOME imports from was granted"
        assert f"writable and contains {lib}, a folder another live caplet process of this " in (
            outcome.reason
        )
    finally:
        peer.close()


def test_a_grant_beside_the_import_folder_of_a_process_of_another_home(
    host: PluginHost,
    make_plugin: PluginFactory,
    plugins_dir: Path,
    lib: Path,
    tmp_path: Path,
) -> None:
    # Near miss of the meeting folders: a data folder beside the library folder of a
    # process of another HOME is granted and written, and that process, seeing the
    # host's grant, still enables its own plugin.
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    other = tmp_path / "other-home"
    other.mkdir()
    _plugins(make_plugin)
    peer = Peer(plugins_dir, tmp_path / "app-state", lib, home=other)
    try:
        host.discover()
        outcome = host.enable("writer", config={"root": str(out)}, consent=True)
        assert outcome, outcome.reason
        assert host.call("writer", "main.write", str(out / "notes.txt"), "kept")
        ok, reason = json.loads(peer.ask("enable"))
        assert ok, reason
    finally:
        peer.close()
