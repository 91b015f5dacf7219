"""Fixtures of the reference plugins' tests (plugins/, issue 6 point 6).

The tests live in ``tests/plugins/`` because they test the top-level
``plugins/`` folder (as ``tests/_host`` tests ``src/caplet/_host``), not a
package of caplet. Every test runs the real plugin, copied from the
repository into ``tmp_path`` (the repository is never modified, and no
``__pycache__`` can end up in the shipped folders), in a real strict
sandbox: one :class:`SandboxLauncher` per test module, a fresh
:class:`PluginHost` per test.

The hosts keep the default circuit breaker (3 consecutive failures open
it): the plugins refuse bad input with ``caplet.plugin.Refused`` subclasses,
which do not count, so a test may make a plugin refuse one bad path after
another without opening it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from caplet import PluginCallError, PluginHost, Policy
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host

REPO = Path(__file__).resolve().parents[2]
#: The reference plugins, as shipped.
REFERENCE = REPO / "plugins"


def install(plugins_dir: Path, *names: str) -> None:
    """Copy the reference plugins ``names`` into ``plugins_dir``."""
    for name in names:
        shutil.copytree(
            REFERENCE / name, plugins_dir / name, ignore=shutil.ignore_patterns("__pycache__")
        )


def reference_host(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    policy: Policy | None = None,
    **options: Any,
) -> PluginHost:
    """A host on ``launcher`` with ``policy`` (the default one: 3 failures open the breaker)."""
    return make_host(plugins_dir, state_dir, launcher, policy=policy or Policy(), **options)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The base directory the file plugins are configured with."""
    path = tmp_path / "base"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the base holding a secret the plugins must never reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n", encoding="utf-8")
    return path


@dataclass
class Caller:
    """Calls one plugin's module and checks what its errors reveal and whether they count."""

    host: PluginHost
    plugin: str
    module: str
    #: Host paths no message may contain.
    hidden: tuple[str, ...]

    def __call__(self, function: str, *args: Any) -> Any:
        return self.host.call(self.plugin, f"{self.module}.{function}", *args)

    @property
    def failures(self) -> int:
        """Consecutive failures the plugin's circuit breaker has counted."""
        return self.host.breaker(self.plugin).failures

    def refused(self, function: str, *args: Any, refusal: bool = True) -> PluginCallError:
        """The PluginCallError of a refused call; its message names no host path.

        With ``refusal`` (the default) the plugin must have raised a
        ``...Refused`` class and the breaker counted nothing; without, the
        error must be a real failure, counted once.
        """
        before = self.failures
        with pytest.raises(PluginCallError) as info:
            self.host.call(self.plugin, f"{self.module}.{function}", *args)
        message = str(info.value)
        for path in self.hidden:
            assert path not in message, f"{message!r} reveals the host path {path!r}"
        assert info.value.exc_type.endswith("Refused") is refusal, message
        assert self.failures == (before if refusal else before + 1), message
        return info.value

    def message(self, function: str, *args: Any, refusal: bool = True) -> str:
        """``exc_type: message`` of a refused call, without the 'plugin ... raised' prefix."""
        error = self.refused(function, *args, refusal=refusal)
        text = str(error)
        prefix = f"plugin '{self.plugin}': {self.module}.{function} raised "
        assert text.startswith(prefix), text
        return text.removeprefix(prefix)
