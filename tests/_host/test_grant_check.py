"""Grants that mean what was approved (issue 13, points 2, 4 and 7), end to end.

Each test is the red team's attack first, run through a real PluginHost on
the real sandbox: plugin A with a writable grant re-points a path that
plugin B is granted; a grant inside (or, writable, around) caplet's own
files; snapshots reachable through TMPDIR; host paths in mountinfo.
"""

from __future__ import annotations

import importlib
import json
import os
import site
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._capabilities._parse import parse_capability
from caplet._errors import CapletError
from caplet._host._grant_check import plan_grants
from caplet._host._mirrors import read_mount_table
from caplet._host._protected import ProtectedPaths, refuse_process_files
from caplet._sandbox._identity import worker_identity
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._selftest._grants import VIEWS, host_runtime_paths, named_host_paths
from caplet._trust._paths import user_state_dir
from tests._host.ctxkit import make_host
from tests.conftest import (
    PluginFactory,
    fifo_released,
    give_to_worker,
    make_distribution,
    rooted,
)

TOOLS = """
import os

def create_functions(config):
    def listdir(path):
        try:
            return sorted(os.listdir(path))
        except OSError as exc:
            return {"errno": exc.errno}

    def read(path):
        try:
            with open(path, "rb") as handle:
                return handle.read(64).hex()
        except OSError as exc:
            return {"errno": exc.errno}

    def swap(path, target):
        os.rename(path, path + ".old")
        os.symlink(target, path)
        return True

    def find(top, needle):
        hits = []
        for folder, dirs, files in os.walk(top):
            hits += [os.path.join(folder, n) for n in dirs + files if needle in n]
        return hits

    def mounts():
        with open("/proc/self/mountinfo") as handle:
            return handle.read()

    def crash():
        os._exit(3)

    return {"tools": {"listdir": listdir, "read": read, "swap": swap, "find": find,
                      "mounts": mounts, "crash": crash}}
"""


def _tool(make_plugin: PluginFactory, name: str, kind: str) -> None:
    make_plugin(
        name,
        source=TOOLS,
        extra=rooted(kind),
        modules='[modules.tools]\nfunctions = ["listdir", "read", "swap", "find", "mounts", '
        '"crash"]\n',
    )


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """``/data`` of the red team's story: a directory writer may write."""
    path = tmp_path / "data"
    (path / "projects").mkdir(parents=True)
    (path / "projects" / "plan.txt").write_text("the plan\n", encoding="utf-8")
    give_to_worker(path)
    return path


