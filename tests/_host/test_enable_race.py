"""One snapshot per enable (issue 13, point 5): files swapped during enable change nothing.

The red team's attack: while ``enable`` ran, a thread swapped ``plugin.py``
between a clean variant and one importing ctypes (which the danger gate
refuses); the refused variant ran, because enable audited one snapshot and
recorded the hash of a later read. Now the bytes that are audited, gated,
hashed, recorded and loaded are one snapshot: whatever the race, the worker
runs the variant that passed the gate, or enable refuses.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._errors import CapletError
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory

CLEAN = """
def create_functions(config):
    return {"main": {"run": lambda: "clean"}}
"""

#: Refused by the danger gate (native code, no capability covers it).
DIRTY = """
import ctypes

def create_functions(config):
    return {"main": {"run": lambda: "dirty " + str(ctypes.sizeof(ctypes.c_int))}}
"""

#: The manifest flips too: a variant that declares a capability it should not get.
MANIFEST = (
    'name = "racer"\nversion = "1.0.0"\ndescription = "Races."\n{extra}\n'
    '[modules.main]\nfunctions = ["run"]\n'
)


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


class Swapper(threading.Thread):
    """Swaps the plugin's files between the clean and the dirty variant until stopped."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.done = threading.Event()
        self.swaps = 0
        self.staged = {
            name: directory.parent / f".{name}"
            for name in ("clean.py", "dirty.py", "clean.toml", "dirty.toml")
        }
        self.staged["clean.py"].write_text(CLEAN, encoding="utf-8")
        self.staged["dirty.py"].write_text(DIRTY, encoding="utf-8")
        self.staged["clean.toml"].write_text(MANIFEST.format(extra=""), encoding="utf-8")
        self.staged["dirty.toml"].write_text(
            MANIFEST.format(extra='capabilities = ["env.read:HOME"]'), encoding="utf-8"
        )

    def run(self) -> None:
        variants = ("clean", "dirty")
        while not self.done.is_set():
            variant = variants[self.swaps % 2]
            # Atomic swaps (rename) and torn ones (rewrites) alternate.
            if self.swaps % 3:
                for suffix, target in ((".py", "plugin.py"), (".toml", "plugin.toml")):
                    staged = self.staged[variant + suffix]
                    temporary = self.directory / f".{target}.tmp"
                    temporary.write_bytes(staged.read_bytes())
                    os.replace(temporary, self.directory / target)
            else:
                (self.directory / "plugin.py").write_bytes(
                    self.staged[variant + ".py"].read_bytes()
                )
            self.swaps += 1

    def stop(self) -> None:
        self.done.set()
        self.join()


def test_swapping_files_during_enable_never_runs_the_gated_variant(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    directory = make_plugin("racer", source=CLEAN, manifest=MANIFEST.format(extra=""))
    host.discover()
    swapper = Swapper(directory)
    swapper.start()
    enabled = refused = 0
    try:
        for _ in range(40):
            outcome = host.enable("racer", consent=True)
            if not outcome:
                refused += 1
                continue
            enabled += 1
            try:
                answer = host.call("racer", "main.run")
            except CapletError:
                continue  # a start may fail, never load the gated code
            assert answer == "clean", "the variant the danger gate refuses ran"
            # What was recorded is what was audited: a clean audit of that hash.
            info = host.manager.require_plugin("racer")
            assert info.audit is not None
            assert info.audit.content_hash == host.manager.enabled_hash("racer")
            # The capabilities granted are the ones that content declares and the
            # audit reviewed, never a manifest read before or after it.
            granted = [c.declared for c in info.capabilities]
            assert granted == [c.declared for c in info.manifest.capabilities]
            assert list(info.audit.declared_capabilities) == granted
    finally:
        swapper.stop()
    assert swapper.swaps > 40, "the race ran"
    assert enabled + refused == 40
