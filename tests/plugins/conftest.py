"""Fixtures of the reference plugins' tests (plugins/, issue 6 point 6).

The tests live in ``tests/plugins/`` because they test the top-level
``plugins/`` folder (as ``tests/_host`` tests ``src/caplet/_host``), not a
package of caplet. Every test runs the real plugin, copied from the
repository into ``tmp_path`` (the repository is never modified, and no
``__pycache__`` can end up in the shipped folders), in a real strict
sandbox: one :class:`SandboxLauncher` per test module, a fresh
:class:`PluginHost` per test.

The hosts allow many consecutive failures before their circuit breaker
opens: these tests make a plugin refuse one bad path after another on
purpose, and each refusal is a plugin exception, which the breaker counts.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from caplet import PluginCallError, PluginHost, Policy
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host

REPO = Path(__file__).resolve().parents[2]
#: The reference plugins, as shipped.
REFERENCE = REPO / "plugins"
#: Enough consecutive failures for any test here (the default is 3).
FAILURES = 1000


@pytest.fixture(scope="module")
def launcher() -> Iterator[SandboxLauncher]:
    sandbox = SandboxLauncher(strict=True)
    yield sandbox
    sandbox.close()


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
    """A host on ``launcher`` whose breaker tolerates the tests' deliberate refusals."""
    tolerant = replace(policy if policy is not None else Policy(), failure_threshold=FAILURES)
    return make_host(plugins_dir, state_dir, launcher, policy=tolerant, **options)


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
    """Calls one plugin's module and checks what its refusals reveal."""

    host: PluginHost
    plugin: str
    module: str
    #: Host paths no message may contain.
    hidden: tuple[str, ...]

    def __call__(self, function: str, *args: Any) -> Any:
        return self.host.call(self.plugin, f"{self.module}.{function}", *args)

    def refused(self, function: str, *args: Any) -> PluginCallError:
        """The PluginCallError of a refused call; its message names no host path."""
        with pytest.raises(PluginCallError) as info:
            self.host.call(self.plugin, f"{self.module}.{function}", *args)
        message = str(info.value)
        for path in self.hidden:
            assert path not in message, f"{message!r} reveals the host path {path!r}"
        return info.value

    def message(self, function: str, *args: Any) -> str:
        """``exc_type: message`` of a refused call, without the 'plugin ... raised' prefix."""
        error = self.refused(function, *args)
        text = str(error)
        prefix = f"plugin '{self.plugin}': {self.module}.{function} raised "
        assert text.startswith(prefix), text
        return text.removeprefix(prefix)
