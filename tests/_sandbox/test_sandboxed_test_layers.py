"""steer22: the test-only switch that turns kernel layers off is never silent.

``CAPLET_TEST_DISABLE_LAYERS`` exists so tests can simulate a machine without a layer.
Strict isolation refuses to start a worker without a required layer (namespaces, rlimits,
Landlock, seccomp), but the cgroup is optional and so are seccomp's denial counting and the
runtime's relocation: with the variable left in an environment (a CI job's, a shell's, a
project's ``.env`` loaded by its tooling) every worker ran without memory, CPU-rate and
process limits, or with its denials uncounted, or with the runtime's real paths in its jail,
and `caplet call --enable` said nothing at all. The red-team switch, which turns off less,
is loud; this one is now as loud.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from caplet._host._host import PluginHost
from caplet._sandbox._jail import DISABLE_LAYERS_ENV


def _hello(plugins_dir: Path) -> None:
    plugin = plugins_dir / "hello"
    plugin.mkdir(parents=True)
    (plugin / "plugin.toml").write_text(
        'name = "hello"\nversion = "1.0.0"\ndescription = "Says hello."\n\n'
        '[modules.m]\nfunctions = ["f"]\n'
    )
    (plugin / "plugin.py").write_text(
        'def create_functions(config):\n    return {"m": {"f": lambda: "hi"}}\n'
    )


def _call(tmp_path: Path, disabled: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != DISABLE_LAYERS_ENV}
    if disabled:
        env[DISABLE_LAYERS_ENV] = disabled
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "caplet",
            "call",
            "--enable",
            "hello",
            "m.f",
            "--yes",
            "--plugins-dir",
            str(tmp_path / "plugins"),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.security
@pytest.mark.parametrize("disabled", ["cgroup", "seccomp_counting", "relocation"])
def test_an_optional_layer_turned_off_by_the_test_switch_is_said(
    tmp_path: Path, disabled: str
) -> None:
    _hello(tmp_path / "plugins")
    result = _call(tmp_path, disabled)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("hi")
    assert (
        f"TEST-ONLY LAYERS OFF: {DISABLE_LAYERS_ENV}={disabled} turns off {disabled} for every "
        "worker of this host" in " ".join(result.stderr.split())
    ), result.stderr


def test_the_hosts_isolation_names_the_test_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hello(tmp_path / "plugins")
    monkeypatch.setenv(DISABLE_LAYERS_ENV, "cgroup")
    with PluginHost(tmp_path / "plugins", state_dir=tmp_path / "state") as host:
        assert host.isolation.endswith(f"[TEST-ONLY: {DISABLE_LAYERS_ENV}=cgroup]")
    monkeypatch.delenv(DISABLE_LAYERS_ENV)
    with PluginHost(tmp_path / "plugins", state_dir=tmp_path / "state") as host:
        assert "TEST-ONLY" not in host.isolation


def test_without_the_switch_nothing_is_said(tmp_path: Path) -> None:
    """Near miss: an ordinary host says nothing of test switches."""
    _hello(tmp_path / "plugins")
    result = _call(tmp_path, "")
    assert result.returncode == 0, result.stderr
    assert "TEST-ONLY" not in result.stderr
