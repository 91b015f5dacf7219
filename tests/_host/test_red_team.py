"""The public red-team switch (issue 13, point 9): the static gate off, said everywhere.

A red team measuring the kernel layers alone used to fake a clean audit
through ``set_audit_result``. ``PluginHost(red_team=True)`` turns the static
gate off instead: explicit, refused in locked mode, and written into every
decision the host logs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from caplet import PluginHost, PolicyError
from caplet._host._loading import LoadingRules
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory

#: A danger finding no capability covers: the static gate refuses it.
GATED = """
import subprocess

def create_functions(config):
    def run():
        try:
            subprocess.run(["/bin/true"], check=False)
        except OSError as exc:
            return exc.errno
        return "ran a program"
    return {"main": {"run": run}}
"""


def test_the_gate_refuses_what_the_red_team_switch_lets_the_kernel_stop(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make_plugin("gated", source=GATED)
    with make_host(plugins_dir, state_dir, launcher) as ordinary:
        ordinary.discover()
        refused = ordinary.enable("gated", consent=True)
    assert not refused
    assert "danger finding" in refused.reason
    with caplog.at_level(logging.WARNING, logger="caplet"):
        red = make_host(plugins_dir, state_dir / "red", launcher, red_team=True)
    with red:
        assert any("RED-TEAM MODE: the static gate is OFF" in r.message for r in caplog.records)
        assert red.red_team
        assert red.isolation.endswith("[RED TEAM: static gate OFF]")
        red.discover()
        outcome = red.enable("gated", consent=True)
        assert outcome, outcome.reason
        assert outcome.reason.startswith("enabled ([RED TEAM: static gate OFF] audited")
        # The kernel layers alone stop it: no execve without proc.exec (seccomp).
        assert red.call("gated", "main.run") == 1  # EPERM
        decisions = red.manager.store.decisions("gated")
    assert decisions
    assert all(d.detail.startswith("[RED TEAM: static gate OFF]") for d in decisions)
    gate = [d for d in decisions if d.action == "gate"]
    assert gate
    assert "not enforced" in gate[0].detail
    assert "danger finding" in gate[0].detail


def test_the_red_team_switch_still_asks_for_consent(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, make_plugin: PluginFactory
) -> None:
    make_plugin("gated", source=GATED)
    with make_host(plugins_dir, state_dir, launcher, red_team=True) as red:
        red.discover()
        refused = red.enable("gated")
    assert not refused
    assert "needs a person's consent" in refused.reason


def test_the_red_team_switch_is_refused_in_locked_mode(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher
) -> None:
    with pytest.raises(PolicyError) as info:
        make_host(
            plugins_dir,
            state_dir,
            launcher,
            red_team=True,
            loading=LoadingRules(locked=True),
        )
    assert "red_team=True cannot run in locked mode" in str(info.value)


def test_the_switch_is_off_unless_asked_for(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No environment variable or policy turns it on: only the argument.
    monkeypatch.setenv("CAPLET_RED_TEAM", "1")
    with PluginHost(plugins_dir, state_dir=state_dir, launcher=launcher, auditor=None) as host:
        assert not host.red_team
        assert "RED TEAM" not in host.isolation
