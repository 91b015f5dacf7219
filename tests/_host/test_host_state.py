"""Issue 3, point 7: a hostile plugin cannot read, write, delete or lock the host's state."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from caplet import PluginHost
from tests.conftest import PluginFactory, give_to_worker

HOSTILE = """
import errno, fcntl, os

def create_functions(config):
    out = config["out"]

    def attempt(label, action):
        try:
            action()
            return [label, "ESCAPED"]
        except OSError as exc:
            return [label, errno.errorcode.get(exc.errno, str(exc.errno))]

    def read(path):
        with open(path, "rb") as handle:
            handle.read(1)

    def write(path):
        with open(path, "ab") as handle:
            handle.write(b"pwned")

    def lock(path):
        with open(path, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def symlink_then_read(target):
        link = os.path.join(out, "link")
        os.symlink(target, link)
        read(link)

    def hardlink(target):
        os.link(target, os.path.join(out, "hard"))

    def run(targets, host_pid):
        results = []
        for target in targets:
            relative = os.path.relpath(target, out)
            for label, action in (
                ("read", lambda: read(target)),
                ("read ..", lambda: read(os.path.join(out, relative))),
                ("write", lambda: write(target)),
                ("delete", lambda: os.unlink(target)),
                ("lock", lambda: lock(target)),
                ("symlink", lambda: symlink_then_read(target)),
                ("hardlink", lambda: hardlink(target)),
                ("/proc/self/root", lambda: read("/proc/self/root" + target)),
                ("/proc/1/root", lambda: read("/proc/1/root" + target)),
                ("/proc/host/root", lambda: read(f"/proc/{host_pid}/root" + target)),
            ):
                results.append([target, *attempt(label, action)])
                for leftover in ("link", "hard"):
                    try:
                        os.unlink(os.path.join(out, leftover))
                    except OSError:
                        pass
        return results

    return {"main": {"run": run}}
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_hostile_plugin_cannot_touch_state_lockfile_or_plugin_sources(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    give_to_worker(out)
    lockfile = tmp_path / "caplet.lock"
    lockfile.write_text("[plugins]\n")
    make_plugin(
        "hostile",
        source=HOSTILE,
        extra=('capabilities = ["fs.write:${config.out}"]\n[config.out]\ntype = "string"\n'),
    )
    with PluginHost(plugins_dir, state_dir=state_dir) as host:
        host.audit("hostile")
        database = state_dir / "caplet.db"
        source = plugins_dir / "hostile" / "plugin.py"
        targets = [database, lockfile, source]
        before = {t: _digest(t) for t in (lockfile, source)}
        assert host.enable("hostile", [f"out={out}"], consent=True), (
            "the plugin must load for the test to mean anything"
        )
        results = host.call("hostile", "main.run", [str(t) for t in targets], os.getpid())
        escaped = [r for r in results if r[2] == "ESCAPED"]
        assert escaped == []
        assert len(results) == 30
        assert {t: _digest(t) for t in (lockfile, source)} == before
        # The database changes (the host logs decisions) but was never written
        # by the plugin, and the host's state still works after the attempts.
        assert b"pwned" not in database.read_bytes()
        assert host.manager.store.integrity_check() == ("ok",)  # type: ignore[attr-defined]
        assert host.manager.store.decisions("hostile")
    assert sorted(p.name for p in out.iterdir()) == []