def test_a_grant_redirected_by_another_plugin_is_refused_naming_the_link(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    _tool(make_plugin, "writer", "fs.write")
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    assert host.enable("writer", [f"root={data}"], consent=True)
    projects = str(data / "projects")
    assert host.call("writer", "tools.swap", projects, "/") is True
    refused = host.enable("reader", [f"root={projects}"], consent=True)
    assert not refused
    assert refused.reason.startswith(
        f"plugin 'reader': capability 'fs.read:${{config.root}}' (path {projects!r}): "
        f"{projects!r} passes through a symbolic link: {projects!r} -> '/'."
    )
    assert "grant the path the link leads to itself" in refused.reason


def test_a_grant_swapped_after_enable_never_reaches_a_worker(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    _tool(make_plugin, "writer", "fs.write")
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    projects = str(data / "projects")
    assert host.enable("reader", [f"root={projects}"], consent=True)
    assert host.enable("writer", [f"root={data}"], consent=True)
    assert host.call("reader", "tools.listdir", projects) == ["plan.txt"]
    assert host.call("writer", "tools.swap", projects, "/") is True
    # The running worker keeps the inode it was given: a mount is not a name.
    assert host.call("reader", "tools.listdir", projects) == ["plan.txt"]
    with pytest.raises(CapletError):
        host.call("reader", "tools.crash")
    # The next start resolves the path again and finds a link on it: no worker.
    with pytest.raises(CapletError) as info:
        host.call("reader", "tools.listdir", projects)
    assert "passes through a symbolic link" in str(info.value)


def test_no_grant_lies_inside_caplets_state_directory(
    host: PluginHost, make_plugin: PluginFactory, state_dir: Path
) -> None:
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    refused = host.enable("reader", [f"root={state_dir}"], consent=True)
    assert not refused
    assert f"lies inside caplet's state directory {state_dir}" in refused.reason
    run = state_dir / "run"
    refused = host.enable("reader", [f"root={run}"], consent=True)
    assert not refused
    assert "lies inside caplet's state directory" in refused.reason


@pytest.mark.parametrize("protected", ["state", "plugins", "lockfile", "runtime"])
def test_a_writable_grant_never_contains_caplets_own_files(
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    protected: str,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    give_to_worker(site)
    state = site / "state" if protected == "state" else tmp_path / "state"
    lockfile = site / "caplet.lock" if protected == "lockfile" else tmp_path / "caplet.lock"
    plugins = plugins_dir
    if protected == "plugins":
        plugins = site / "plugins"
        plugins.mkdir()
        make_plugin = PluginFactory(plugins)
    _tool(make_plugin, "writer", "fs.write")
    root = Path(os.path.realpath(os.__file__)).parent if protected == "runtime" else site
    with make_host(plugins, state, launcher, lockfile=lockfile) as host:
        host.discover()
        refused = host.enable("writer", [f"root={root}"], consent=True)
    assert not refused
    assert ("is writable and contains" in refused.reason) != ("lies inside" in refused.reason)
    assert "a plugin may never write caplet's own files" in refused.reason


def test_a_read_grant_around_the_state_directory_hides_it(
    plugins_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "notes.txt").write_text("public\n", encoding="utf-8")
    state = site / "state"
    _tool(make_plugin, "reader", "fs.read")
    with make_host(plugins_dir, state, launcher) as host:
        host.discover()
        assert host.enable("reader", [f"root={site}"], consent=True)
        assert "state" in host.call("reader", "tools.listdir", str(site))
        assert (state / "caplet.db").exists()
        hidden = host.call("reader", "tools.listdir", str(state))
        assert hidden in ([], {"errno": 13})
        assert host.call("reader", "tools.read", str(state / "caplet.db")) in (
            {"errno": 2},
            {"errno": 13},
        )
        assert host.call("reader", "tools.read", str(site / "notes.txt")) == b"public\n".hex()
        notes = [d for d in host.manager.store.decisions("reader") if d.action == "grant"]
    assert any(f"caplet's state directory {state} is hidden" in d.detail for d in notes)


def test_a_missing_grant_is_refused_before_any_worker_starts(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    missing = tmp_path / "srv" / "notes"
    refused = host.enable("reader", [f"root={missing}"], consent=True)
    assert not refused
    assert refused.reason == (
        f"plugin 'reader': capability 'fs.read:${{config.root}}' (path {str(missing)!r}): "
        f"{str(missing)!r} does not exist: create it (or correct the configured path), then "
        "enable the plugin again"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="a non-root host's workers are its own user")
def test_a_root_host_refuses_a_writable_grant_its_workers_cannot_write(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()  # root's, 0755
    _tool(make_plugin, "writer", "fs.write")
    host.discover()
    refused = host.enable("writer", [f"root={out}"], consent=True)
    assert not refused
    identity = host.launcher.identity  # type: ignore[attr-defined]
    assert f"the worker's uid {identity.uid}, gid {identity.gid} may not write" in refused.reason
    assert f"`chown -R {identity.uid}:{identity.gid} {out}`" in refused.reason
    give_to_worker(out)
    assert host.enable("writer", [f"root={out}"], consent=True)


def test_snapshots_are_out_of_reach_even_with_tmpdir_inside_a_grant(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    data: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The red team put TMPDIR inside its own writable grant: snapshots used
    # to live in tempfile.gettempdir(), where it rewrote another plugin's code.
    monkeypatch.setenv("TMPDIR", str(data))
    _tool(make_plugin, "writer", "fs.write")
    _tool(make_plugin, "victim", "fs.read")
    with make_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
        assert host.enable("victim", [f"root={data / 'projects'}"], consent=True)
        assert host.enable("writer", [f"root={data}"], consent=True)
        run_dir = host._run_dir
        assert run_dir.parent == state_dir / "run"
        assert host.call("writer", "tools.find", str(data), "victim-") == []
        assert host.call("writer", "tools.find", str(data), "caplet-run") == []
        assert host.call("victim", "tools.listdir", str(data / "projects")) == ["plan.txt"]
    assert not run_dir.exists()


def test_no_host_path_of_caplets_shows_in_mountinfo(
    host: PluginHost, make_plugin: PluginFactory, data: Path, state_dir: Path
) -> None:
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    assert host.enable("reader", [f"root={data}"], consent=True)
    mounts = host.call("reader", "tools.mounts")
    assert isinstance(mounts, str)
    assert "caplet-run" not in mounts
    assert str(state_dir) not in mounts
    plugin_lines = [line for line in mounts.splitlines() if line.split()[4] == "/plugin"]
    assert len(plugin_lines) == 1
    assert plugin_lines[0].split()[3] == "/"  # its own tmpfs: no host path as its root
    # Every grant is mounted nosuid,nodev (what a file there carries means nothing inside).
    grant_lines = [line.split() for line in mounts.splitlines() if line.split()[4] == str(data)]
    assert grant_lines
    for fields in grant_lines:
        assert {"nosuid", "nodev"} <= set(fields[5].split(",")), fields
    guest = host.exec("print(open('/proc/self/mountinfo').read())")
    assert guest.ok, guest
    assert "caplet-run" not in guest.stdout
    assert str(state_dir) not in guest.stdout


def test_no_host_path_of_the_runtime_shows_inside(
    host: PluginHost, make_plugin: PluginFactory, state_dir: Path, plugins_dir: Path
) -> None:
    # Issue 13, point 7: the interpreter's prefix (a pyenv under the home), the
    # virtual environment and caplet's checkout are named by nothing a plugin
    # or a guest can read: mount tables, mapped files, /proc/self/exe, the
    # command line, sys.path and the modules' files.
    make_plugin(
        "looker",
        source=f"import os\n{VIEWS}\ndef create_functions(config):\n"
        "    return {'tools': {'views': run}}\n",
        modules='[modules.tools]\nfunctions = ["views"]\n',
    )
    host.discover()
    assert host.enable("looker", consent=True)
    secrets = (*host_runtime_paths(), str(state_dir), str(plugins_dir), "caplet-run")
    assert any(path.startswith(sys.prefix) for path in secrets)  # the test sees something
    seen = {"plugin": host.call("looker", "tools.views")}
    guest = host.exec(f"import json, os\n{VIEWS}\nprint(json.dumps(run()))")
    assert guest.ok, guest
    seen["guest"] = json.loads(guest.stdout)
    for who, views in seen.items():
        assert isinstance(views, dict)
        assert set(views) >= {"mountinfo", "mounts", "maps", "exe", "sys", "modules", "cmdline"}
        assert "/plugin" in views["mountinfo"] or who == "guest"
        assert views["maps"].count("\n") > 10  # a real maps file, not an error
        for view, text in views.items():
            leaked = named_host_paths(text, secrets)
            assert not leaked, f"{who}'s {view} names {leaked}:\n{text[:4000]}"


@pytest.mark.parametrize("interface", ["/sys/fs/cgroup", "/proc/sys", "/dev/shm"])
def test_a_writable_grant_never_lies_in_the_kernels_interfaces(
    host: PluginHost, make_plugin: PluginFactory, interface: str
) -> None:
    _tool(make_plugin, "writer", "fs.write")
    host.discover()
    refused = host.enable("writer", [f"root={interface}"], consent=True)
    assert not refused
    assert "one of the kernel's interfaces" in refused.reason


@pytest.mark.security
@pytest.mark.parametrize("granted", ["/proc/1/cmdline", "/proc/1", "/proc"])
def test_no_grant_reads_another_process_through_proc(
    host: PluginHost, make_plugin: PluginFactory, granted: str
) -> None:
    """attack34's note: ``fs.read:/proc/*/cmdline`` read every host process's command
    line (a password given as an argument), outside the worker's pid namespace."""
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    refused = host.enable("reader", [f"root={granted}"], consent=True)
    assert not refused
    assert "lies in /proc (a proc file system): not files but every process's" in refused.reason
    assert "grant a directory of files instead" in refused.reason


def test_proc_mounted_elsewhere_is_refused_by_its_file_system() -> None:
    """The type of the file system decides, not the path: a proc file system shown at
    another place (a container's, a bind) is refused the same; the table reads it."""
    table = read_mount_table()
    assert table.file_system(os.stat("/proc/self").st_dev) == "proc"
    assert table.file_system(os.stat("/").st_dev) not in ("proc", "")
    with pytest.raises(CapletError, match=r"lies in /proc \(a proc file system\)"):
        refuse_process_files("plugin 'p': capability 'fs.read:/srv/ps'", "/srv/ps", "proc")
    refuse_process_files("plugin 'p'", "/srv/data", "ext4")


def test_near_miss_a_read_grant_of_sys_is_still_granted(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    _tool(make_plugin, "reader", "fs.read")
    host.discover()
    assert host.enable("reader", ["root=/sys/devices/system/cpu"], consent=True)


def test_another_caplet_state_directory_is_never_granted(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
) -> None:
    # Two caplet configurations of one user (CAPLET_STATE_DIR per project, or
    # caplet selftest's red-team and ordinary hosts, whose case
    # grant-in-state-dir is open in the every-layer column as an unprivileged
    # user for this reason): plugin p of the first is granted the second's
    # state (approvals, kv, snapshots). As root the worker's uid happens not
    # to reach a root-owned state directory, but no rule says so.
    other = tmp_path / "other-state"
    with make_host(plugins_dir, other, launcher) as first:
        first.discover()  # creates the other state directory, as any host does
    assert other.is_dir()
    _tool(make_plugin, "p", "fs.write")
    with make_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
        outcome = host.enable("p", [f"root={other}"], consent=True)
    assert not outcome
    assert "state directory" in outcome.reason


def test_a_grant_inside_another_state_directory_and_the_default_ones_are_guarded(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = tmp_path / "other-state"
    with make_host(plugins_dir, other, launcher) as first:
        first.discover()
    (other / "snapshots-of-theirs").mkdir()
    # The state directory a default host of this user would use, holding nothing yet.
    area = tmp_path / "area"
    default = area / "default-state"
    default.mkdir(parents=True)
    monkeypatch.setenv("CAPLET_STATE_DIR", str(default))
    _tool(make_plugin, "p", "fs.write")
    _tool(make_plugin, "r", "fs.read")
    with make_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
        inside = host.enable("p", [f"root={other / 'snapshots-of-theirs'}"], consent=True)
        assert not inside
        assert f"lies inside {other}, a caplet state directory" in inside.reason
        over = host.enable("p", [f"root={area}"], consent=True)
        assert not over
        assert f"contains {default}, another caplet state directory" in over.reason
        # A read grant over it gets it hidden, and the approver is told.
        seen = host.enable("r", [f"root={area}"], consent=True)
        assert seen, seen.reason
        notes = [d.detail for d in host.manager.store.decisions("r") if d.action == "grant"]
    assert any(f"caplet's state directory {default} is hidden" in note for note in notes)


def test_the_stores_own_directory_is_guarded_like_the_state_directory(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
) -> None:
    """Red-team round 3: ``store=sqlite:///DIR`` (the policy file's ``store``, or
    ``CAPLET_STORE``) puts approvals, the decision log and ctx.kv outside the state
    directory, and only the state directory was guarded: a plugin granted ``fs.write``
    on the directory above the store could replace it (a root host's worker owns that
    directory; a user's worker writes caplet.db itself) and forge or erase approvals,
    and a read grant around it read every plugin's ctx.kv."""
    site = tmp_path / "site"
    site.mkdir()
    give_to_worker(site)
    store = site / "store"
    _tool(make_plugin, "writer", "fs.write")
    _tool(make_plugin, "reader", "fs.read")
    with make_host(plugins_dir, state_dir, launcher, store=f"sqlite://{store}") as host:
        host.discover()
        assert (store / "caplet.db").is_file()
        over = host.enable("writer", [f"root={site}"], consent=True)
        assert not over
        assert f"contains {store}, caplet's store" in over.reason
        inside = host.enable("writer", [f"root={store}"], consent=True)
        assert not inside
        assert "caplet state directory" in inside.reason or "caplet's store" in inside.reason
        seen = host.enable("reader", [f"root={site}"], consent=True)
        assert seen, seen.reason
        assert host.call("reader", "tools.read", str(store / "caplet.db")) in (
            {"errno": 2},
            {"errno": 13},
        )
        assert host.call("reader", "tools.listdir", str(store)) in ([], {"errno": 13})
        notes = [d.detail for d in host.manager.store.decisions("reader") if d.action == "grant"]
    assert any(f"{store} is hidden" in note for note in notes)


@pytest.mark.parametrize("how", ["named", "linked-policy", "linked-lockfile"])
def test_a_writable_grant_never_reaches_the_policy_file_or_the_lock_file_through_a_link(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    how: str,
) -> None:
    """Red-team round 3: the policy file decides what every plugin may do at the next
    start (isolation, risk, networks, the store). One named with ``--policy`` or
    ``CAPLET_POLICY``, or a ``caplet.toml`` (or ``caplet.lock``) beside the plugins
    directory that is a link to a shared configuration directory, was not guarded: a
    plugin granted ``fs.write`` there rewrote it, and the next host loosened (or, in
    locked mode, pinned) whatever the plugin wrote."""
    conf = tmp_path / "conf"
    conf.mkdir()
    give_to_worker(conf)
    real = conf / ("caplet.lock" if how == "linked-lockfile" else "caplet.toml")
    real.write_text("memory_mb = 256\n" if how != "linked-lockfile" else "version = 1\n")
    options: dict[str, object] = {}
    if how == "named":
        options["policy"] = real
    elif how == "linked-policy":
        (plugins_dir.parent / "caplet.toml").symlink_to(real)
    else:
        (plugins_dir.parent / "caplet.lock").symlink_to(real)
    _tool(make_plugin, "writer", "fs.write")
    with make_host(plugins_dir, state_dir, launcher, **options) as host:
        if how != "linked-lockfile":
            assert host.policy.memory_mb == 256
        host.discover()
        outcome = host.enable("writer", [f"root={conf}"], consent=True)
    assert not outcome
    assert "is writable and contains" in outcome.reason
    assert str(real) in outcome.reason


RUNNER = """
import os
import subprocess

def create_functions(config):
    def run(argv):
        try:
            done = subprocess.run(argv, capture_output=True, check=False)
        except OSError as exc:
            return f"refused: {exc.errno}"
        return done.stdout.decode(errors="replace")

    def swap(path, target):
        os.rename(path, path + ".old")
        os.symlink(target, path)
        return True

    def crash():
        os._exit(3)

    return {"main": {"run": run, "swap": swap, "crash": crash}}
"""


def make_runner(make_plugin: PluginFactory, program: str | Path) -> None:
    """The plugin ``runner`` (:data:`RUNNER`) approved to run ``program``."""
    make_plugin(
        "runner",
        source=RUNNER,
        extra=f'capabilities = ["proc.exec:{program}"]',
        modules='[modules.main]\nfunctions = ["run", "swap", "crash"]\n',
    )


@pytest.mark.parametrize("where", ["own", "other"])
def test_a_program_inside_a_writable_grant_is_refused(
    host: PluginHost, make_plugin: PluginFactory, data: Path, where: str
) -> None:
    # The attack: a plugin that may write where its approved program lives
    # re-points the program at any other program of the host (a link to
    # /usr/bin/id, followed when the next worker starts) or rewrites it: the
    # approval of "run /data/tool" becomes "run anything". Another plugin's
    # writable grant over it does the same for that plugin.
    tool = data / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    give_to_worker(data)
    writer = "runner" if where == "own" else "writer"
    capabilities = [f"proc.exec:{tool}"]
    if where == "own":
        capabilities.append(f"fs.write:{data}")
    make_plugin(
        "runner",
        source=RUNNER,
        extra="capabilities = [" + ", ".join(f'"{c}"' for c in capabilities) + "]",
        modules='[modules.main]\nfunctions = ["run", "swap", "crash"]\n',
    )
    if where == "other":
        _tool(make_plugin, "writer", "fs.write")
    host.discover()
    if where == "other":
        assert host.enable("writer", config={"root": str(data)}, consent=True)
    outcome = host.enable("runner", consent=True)
    assert not outcome, "a program a plugin can rewrite was granted"
    assert str(tool) in outcome.reason
    assert "writable grant" in outcome.reason
    assert writer in outcome.reason
    assert "install the program outside" in outcome.reason


@pytest.mark.parametrize("order", ["writer-first", "runner-first"])
def test_a_program_reached_through_a_link_inside_a_writable_grant_is_refused(
    host: PluginHost, make_plugin: PluginFactory, data: Path, tmp_path: Path, order: str
) -> None:
    """Red team: ``proc.exec:/opt/bin/tool`` where ``tool`` links to ``/data/current``,
    itself a link to ``/usr/bin/true``. Only the declared path and the final target
    were checked against writable grants, and the program is opened again, links
    followed, at every worker start: a plugin that may write ``/data`` re-pointed
    ``current`` at any program, or at a file of its own, and the runner's next
    worker ran that, in the runner's jail with the runner's grants."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    (data / "current").symlink_to("/usr/bin/true")
    tool.symlink_to(data / "current")
    make_runner(make_plugin, tool)
    _tool(make_plugin, "writer", "fs.write")
    host.discover()
    if order == "writer-first":
        assert host.enable("writer", config={"root": str(data)}, consent=True)
        outcome = host.enable("runner", consent=True)
    else:
        assert host.enable("runner", consent=True)
        outcome = host.enable("writer", config={"root": str(data)}, consent=True)
    assert not outcome, "a program another plugin can re-point was granted"
    assert str(data / "current") in outcome.reason
    assert "writer" in outcome.reason


def test_a_writable_grant_over_an_enabled_plugins_program_is_refused(
    host: PluginHost, make_plugin: PluginFactory, data: Path
) -> None:
    # The same attack in the other order: the program's plugin is enabled
    # first, then a plugin asks to write where that program lives.
    tool = data / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    _tool(make_plugin, "writer", "fs.write")
    host.discover()
    assert host.enable("runner", consent=True)
    assert host.call("runner", "main.run", [str(tool)]) == ""
    outcome = host.enable("writer", config={"root": str(data)}, consent=True)
    assert not outcome
    assert str(tool) in outcome.reason
    assert "runner" in outcome.reason


def test_caplets_own_paths_are_looked_up_at_every_plan_never_kept(tmp_path: Path) -> None:
    # A plugin without fs capabilities skips caplet's protected paths (a cost
    # of every enable): that must not become remembering them. The state
    # directory moved inside a read grant after one plan (its path now a link
    # there: the same text) is hidden at the next.
    granted = tmp_path / "granted"
    granted.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    give_to_worker(granted)
    asked: list[ProtectedPaths] = []

    def protected() -> ProtectedPaths:
        paths = ProtectedPaths(
            state_dir=state,
            lockfile=tmp_path / "caplet.lock",
            plugins_dir=tmp_path / "plugins",
            runtime=(),
        )
        asked.append(paths)
        return paths

    identity = worker_identity()
    read = (parse_capability(f"fs.read:{granted}"),)
    assert plan_grants("p", read, protected=protected, identity=identity).masks == ()
    assert len(asked) == 1
    state.rename(granted / "state")
    state.symlink_to(granted / "state")
    plan = plan_grants("p", read, protected=protected, identity=identity)
    assert plan.masks == (str(granted / "state"),)
    assert "caplet's state directory" in plan.notes[0]
    assert len(asked) == 2
    none = (parse_capability("env.read:HOME"),)
    assert plan_grants("p", none, protected=protected, identity=identity).grants == ()
    assert len(asked) == 2  # nothing to check against them: not even asked


def test_a_program_inside_another_hosts_writable_grant_is_refused(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    data: Path,
) -> None:
    """Red team, round 4: two caplet processes on one state directory (a long-running
    ``caplet mcp`` and a ``caplet call``). One enabled a plugin writing ``/data``; the
    other enabled a plugin approved to run ``/data/tool``, unaware of the first: the
    writer re-points the tool and the runner's next worker runs anything."""
    tool = data / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    _tool(make_plugin, "writer", "fs.write")
    with (
        make_host(plugins_dir, state_dir, launcher) as first,
        make_host(plugins_dir, state_dir, launcher) as second,
    ):
        first.discover()
        second.discover()
        assert first.enable("writer", config={"root": str(data)}, consent=True)
        outcome = second.enable("runner", consent=True)
        assert not outcome
        assert str(tool) in outcome.reason
        assert "writer" in outcome.reason
        # Disabled there, it is no longer in the way here.
        assert first.disable("writer")
        assert second.enable("runner", consent=True)
        # The other order: the runner's host is enabled first.
        refused = first.enable("writer", config={"root": str(data)}, consent=True)
        assert not refused
        assert str(tool) in refused.reason
        assert "runner (enabled by another caplet process)" in refused.reason
    # A host that is gone (its run directory's lock released) is in nobody's way.
    with make_host(plugins_dir, state_dir, launcher) as third:
        third.discover()
        assert third.enable("writer", config={"root": str(data)}, consent=True)


def test_a_program_inside_a_writable_grant_of_a_host_on_another_state_directory_is_refused(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    data: Path,
    tmp_path: Path,
) -> None:
    """attack22: round 4's check read the peers of this state directory only; a host of
    the same user on another one (``CAPLET_STATE_DIR`` per project, an application's
    ``state_dir=``) enabled the writer of ``/data`` unseen, and the runner of
    ``/data/tool`` here was granted it."""
    tool = data / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    _tool(make_plugin, "writer", "fs.write")
    with (
        make_host(plugins_dir, tmp_path / "project-state", launcher) as first,
        make_host(plugins_dir, state_dir, launcher) as second,
    ):
        first.discover()
        second.discover()
        assert first.enable("writer", config={"root": str(data)}, consent=True)
        outcome = second.enable("runner", consent=True)
        assert not outcome, "a program another state directory's plugin may write was granted"
        assert "writer (enabled by another caplet process)" in outcome.reason
        # Near miss: disabled there, it is no longer in the way here.
        assert first.disable("writer")
        assert second.enable("runner", consent=True)


WRITER = """
def create_functions(config):
    def rewrite(path, data):
        with open(path, "r+b") as handle:
            handle.write(data.encode())
        return True

    return {"main": {"rewrite": rewrite}}
"""


@pytest.mark.security
@pytest.mark.parametrize("order", ["writer-first", "runner-first"])
def test_a_program_with_a_hard_link_in_a_writable_grant_is_refused(
    host: PluginHost, make_plugin: PluginFactory, data: Path, tmp_path: Path, order: str
) -> None:
    """Red team, round 4: ``proc.exec:/opt/tools/tool`` whose inode has a second
    name, ``/data/alias``, in another plugin's writable grant. No path check sees
    it (the program's path and the directories above it are nobody's grant), and
    the writer rewrote the approved program's bytes through its own name."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    os.link(tool, data / "alias")
    give_to_worker(data, tools)  # the worker's own file: what a user's ~/bin holds
    tools.chmod(0o755)
    make_runner(make_plugin, tool)
    make_plugin(
        "writer",
        source=WRITER,
        extra=f'capabilities = ["fs.write:{data}"]',
        modules='[modules.main]\nfunctions = ["rewrite"]\n',
    )
    host.discover()
    if order == "writer-first":
        assert host.enable("writer", consent=True)
    outcome = host.enable("runner", consent=True)
    if outcome and order == "writer-first":
        # What the refusal prevents: the approved program, rewritten by another plugin.
        host.call("writer", "main.rewrite", str(data / "alias"), "#!")
        assert tool.read_bytes()[:2] != b"#!", "another plugin rewrote the approved program"
    assert not outcome, "a program another name of which may lie in a writable grant"
    assert str(tool) in outcome.reason
    assert "hard link" in outcome.reason


def test_two_hosts_enabling_at_once_are_judged_one_after_the_other(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    data: Path,
) -> None:
    """The writer is enabled in the first host *while* the second host's enable of
    the runner waits for consent, after its plan was checked: the runner's enable
    is judged again, under the hosts' shared lock, before it is published."""
    tool = data / "tool"
    tool.write_bytes(Path("/usr/bin/true").read_bytes())
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    _tool(make_plugin, "writer", "fs.write")
    with (
        make_host(plugins_dir, state_dir, launcher) as first,
        make_host(plugins_dir, state_dir, launcher) as second,
    ):
        first.discover()
        second.discover()

        def meanwhile(_request: object) -> bool:
            assert first.enable("writer", config={"root": str(data)}, consent=True)
            return True

        outcome = second.enable("runner", consent=meanwhile)
        assert not outcome
        assert "writer (enabled by another caplet process)" in outcome.reason
        assert str(tool) in outcome.reason


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_program_whose_interpreter_is_no_regular_file_is_refused_without_waiting(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path, kind: str
) -> None:
    """Red team round 17: the enable reads each approved program's ``#!`` line (and
    ELF interpreter) to grant the interpreter too, and read the interpreter it names
    the same way, open(2) blocking, whatever it was. A script whose ``#!`` names a
    FIFO (``/run/initctl``, ``/run/systemd/inaccessible/fifo`` on a systemd host; one
    a writer of the program's folder makes) held ``host.enable`` in open(2) for good,
    and with it the host's lifecycle lock (every other enable, disable and discovery
    of that host waited behind it); a character device was opened (as root, on a
    root host: ``/dev/tty`` read the operator's next line) and granted as an
    executable."""
    interpreter = tmp_path / "fifo" if kind == "fifo" else Path("/dev/zero")
    if kind == "fifo":
        os.mkfifo(interpreter)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    tool.write_text(f"#!{interpreter}\necho hi\n", encoding="utf-8")
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    host.discover()
    with fifo_released(interpreter):
        outcome = host.enable("runner", consent=True)
    assert not outcome, "an interpreter that is no regular file was granted"
    assert f"proc.exec program {str(interpreter)!r} is not a regular file" in outcome.reason


def test_a_script_with_an_ordinary_interpreter_is_still_granted_and_runs(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    """The near miss of the test above: ``#!/bin/sh`` (a link on merged-/usr hosts
    to dash or bash, itself with an ELF interpreter) is granted and runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    tool.write_text("#!/bin/sh\necho hello from the script\n", encoding="utf-8")
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    host.discover()
    assert host.enable("runner", consent=True)
    assert host.call("runner", "main.run", [str(tool)]) == "hello from the script\n"


@pytest.mark.parametrize("entry", ["", ".", "bin"])
def test_a_program_name_is_never_found_through_a_relative_path_entry(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    entry: str,
) -> None:
    """Red team round 17: ``proc.exec:NAME`` is looked up on the host's ``PATH`` at
    enable, and an empty or relative entry there (``PATH=$PATH:`` is a common slip)
    is the host's *current directory*: run in a cloned project, ``caplet`` granted
    the project's own ``./bin/tool`` (or ``./tool``) as the approved ``tool``, whose
    approval was given for the one on the operator's path. The grant was a relative
    path, checked for links from ``/`` (``link_hops`` takes absolute paths). Go's
    ``exec.LookPath`` refuses the same since 1.19 (``ErrDot``)."""
    project = tmp_path / "project"
    (project / "bin").mkdir(parents=True)
    for folder in (project, project / "bin"):
        planted = folder / "tool-r17"
        planted.write_text("#!/bin/sh\necho the projects own program\n", encoding="utf-8")
        planted.chmod(0o755)
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", f"{entry}:/usr/bin:/bin")
    make_runner(make_plugin, "tool-r17")
    host.discover()
    outcome = host.enable("runner", consent=True)
    assert not outcome, "a program in the current directory was granted"
    assert "proc.exec program 'tool-r17' was not found on this host" in outcome.reason
    assert "relative entries of PATH are not searched" in outcome.reason


def test_a_program_name_is_still_found_on_the_absolute_entries_of_path(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The near miss: the same name in an absolute directory of ``PATH`` (after a
    relative entry that does not hold it) is granted and runs."""
    tools = tmp_path / "tools"
    tools.mkdir()
    program = tools / "tool-r17"
    program.write_text("#!/bin/sh\necho the operators program\n", encoding="utf-8")
    program.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"nowhere::{tools}:/usr/bin:/bin")
    make_runner(make_plugin, "tool-r17")
    host.discover()
    assert host.enable("runner", consent=True)
    assert host.call("runner", "main.run", [str(program)]) == "the operators program\n"


INSTALLED_SOURCE = """
def create_functions(config):
    return {"main": {"run": lambda: "the approved code"}}
"""

REWRITER = """
def create_functions(config):
    def write(path, text):
        with open(path, "w") as handle:
            handle.write(text)
        return True

    return {"main": {"write": write}}
"""


def make_writer(make_plugin: PluginFactory) -> None:
    """The plugin ``writer`` (:data:`REWRITER`), granted ``fs.write`` on its configured root."""
    make_plugin(
        "writer",
        source=REWRITER,
        extra=rooted("fs.write"),
        modules='[modules.main]\nfunctions = ["write"]\n',
    )


def test_a_writable_grant_never_holds_an_installed_plugins_code(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Red team round 17: the plugins directory is guarded against writable grants
    (a plugin rewriting another's code, whose approval then carries over: same
    capabilities, same agent text), but an installed plugin's folder was not. With
    installed plugins on ``dist_path`` (an application's plugin site, a
    ``pip install --target`` folder on ``PYTHONPATH``), plugin ``writer`` granted
    ``fs.write`` over that folder rewrote ``hello``'s ``plugin.py``; the next host
    enabled ``hello`` with "approval ... carried over: nothing widened" and ran the
    writer's code with hello's grants."""
    monkeypatch.setenv("CAPLET_TEST_IMPORT_MARKER", str(tmp_path / "imported"))
    site = tmp_path / "site"
    folder = make_distribution(site, "hello", source=INSTALLED_SOURCE)
    (folder / "data").mkdir()
    (site / "cache").mkdir()
    give_to_worker(site)
    make_writer(make_plugin)
    with make_host(plugins_dir, state_dir, launcher, dist_path=[site]) as host:
        host.discover()
        assert host.audit("hello")
        assert host.approve("hello")
        assert host.enable("hello")
        assert host.call("hello", "main.run") == "the approved code"
        outcome = host.enable("writer", config={"root": str(folder)}, consent=True)
        if outcome:  # the attack, where the grant is given
            evil = INSTALLED_SOURCE.replace("the approved code", "the writer's code")
            assert host.call("writer", "main.write", str(folder / "plugin.py"), evil)
    with make_host(plugins_dir, state_dir, launcher, dist_path=[site]) as host:
        host.discover()
        assert host.enable("hello")
        assert host.call("hello", "main.run") == "the approved code"
        for root in (site, folder.parent, folder, folder / "data"):
            outcome = host.enable("writer", config={"root": str(root)}, consent=True)
            assert not outcome, f"fs.write:{root} over an installed plugin's code was granted"
            assert f"{folder}, an installed plugin's code" in outcome.reason
        # The near miss: a folder beside the distributions, holding no plugin, is granted.
        assert host.enable("writer", config={"root": str(site / "cache")}, consent=True)
        assert host.call("writer", "main.write", str(site / "cache" / "note"), "ok")


def test_a_file_a_programs_interpreter_line_names_is_not_granted_unless_it_is_a_program(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    """Red team round 17: every file a ``#!`` line (or PT_INTERP) names was granted as
    an interpreter, bound into the jail at its path, whatever it was. The approval of
    ``proc.exec:/opt/vendor/tool`` (a script whose author wrote ``#!`` followed by
    the path of the operator's SSH key, or any file the worker's uid may read) put
    that file in the plugin's jail, readable: a read grant nobody was shown. An
    interpreter must be something the kernel can run: a regular file with an
    execute bit."""
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n", encoding="utf-8")
    secret.chmod(0o600)
    give_to_worker(tmp_path / "home")  # the worker is the key's owner (an unprivileged host)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    tool.write_text(f"#!{secret}\n", encoding="utf-8")
    tool.chmod(0o755)
    make_plugin(
        "runner",
        source=TOOLS,
        extra=f'capabilities = ["proc.exec:{tool}"]',
        modules='[modules.tools]\nfunctions = ["read"]\n',
    )
    host.discover()
    outcome = host.enable("runner", consent=True)
    if outcome:  # the attack, where the grant is given
        leaked = host.call("runner", "tools.read", str(secret))
        key = b"-----BEGIN OPENSSH".hex()
        assert not (isinstance(leaked, str) and leaked.startswith(key)), "the key was read"
    assert not outcome, "a file that is no program was granted as an interpreter"
    assert f"proc.exec program {str(secret)!r} is not executable" in outcome.reason


def test_a_script_whose_interpreter_line_holds_a_nul_is_granted_as_the_kernel_runs_it(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    """Red team round 17: ``#!/bin/sh<NUL>...`` (the kernel runs /bin/sh: it reads the
    name up to the NUL) made the enable's os.open raise ValueError ("embedded null
    byte"), out of ``host.enable`` as a traceback."""
    tool = tmp_path / "tool"
    tool.write_bytes(b"#!/bin/sh\x00 ignored\necho run by sh\n")
    tool.chmod(0o755)
    make_runner(make_plugin, tool)
    host.discover()
    assert host.enable("runner", consent=True)
    assert host.call("runner", "main.run", [str(tool)]) == "run by sh\n"


PLANTED = "import os\nos.environ['CAPLET_R17_PLANTED'] = 'ran in the host'\n"


@pytest.mark.parametrize("where", ["entry", "package"])
def test_a_writable_grant_never_reaches_where_the_host_imports_from(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    """Red team round 17: the Python runtime is guarded against writable grants (its
    prefixes, the folders holding caplet and msgpack), but the host imports from every
    folder on ``sys.path``: a ``PYTHONPATH`` folder and, run as ``python -m caplet`` or
    ``python app.py``, the current or the application's folder. A plugin granted
    ``fs.write`` on one wrote a module there (or into a package folder there), and
    the host's next import of that name ran the plugin's code in the host, outside
    every sandbox layer, as the host's user."""
    lib = tmp_path / "pylib"
    (lib / "r17pkg").mkdir(parents=True)
    (lib / "r17pkg" / "__init__.py").write_text("", encoding="utf-8")
    give_to_worker(lib)
    # Where PYTHONPATH puts it: after the script's folder.
    monkeypatch.setattr(sys, "path", [sys.path[0], str(lib), *sys.path[1:]])
    monkeypatch.setenv("CAPLET_R17_PLANTED", "")  # restored (removed) at the end
    monkeypatch.delenv("CAPLET_R17_PLANTED")
    root = lib if where == "entry" else lib / "r17pkg"
    make_writer(make_plugin)
    host.discover()
    outcome = host.enable("writer", config={"root": str(root)}, consent=True)
    if outcome:  # the attack, where the grant is given
        module = "r17_planted" if where == "entry" else "r17pkg.r17_planted"
        assert host.call("writer", "main.write", str(root / "r17_planted.py"), PLANTED)
        importlib.invalidate_caches()
        try:
            importlib.import_module(module)
        finally:
            for name in ("r17_planted", "r17pkg.r17_planted", "r17pkg"):
                sys.modules.pop(name, None)
        assert "CAPLET_R17_PLANTED" not in os.environ, "the plugin's code ran in the host"
    assert not outcome, "a folder the host imports from was granted writable"
    assert f"{lib}, a folder the host imports Python modules from" in outcome.reason


def test_a_writable_grant_beside_the_import_path_or_in_the_apps_folder_is_granted(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The near misses: a folder beside a ``sys.path`` entry (a data folder next to the
    library folder), and a data folder inside the script's own folder (``sys.path[0]``:
    ``python app.py`` granting ``/srv/app/data``) are granted and written; the script's
    folder itself is not."""
    lib = tmp_path / "pylib"
    lib.mkdir()
    app = tmp_path / "app"
    (app / "data").mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out, app)
    monkeypatch.setattr(sys, "path", [str(app), str(lib), *sys.path[1:]])
    make_writer(make_plugin)
    host.discover()
    for root in (out, app / "data"):
        assert host.enable("writer", config={"root": str(root)}, consent=True)
        assert host.call("writer", "main.write", str(root / "note.txt"), "ok")
    outcome = host.enable("writer", config={"root": str(app)}, consent=True)
    assert not outcome
    assert f"contains {app}, a folder the host imports Python modules from" in outcome.reason


def test_a_writable_grant_never_can_create_the_users_site_packages(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Red team round 17: outside a virtual environment the interpreter imports from the
    user's site-packages (``~/.local/lib/pythonX.Y/site-packages``) and runs its ``.pth``
    files at every start, but puts it on ``sys.path`` only when it exists. A plugin
    granted ``fs.write:~/.local`` before it existed could create it with a ``.pth`` of
    its own: the next host (any Python of that user) ran it. The near miss: a folder
    inside ``~/.local`` that is not on the way to it is still granted."""
    home = tmp_path / "home"
    local = home / ".local"
    (local / "share" / "notes").mkdir(parents=True)
    give_to_worker(home)
    user_site = local / "lib" / "python3.11" / "site-packages"
    monkeypatch.setattr(site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(user_site))
    make_writer(make_plugin)
    host.discover()
    outcome = host.enable("writer", config={"root": str(local)}, consent=True)
    assert not outcome, "a grant that can create the user's site-packages was given"
    assert f"contains {local}, a folder the host imports Python modules from" in outcome.reason
    assert host.enable("writer", config={"root": str(local / "share" / "notes")}, consent=True)


MAKER = """
import os

def create_functions(config):
    def make(folder, name, data):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(data)
        return True

    return {"main": {"make": make}}
"""


@pytest.mark.parametrize("which", ["platform", "CAPLET_STATE_DIR"])
def test_a_writable_grant_cannot_make_the_users_default_state_directory(
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    which: str,
) -> None:
    """attack22: the default state directories (the platform's, ``CAPLET_STATE_DIR``'s)
    are guarded against writable grants, by inode, so only once they exist. An
    application on a state directory of its own granted ``fs.write:~/.local/state``
    before the user ever ran ``caplet`` there; the plugin made ``caplet/`` in it, with
    a ``caplet.db`` of its own, which the next ``caplet`` on the default state
    directory opens as its approvals (on a user's host the worker is the user, so the
    ownership check passes), and it kept writing there for as long as it ran."""
    if which == "platform":
        state = user_state_dir()
    else:
        state = tmp_path / "shared" / "project-state"
        monkeypatch.setenv("CAPLET_STATE_DIR", str(state))
    below = state.parent
    below.mkdir(parents=True)
    give_to_worker(below)
    make_plugin(
        "maker",
        source=MAKER,
        extra=rooted("fs.write"),
        modules='[modules.main]\nfunctions = ["make"]\n',
    )
    with make_host(plugins_dir, tmp_path / "app-state", launcher) as host:
        host.discover()
        outcome = host.enable("maker", config={"root": str(below)}, consent=True)
        if outcome:  # the attack, where the grant is given (main)
            assert host.call("maker", "main.make", str(state), "caplet.db", "forged approvals")
            assert not (state / "caplet.db").exists(), (
                "a plugin made a default state directory and its database"
            )
        assert not outcome, "a grant that can make a default state directory was given"
        assert f"is writable and contains {below}" in outcome.reason
        assert str(state) in outcome.reason


def test_a_writable_grant_beside_where_the_default_state_directory_would_be_is_granted(
    plugins_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # Near miss: a folder inside the would-be state directory's parent, but not it.
    notes = user_state_dir().parent / "notes"
    notes.mkdir(parents=True)
    give_to_worker(notes)
    make_plugin(
        "maker",
        source=MAKER,
        extra=rooted("fs.write"),
        modules='[modules.main]\nfunctions = ["make"]\n',
    )
    with make_host(plugins_dir, tmp_path / "app-state", launcher) as host:
        host.discover()
        outcome = host.enable("maker", config={"root": str(notes)}, consent=True)
        assert outcome, outcome.reason
        assert host.call("maker", "main.make", str(notes / "sub"), "todo.txt", "kept")


LOOKER = """
import os

def create_functions(config):
    def look(path):
        try:
            inside = os.stat(path)
            above = os.stat(os.path.dirname(path))
        except OSError as exc:
            return {"errno": exc.errno}
        try:
            with open(os.path.join(path, "caplet.db"), "rb") as handle:
                database = handle.read(16).hex()
        except OSError as exc:
            database = exc.errno
        return {"hidden": inside.st_dev != above.st_dev, "db": database}

    def read(path):
        with open(path) as handle:
            return handle.read()

    return {"main": {"look": look, "read": read}}
"""


@pytest.mark.parametrize("which", ["CAPLET_STATE_DIR", "platform"])
def test_a_read_grant_hides_a_default_state_directory_made_after_the_worker_started(
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    which: str,
) -> None:
    """attack24: a read grant hides the state directories below it that exist when the
    worker starts. An application on a state directory of its own granted
    ``fs.read`` over the folder where the default state directory would be made
    (``CAPLET_STATE_DIR``'s, before the user's first ``caplet`` there); the worker
    started, then a ``caplet`` on that state directory made it and its ``caplet.db``,
    and the running plugin read the approvals of every process made after it."""
    if which == "platform":
        state = user_state_dir()
    else:
        state = tmp_path / "shared" / "project-state"
        monkeypatch.setenv("CAPLET_STATE_DIR", str(state))
    shared = state.parent
    shared.mkdir(parents=True, exist_ok=True)
    (shared / "notes.txt").write_text("public\n", encoding="utf-8")
    make_plugin(
        "looker",
        source=LOOKER,
        extra=rooted("fs.read"),
        modules='[modules.main]\nfunctions = ["look", "read"]\n',
    )
    with make_host(plugins_dir, tmp_path / "app-state", launcher) as host:
        host.discover()
        outcome = host.enable("looker", config={"root": str(shared)}, consent=True)
        assert outcome, outcome.reason
        assert host.call("looker", "main.read", str(shared / "notes.txt")) == "public\n"
        with make_host(plugins_dir, state, launcher) as later:
            later.discover()  # makes the state directory and its caplet.db, as any host does
        assert (state / "caplet.db").is_file()
        seen = host.call("looker", "main.look", str(state))
        assert seen != {"errno": 2}, "the state directory is not there in the jail"
        assert seen["hidden"], f"a state directory made later is not hidden: {seen}"
        assert seen["db"] in (2, 13)
        notes = [d.detail for d in host.manager.store.decisions("looker") if d.action == "grant"]
    assert any(f"caplet's state directory {state} is hidden" in note for note in notes)


def test_a_read_grant_where_a_state_directory_cannot_be_made_to_hide_it_is_refused(
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the host cannot make now to hide, another process may make later: refused,
    # naming the plugin, the capability and the fix. Near miss: a read grant beside
    # where it would be made is granted, and nothing is made for it.
    shared = tmp_path / "shared"
    (shared / "notes").mkdir(parents=True)
    (shared / "notes" / "todo.txt").write_text("kept\n", encoding="utf-8")
    (shared / "in-the-way").write_text("a file\n", encoding="utf-8")
    state = shared / "in-the-way" / "state"
    monkeypatch.setenv("CAPLET_STATE_DIR", str(state))
    make_plugin(
        "looker",
        source=LOOKER,
        extra=rooted("fs.read"),
        modules='[modules.main]\nfunctions = ["look", "read"]\n',
    )
    with make_host(plugins_dir, tmp_path / "app-state", launcher) as host:
        host.discover()
        outcome = host.enable("looker", config={"root": str(shared)}, consent=True)
        assert not outcome, "a grant over where a state directory may be made later was given"
        assert (
            f"plugin 'looker': capability 'fs.read:${{config.root}}' (path '{shared}') contains "
            f"{shared}, the folder where the caplet state directory {state} would be made, "
            "and caplet cannot make it now"
        ) in outcome.reason
        assert f"mkdir -m 700 {state}" in outcome.reason
        beside = host.enable("looker", config={"root": str(shared / "notes")}, consent=True)
        assert beside, beside.reason
        assert host.call("looker", "main.read", str(shared / "notes" / "todo.txt")) == "kept\n"


def test_a_read_grant_beside_where_a_state_directory_would_be_makes_nothing(
    plugins_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Near miss of the made-in-advance state directory: only a grant that would
    # contain it makes it.
    state = tmp_path / "elsewhere" / "project-state"
    monkeypatch.setenv("CAPLET_STATE_DIR", str(state))
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n", encoding="utf-8")
    make_plugin(
        "looker",
        source=LOOKER,
        extra=rooted("fs.read"),
        modules='[modules.main]\nfunctions = ["look", "read"]\n',
    )
    with make_host(plugins_dir, tmp_path / "app-state", launcher) as host:
        host.discover()
        assert host.enable("looker", config={"root": str(data)}, consent=True)
        assert host.call("looker", "main.read", str(data / "a.txt")) == "a\n"
    assert not state.parent.exists()
