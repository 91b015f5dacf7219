"""Sandbox fixtures: plugins written into tmp_path, workers that are always closed."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._config._schema import ConfigValue
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._protocol import DEFAULT_MAX_FRAME_BYTES
from caplet._sandbox._sandboxed import SandboxLauncher
from caplet._sandbox._subprocess import SubprocessLauncher, SubprocessWorker
from tests.conftest import own_identity


@dataclass
class Launch:
    """Writes a plugin snapshot, starts a worker on it, and remembers to close it."""

    root: Path
    launcher: SubprocessLauncher = field(
        default_factory=lambda: SubprocessLauncher(identity=own_identity())
    )
    workers: list[SubprocessWorker] = field(default_factory=list)
    count: int = 0

    def spec(
        self,
        source: str,
        *,
        modules: Mapping[str, tuple[str, ...]] | None = None,
        config: Mapping[str, ConfigValue] | None = None,
        files: Mapping[str, str] | None = None,
        entry: str = "plugin.py",
        plugin: str = "demo",
        start_timeout_s: float = 30.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> WorkerSpec:
        self.count += 1
        snapshot = self.root / f"snapshot{self.count}"
        workdir = self.root / f"work{self.count}"
        snapshot.mkdir()
        workdir.mkdir()
        (snapshot / entry).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / entry).write_text(textwrap.dedent(source), encoding="utf-8")
        for name, text in (files or {}).items():
            (snapshot / name).write_text(textwrap.dedent(text), encoding="utf-8")
        return WorkerSpec(
            plugin=plugin,
            snapshot_dir=snapshot,
            entry=entry,
            config=dict(config or {}),
            modules=dict(modules if modules is not None else {"demo": ("run",)}),
            workdir=workdir,
            start_timeout_s=start_timeout_s,
            max_frame_bytes=max_frame_bytes,
        )

    def start(self, spec: WorkerSpec) -> SubprocessWorker:
        worker = self.launcher.start(spec)
        self.workers.append(worker)
        return worker

    def __call__(
        self,
        source: str,
        *,
        modules: Mapping[str, tuple[str, ...]] | None = None,
        config: Mapping[str, ConfigValue] | None = None,
        files: Mapping[str, str] | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> SubprocessWorker:
        spec = self.spec(
            source, modules=modules, config=config, files=files, max_frame_bytes=max_frame_bytes
        )
        return self.start(spec)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    helper = Launch(tmp_path)
    yield helper
    for worker in helper.workers:
        worker.close()


#: A module that runs native code (``ctypes``) when imported: what the worker-guard tests'
#: plugins ship as data (``helpers.txt``) and try to run; it answers 4 when it ran.
EVIL = "import ctypes\nX = ctypes.sizeof(ctypes.c_int)\n"


@pytest.fixture
def red_team_host(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher
) -> Iterator[PluginHost]:
    """A host on the strict launcher with the static gate off (``red_team=True``): what a
    test of the worker's guards measures is the worker alone, not the scanner's refusal."""
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher, red_team=True) as h:
        yield h
