"""Helpers of the ``ctx`` tests (issue 6): hosts on a shared sandbox launcher.

Each test module keeps one strict :class:`SandboxLauncher` (one zygote) for
all its tests and builds a fresh :class:`PluginHost` per test on it, so the
tests run real sandboxed workers without paying for a zygote each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from caplet import PluginHost
from caplet._sandbox._sandboxed import SandboxLauncher
from tests.conftest import PluginFactory


def make_host(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, **options: Any
) -> PluginHost:
    """A host on ``launcher`` (never closed by the host), static-only audits."""
    return PluginHost(
        plugins_dir,
        state_dir=state_dir,
        launcher=launcher,
        discover=False,
        auditor=None,
        **options,
    )


def enable(host: PluginHost, *names: str) -> None:
    """Discover and enable ``names`` in order; fail with the refusal's reason."""
    host.discover()
    for name in names:
        outcome = host.enable(name, consent=True)
        assert outcome, outcome.reason


def plugin(
    make_plugin: PluginFactory,
    name: str,
    source: str,
    *,
    functions: tuple[str, ...] = ("run",),
    module: str = "main",
    capabilities: tuple[str, ...] = (),
    requires: tuple[str, ...] = (),
    limits: str = "",
) -> Path:
    """A plugin declaring ``module.functions`` and ``capabilities``."""
    extra = f"capabilities = {list(capabilities)!r}\n".replace("'", '"')
    if requires:
        extra += f"requires = {list(requires)!r}\n".replace("'", '"')
    declared = ", ".join(f'"{f}"' for f in functions)
    modules = f"[modules.{module}]\nfunctions = [{declared}]\n"
    if limits:
        modules += f"[limits]\n{limits}\n"
    return make_plugin(name, source=source, extra=extra, modules=modules)
