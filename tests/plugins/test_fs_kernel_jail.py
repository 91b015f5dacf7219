"""The kernel jail under the file plugins: with the plugin's own checks bypassed,
the sandbox (mounts and Landlock) still confines a plugin to its granted base.

The plugins here are not the reference ones: they have the same capabilities
(``fs.read:${config.root}`` or ``fs.write:${config.root}``) but open whatever
path and flags the test gives them, with no path jail at all. Everything the
reference plugins refuse in their own code must then be refused by the
kernel -- except hard links (the last test), which is why the reference
plugins refuse files with more than one link themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caplet import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import PluginFactory, give_to_worker
from tests.plugins.conftest import reference_host

RAW = """
import errno
import os


def create_functions(config):
    def read(path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            return ["error", errno.errorcode.get(exc.errno, str(exc.errno))]
        try:
            return ["ok", os.read(fd, 4096).decode()]
        finally:
            os.close(fd)

    def write(path, flags, text):
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            return ["error", errno.errorcode.get(exc.errno, str(exc.errno))]
        try:
            os.write(fd, text.encode())
            return ["ok", ""]
        except OSError as exc:
            return ["error", errno.errorcode.get(exc.errno, str(exc.errno))]
        finally:
            os.close(fd)

    def listdir(path):
        try:
            return ["ok", sorted(os.listdir(path))]
        except OSError as exc:
            return ["error", errno.errorcode.get(exc.errno, str(exc.errno))]

    return {"raw": {"read": read, "write": write, "listdir": listdir}}
"""

MANIFEST = """
name = "{name}"
version = "1.0.0"
description = "Opens any path it is given, with no checks of its own."
capabilities = ["{kind}:${{config.root}}"]

[modules.raw]
functions = ["read", "write", "listdir"]

[config.root]
type = "string"
"""

#: How the kernel says no: not there (not mounted), not allowed (Landlock), read-only mount.
REFUSED = {"ENOENT", "EACCES", "EPERM", "EROFS"}
CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


@pytest.fixture
def raw(
    make_plugin: PluginFactory,
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    base: Path,
    outside: Path,
) -> Iterator[PluginHost]:
    """A host with raw-read (fs.read on ``base``) and raw-write (fs.write on ``base``)."""
    for name, kind in (("raw-read", "fs.read"), ("raw-write", "fs.write")):
        make_plugin(name, source=RAW, manifest=MANIFEST.format(name=name, kind=kind))
    (base / "inside.txt").write_text("inside\n", encoding="utf-8")
    (base / "escape").symlink_to(outside / "secret.txt")
    (base / "escapedir").symlink_to(outside)
    give_to_worker(base)  # raw-write's grant: the worker's uid's (docs/security.md)
    with reference_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
        for name in ("raw-read", "raw-write"):
            outcome = host.enable(name, [f"root={base}"], consent=True)
            assert outcome, outcome.reason
        yield host


def _call(host: PluginHost, plugin: str, function: str, *args: Any) -> list[Any]:
    result: list[Any] = host.call(plugin, f"raw.{function}", *args)
    return result


def test_reads_outside_the_base_are_refused_by_the_kernel(
    raw: PluginHost, base: Path, outside: Path
) -> None:
    assert _call(raw, "raw-read", "read", str(base / "inside.txt")) == ["ok", "inside\n"]
    system = Path("/etc/hostname") if Path("/etc/hostname").is_file() else Path("/etc/passwd")
    assert system.read_bytes(), "the host itself can read it"
    for path in (
        str(system),
        str(outside / "secret.txt"),
        f"{base}/../outside/secret.txt",
        str(base / "escape"),
        str(base / "escapedir" / "secret.txt"),
    ):
        status, code = _call(raw, "raw-read", "read", path)
        assert (status, code in REFUSED) == ("error", True), (path, code)
    listing = _call(raw, "raw-read", "listdir", str(outside.parent))
    assert listing[0] == "error" or "outside" not in listing[1], listing


def test_a_read_grant_cannot_write_even_inside_the_base(raw: PluginHost, base: Path) -> None:
    status, code = _call(raw, "raw-read", "write", str(base / "new.txt"), CREATE, "x")
    assert (status, code in REFUSED) == ("error", True), code
    assert not (base / "new.txt").exists()
    status, code = _call(raw, "raw-read", "write", str(base / "inside.txt"), os.O_WRONLY, "x")
    assert (status, code in REFUSED) == ("error", True), code
    assert (base / "inside.txt").read_text(encoding="utf-8") == "inside\n"


def test_writes_outside_the_base_are_refused_by_the_kernel(
    raw: PluginHost, base: Path, outside: Path
) -> None:
    assert _call(raw, "raw-write", "write", str(base / "new.txt"), CREATE, "made") == ["ok", ""]
    assert (base / "new.txt").read_text(encoding="utf-8") == "made"
    for path in (
        str(outside / "new.txt"),
        f"{base}/../outside/new.txt",
        str(base / "escapedir" / "new.txt"),
        str(outside / "secret.txt"),
        str(base / "escape"),
        "/tmp/../etc/caplet-test-must-not-exist",
    ):
        status, code = _call(raw, "raw-write", "write", path, CREATE, "pwned")
        assert (status, code in REFUSED) == ("error", True), (path, code)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "top secret\n"
    assert not Path("/etc/caplet-test-must-not-exist").exists()


def test_a_hard_link_is_the_one_escape_the_kernel_cannot_see(
    raw: PluginHost, base: Path, outside: Path
) -> None:
    """A hard link is the same file under another name: mounts and Landlock see only the
    name inside the base, so the plugin must refuse linked files itself (fs-read does:
    tests/plugins/test_fs_read.py, fs-write too)."""
    os.link(outside / "secret.txt", base / "hardlink.txt")
    assert _call(raw, "raw-read", "read", str(base / "hardlink.txt")) == ["ok", "top secret\n"]
