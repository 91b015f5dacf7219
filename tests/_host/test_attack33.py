"""attack33: the red team against glob32's enforced glob grants.

Each test is an attack on a glob capability granted as the files it matches (glob32),
run through a real PluginHost on the strict sandbox (namespaces, Landlock, seccomp),
then its near miss. docs/security.md, "glob32 attacked (attack33)".
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests._host.test_glob_grants import TOOLS, _denied
from tests.conftest import PluginFactory, give_to_worker

_SECRET = "TOP SECRET KEY"


def _tool(make_plugin: PluginFactory, name: str, *capabilities: str) -> None:
    listed = ", ".join(f'"{capability}"' for capability in capabilities)
    make_plugin(
        name,
        source=TOOLS,
        extra=f"capabilities = [{listed}]\n",
        modules='[modules.tools]\nfunctions = ["read", "write", "rename", "remove", "listdir", '
        '"crash"]\n',
    )


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


@pytest.mark.security
@pytest.mark.parametrize("which", ["policy", "lock", "policy-by-name"])
def test_a_write_glob_never_matches_the_policy_file_or_the_lock_file(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    which: str,
) -> None:
    project = plugins_dir.parent
    options: dict[str, object] = {}
    if which != "lock":
        conf = tmp_path / "conf"
        conf.mkdir()
        target = conf / "caplet.toml"
        target.write_text("memory_mb = 256\n", encoding="utf-8")
        (conf / "other.toml").write_text("x = 1\n", encoding="utf-8")
        options["policy"] = target
        glob = f"fs.write:{conf}/*.toml" if which == "policy" else f"fs.write:{target}"
        give_to_worker(conf)
    else:
        target = project / "caplet.lock"
        target.write_text("version = 1\n", encoding="utf-8")
        give_to_worker(target)
        project.chmod(0o755)  # the worker lists the project's folder (a root host)
        glob = f"fs.write:{project}/*.lock"
    before = target.read_text(encoding="utf-8")
    _tool(make_plugin, "writer", glob)
    _tool(make_plugin, "near", f"fs.write:{target.parent}/o*.toml")
    with make_host(plugins_dir, state_dir, launcher, **options) as host:
        host.discover()
        outcome = host.enable("writer", consent=True)
        if outcome:
            host.call("writer", "tools.write", str(target), "isolation = 'none'\n")
        assert target.read_text(encoding="utf-8") == before
        assert not outcome
        assert f"is writable and is {target}, the " in outcome.reason
        if which != "lock":
            # The near miss: a glob beside the policy file that does not match it.
            assert host.enable("near", consent=True)
            other = target.parent / "other.toml"
            assert host.call("near", "tools.write", str(other), "x = 2\n") is True
            assert other.read_text(encoding="utf-8") == "x = 2\n"


@pytest.mark.security
@pytest.mark.skipif(os.geteuid() != 0, reason="a non-root host's workers are its own user")
def test_a_root_host_matches_only_what_the_worker_may_list_and_enter(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "a1b2c3.csv").write_text("token file", encoding="utf-8")
    drop.chmod(0o711)  # names are the secret: the worker may enter, not list
    top = tmp_path / "srv"
    for user, mode in (("open", 0o755), ("private", 0o700)):
        (top / user).mkdir(parents=True)
        (top / user / "report").write_text(f"report of {user}", encoding="utf-8")
        (top / user).chmod(mode)
    _tool(make_plugin, "names", f"fs.read:{drop}/*.csv")
    _tool(make_plugin, "reports", f"fs.read:{top}/*/report")
    _tool(make_plugin, "folder", f"fs.read:{drop}")
    host.discover()
    # The folder itself: the worker may not list it.
    assert host.enable("folder", consent=True)
    assert _denied(host.call("folder", "tools.listdir", str(drop)))
    # The glob over it: matched by root, it listed the secret names to the plugin.
    outcome = host.enable("names", consent=True)
    if outcome:
        assert _denied(host.call("names", "tools.listdir", str(drop)))
    assert not outcome
    assert f"(folder '{drop}'): the worker's uid" in outcome.reason
    assert "may not list this directory" in outcome.reason
    assert f"give the worker read and search access to {drop}" in outcome.reason
    # Another user's private folder under a middle glob: left out, and said.
    outcome = host.enable("reports", consent=True)
    assert outcome, outcome.reason
    assert host.call("reports", "tools.read", f"{top}/open/report") == "report of open"
    assert _denied(host.call("reports", "tools.read", f"{top}/private/report"))
    assert host.call("reports", "tools.listdir", str(top)) == ["open"]
    notes = " ".join(d.detail for d in host.manager.store.decisions("reports"))
    assert f"{top}/private (a folder the worker may not enter: the worker's uid" in notes


_PLANTED = "import os\nos.environ['CAPLET_A33_PLANTED'] = 'ran in the host'\n"


@pytest.mark.security
@pytest.mark.parametrize("glob", ["*.py", "*", "pkg/*.py"])
def test_a_write_glob_never_rewrites_a_module_of_the_scripts_folder(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    glob: str,
) -> None:
    # The script's folder (sys.path[0]) may hold a plugin's data folders, so only a grant
    # containing it was refused (round 17); a write glob over its files is no folder and
    # reached the modules the host imports.
    app = tmp_path / "app"
    (app / "pkg").mkdir(parents=True)
    (app / "a33_helpers.py").write_text("VALUE = 1\n", encoding="utf-8")
    (app / "pkg" / "a33_mod.py").write_text("VALUE = 1\n", encoding="utf-8")
    (app / "settings.json").write_text("{}", encoding="utf-8")
    give_to_worker(app)
    app.chmod(0o755)
    monkeypatch.setattr(sys, "path", [str(app), *sys.path[1:]])
    monkeypatch.setenv("CAPLET_A33_PLANTED", "")
    monkeypatch.delenv("CAPLET_A33_PLANTED")
    _tool(make_plugin, "writer", f"fs.write:{app}/{glob}")
    _tool(make_plugin, "near", f"fs.write:{app}/*.json")
    host.discover()
    outcome = host.enable("writer", consent=True)
    module = "pkg.a33_mod" if glob.startswith("pkg") else "a33_helpers"
    if outcome:  # the attack, where the grant is given
        path = app / f"{module.replace('.', '/')}.py"
        assert host.call("writer", "tools.write", str(path), _PLANTED) is True
        importlib.invalidate_caches()
        try:
            importlib.import_module(module)
        finally:
            for name in ("a33_helpers", "pkg.a33_mod", "pkg"):
                sys.modules.pop(name, None)
        assert "CAPLET_A33_PLANTED" not in os.environ, "the plugin's code ran in the host"
    assert not outcome
    assert "is writable and is a Python module below" in outcome.reason
    assert f"{app}, a folder the host imports Python modules from" in outcome.reason
    # The near miss: the script folder's data files stay grantable.
    assert host.enable("near", consent=True)
    assert host.call("near", "tools.write", f"{app}/settings.json", "[]") is True


@pytest.mark.security
def test_a_write_glob_never_rewrites_the_scripts_cached_bytecode(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = tmp_path / "app"
    cache = app / "__pycache__"
    cache.mkdir(parents=True)
    (cache / "a33_helpers.cpython-312.pyc").write_bytes(b"\0" * 16)
    give_to_worker(app)
    app.chmod(0o755)
    monkeypatch.setattr(sys, "path", [str(app), *sys.path[1:]])
    _tool(make_plugin, "writer", f"fs.write:{cache}/*")
    _tool(make_plugin, "folder", f"fs.write:{cache}")
    host.discover()
    for name in ("writer", "folder"):
        outcome = host.enable(name, consent=True)
        assert not outcome
        assert f"{cache}, the bytecode cache of {app}" in outcome.reason


@pytest.mark.security
def test_held_a_glob_over_caplets_own_files_is_refused(
    host: PluginHost, make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    _tool(make_plugin, "victim", f"fs.read:{plugins_dir}")
    _tool(make_plugin, "state", f"fs.read:{state_dir}/*.db")
    _tool(make_plugin, "code", f"fs.write:{plugins_dir}/*/plugin.py")
    host.discover()
    assert (state_dir / "caplet.db").is_file()
    outcome = host.enable("state", consent=True)
    assert not outcome
    assert f"(folder '{state_dir}') lies inside caplet's state directory" in outcome.reason
    outcome = host.enable("code", consent=True)
    assert not outcome
    assert "the plugins directory (other plugins' code)" in outcome.reason
