"""Shared fixtures: isolated HOME/state for every test, and a plugin factory."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "plugins"

#: The LLM auditor's settings as the suite was started with, for the opt-in
#: ``real_llm`` tests; every other test runs with them unset (static-only
#: unless the test points them at its own 127.0.0.1 server).
REAL_LLM_ENV = {k: v for k, v in os.environ.items() if k.startswith("CAPLET_LLM_")}

#: Proxy settings would send the tests' 127.0.0.1 requests elsewhere.
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def _isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test may touch the real home directory or the user's caplet state."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CAPLET_STATE_DIR", raising=False)
    monkeypatch.delenv("CAPLET_PLUGINS_DIR", raising=False)
    for name in (*REAL_LLM_ENV, *_PROXY_VARS):
        monkeypatch.delenv(name, raising=False)


@dataclass
class PluginFactory:
    """Writes plugin folders into ``root``; each call returns the plugin directory."""

    root: Path

    def __call__(
        self,
        name: str,
        *,
        source: str | None = None,
        manifest: str | None = None,
        modules: str = '[modules.main]\nfunctions = ["run"]\n',
        extra: str = "",
        files: dict[str, str] | None = None,
    ) -> Path:
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        if manifest is None:
            manifest = (
                f'name = "{name}"\nversion = "1.0.0"\ndescription = "Test plugin {name}."\n'
                f"{extra}\n{modules}"
            )
        (directory / "plugin.toml").write_text(textwrap.dedent(manifest), encoding="utf-8")
        if source is None:
            source = """
                def create_functions(config):
                    def run(*args, **kwargs):
                        return {"args": list(args), "config": dict(config)}
                    return {"main": {"run": run}}
            """
        (directory / "plugin.py").write_text(textwrap.dedent(source), encoding="utf-8")
        for relative, text in (files or {}).items():
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return directory


@pytest.fixture
def plugins_dir(tmp_path: Path) -> Path:
    path = tmp_path / "plugins"
    path.mkdir()
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def make_plugin(plugins_dir: Path) -> PluginFactory:
    return PluginFactory(plugins_dir)


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    """A private copy of the bundled examples (tests never modify the repo)."""
    import shutil

    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture
def obey_file_permissions() -> Iterator[None]:
    """Make permission tests meaningful when the suite runs as root (as CI does).

    Root bypasses file mode bits through CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
    and CAP_FOWNER (capabilities(7)); clearing them from this thread's
    effective set for the duration of one test makes the kernel check the
    bits as it would for an ordinary owner, instead of skipping the test.
    """
    from caplet._syscall import (
        CAP_DAC_OVERRIDE,
        CAP_DAC_READ_SEARCH,
        CAP_FOWNER,
        drop_effective_capabilities,
        effective_capabilities,
        raise_effective_capabilities,
    )

    held = effective_capabilities() & {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}
    drop_effective_capabilities(held)
    try:
        yield
    finally:
        raise_effective_capabilities(held)
