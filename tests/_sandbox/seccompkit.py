"""Real plugins behind the public host API, with the static review fooled, for seccomp tests.

The scanner would refuse what these plugins do (ctypes, raw sockets, chmod
of set-id bits); what the seccomp tests measure is what the kernel layers
do once a plugin runs, so the audit is replaced by a clean one, as in the
hostile suite (tests/_host/test_denials.py) and ``caplet selftest``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from caplet import AuditResult, PluginHost, RiskLevel, Verdict

#: Helpers every attack plugin starts with: each attempt returns "ok" or the errno's name.
PRELUDE = """
import ctypes, errno, os, socket, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def attempt(action, *args, **kwargs):
    try:
        action(*args, **kwargs)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"


def raw(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
"""


def write_plugin(
    plugins_dir: Path,
    name: str,
    source: str,
    functions: tuple[str, ...],
    *,
    capabilities: tuple[str, ...] = (),
    limits: str = "timeout_ms = 60000",
) -> None:
    """A plugin whose module ``main`` exports ``functions`` from PRELUDE + ``source``."""
    directory = plugins_dir / name
    directory.mkdir(parents=True)
    caps = ", ".join(f'"{cap}"' for cap in capabilities)
    listed = ", ".join(f'"{function}"' for function in functions)
    exports = ", ".join(f'"{function}": {function}' for function in functions)
    (directory / "plugin.toml").write_text(
        f'name = "{name}"\nversion = "1.0.0"\ndescription = "seccomp test plugin {name}."\n'
        f"capabilities = [{caps}]\n\n[modules.main]\nfunctions = [{listed}]\n\n"
        f"[limits]\n{limits}\n",
        encoding="utf-8",
    )
    body = PRELUDE + textwrap.dedent(source)
    body += f"\n\ndef create_functions(config):\n    return {{'main': {{{exports}}}}}\n"
    (directory / "plugin.py").write_text(body, encoding="utf-8")


def fool_the_review(host: PluginHost, plugin: str) -> None:
    audit = AuditResult(
        plugin=plugin,
        content_hash=host.manager.current_hash(plugin),
        risk_level=RiskLevel.LOW,
        verdict=Verdict.APPROVE,
        summary="seccomp test: the review was fooled, only the sandbox stands",
        findings=(),
        provider="seccomp-test",
    )
    assert host.manager.set_audit_result(plugin, audit)


@contextmanager
def sandboxed_host(plugins_dir: Path, state_dir: Path, *names: str) -> Iterator[PluginHost]:
    """A strict host with every layer on and ``names`` enabled (their review fooled)."""
    with PluginHost(plugins_dir, state_dir=state_dir) as host:
        assert "missing" not in host.isolation, host.isolation
        for layer in ("namespaces", "landlock", "seccomp", "rlimits"):
            assert layer in host.isolation, host.isolation
        for name in names:
            fool_the_review(host, name)
            outcome = host.enable(name, consent=True)
            assert outcome, outcome.reason
        yield host


def seccomp_log(host: PluginHost, plugin: str) -> dict[str, str]:
    """Syscall name -> "denied N time(s)" logged for ``plugin`` (after its worker ended)."""
    decisions = host.manager.store.decisions(plugin)
    assert all(not d.allowed for d in decisions if d.action == "seccomp")
    return {d.target: d.detail for d in decisions if d.action == "seccomp"}


def call(host: PluginHost, plugin: str, function: str, *args: Any) -> Any:
    return host.call(plugin, f"main.{function}", *args)


def rate_cgroup(pid: int) -> Path:
    """The cgroup whose cpu controller caps worker ``pid``'s CPU rate."""
    for line in Path(f"/proc/{pid}/cgroup").read_text(encoding="ascii").splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return Path("/sys/fs/cgroup/cpu").resolve() / path.lstrip("/")
        if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return Path("/sys/fs/cgroup", path.lstrip("/"))
    raise AssertionError(f"worker {pid} is in no cpu cgroup")
