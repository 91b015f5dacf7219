"""Seccomp denials reach the permission log (issue 3, point 8).

Real plugins in the default strict sandbox make denied system calls; each
still sees EPERM, and when the host stops the worker (disable, a crash, a
timeout) it writes one ``seccomp`` decision per denied syscall name with
the count the zygote kept. As in the hostile suite, the plugins' static
review is replaced by a clean audit: the scanner would refuse ctypes and
sockets, and what is tested here is what the kernel and the host do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import (
    AuditResult,
    CallTimeoutError,
    PluginHost,
    RiskLevel,
    Verdict,
    WorkerCrashedError,
    WorkerStartError,
)
from tests.conftest import PluginFactory

SOURCE = """
import ctypes, errno, os, socket


def inet(times):
    seen = []
    for _ in range(times):
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
            seen.append("ok")
        except OSError as exc:
            seen.append(errno.errorcode[exc.errno])
    return seen


def ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    ctypes.set_errno(0)
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
    return errno.errorcode.get(ctypes.get_errno(), "none")


def run():
    return inet(3) + [ptrace()]


def crash():
    inet(2)
    os._exit(5)


def spin():
    while True:
        try:
            socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        except OSError:
            pass


def create_functions(config):
    return {"main": {"run": run, "crash": crash, "spin": spin}}
"""
MODULES = '[modules.main]\nfunctions = ["run", "crash", "spin"]\n\n[limits]\ntimeout_ms = 500\n'


def _fool_the_review(host: PluginHost, plugin: str) -> None:
    audit = AuditResult(
        plugin=plugin,
        content_hash=host.manager.current_hash(plugin),
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="denial-log test: the review was fooled, only the sandbox stands",
        findings=(),
        provider="denials-test",
    )
    assert host.manager.set_audit_result(plugin, audit)


@pytest.fixture
def host(make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path) -> Iterator[PluginHost]:
    for name in ("counted", "flood", "crasher"):
        make_plugin(name, source=SOURCE, modules=MODULES)
    make_plugin("canary")
    with PluginHost(plugins_dir, state_dir=state_dir) as plugin_host:
        assert "seccomp" in plugin_host.isolation
        assert "missing" not in plugin_host.isolation
        for name in ("counted", "flood", "crasher"):
            _fool_the_review(plugin_host, name)
            assert plugin_host.enable(name, consent=True)
        assert plugin_host.enable("canary", consent=True)
        yield plugin_host


def _seccomp_log(host: PluginHost, plugin: str) -> dict[str, str]:
    decisions = host.manager.store.decisions(plugin)
    assert all(not d.allowed for d in decisions if d.action == "seccomp")
    return {d.target: d.detail for d in decisions if d.action == "seccomp"}


def test_denials_are_logged_when_the_plugin_is_disabled(host: PluginHost) -> None:
    assert host.call("counted", "main.run") == ["EPERM", "EPERM", "EPERM", "EPERM"]
    assert host.call("counted", "main.run") == ["EPERM", "EPERM", "EPERM", "EPERM"]
    assert _seccomp_log(host, "counted") == {}, "logged once the worker has ended"
    assert host.disable("counted")
    assert _seccomp_log(host, "counted") == {
        "socket": "denied 6 time(s)",
        "ptrace": "denied 2 time(s)",
    }
    assert _seccomp_log(host, "canary") == {}


def test_denials_survive_a_crash(host: PluginHost) -> None:
    with pytest.raises(WorkerCrashedError, match="exited with code 5"):
        host.call("crasher", "main.crash")
    assert _seccomp_log(host, "crasher") == {"socket": "denied 2 time(s)"}


def test_a_plugin_spinning_on_a_denied_call_is_killed_and_others_keep_working(
    host: PluginHost,
) -> None:
    with pytest.raises(CallTimeoutError, match="timed out after 500 ms"):
        host.call("flood", "main.spin")
    log = _seccomp_log(host, "flood")
    assert list(log) == ["socket"]
    count = int(log["socket"].removeprefix("denied ").removesuffix(" time(s)"))
    assert count > 0
    # The host, the zygote and the other workers are unaffected: a warm
    # worker answers, and new workers are still spawned.
    assert host.call("canary", "main.run") == {"args": [], "config": {}}
    assert host.call("counted", "main.run") == ["EPERM", "EPERM", "EPERM", "EPERM"]
    assert host.disable("counted")
    assert _seccomp_log(host, "counted") == {
        "socket": "denied 3 time(s)",
        "ptrace": "denied 1 time(s)",
    }


FAILING_START = """
import socket

try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
except OSError:
    pass
raise RuntimeError("this plugin never finishes loading")


def create_functions(config):
    return {"main": {"run": lambda: None}}
"""


def test_denials_of_a_start_that_failed_are_logged(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("doomed", source=FAILING_START, modules='[modules.main]\nfunctions = ["run"]\n')
    with PluginHost(plugins_dir, state_dir=state_dir) as plugin_host:
        _fool_the_review(plugin_host, "doomed")
        if plugin_host.enable("doomed", consent=True):
            with pytest.raises(WorkerStartError):
                plugin_host.call("doomed", "main.run")
        assert _seccomp_log(plugin_host, "doomed") == {"socket": "denied 1 time(s) during start"}
