"""A machine without libseccomp: the layer is reported missing with the fix, strict
isolation refuses to run plugins, best-effort runs them without the filter and says so.

Nothing is faked: the host, its zygote and ``caplet doctor`` run in a private
mount namespace (unshare(1)) where /dev/null is bind-mounted over the real
libseccomp, so dlopen(3) fails for them exactly as on a machine that lacks it;
the rest of the system never sees the mount. In-process, the loader is patched
to fail the same way to check what the module itself does.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caplet._errors import SandboxError
from caplet._sandbox import _seccomp
from caplet._syscall import LIBSECCOMP_SONAME, libseccomp_version
from tests.conftest import PluginFactory

_CHILD = """
import json, subprocess, sys
from pathlib import Path
from caplet import Isolation, PluginHost, Policy

plugins, state = Path(sys.argv[1]), Path(sys.argv[2])
out = {}
doctor = subprocess.run(
    [sys.executable, "-m", "caplet", "doctor", "--json"], capture_output=True, text=True
)
out["doctor_code"] = doctor.returncode
out["doctor"] = json.loads(doctor.stdout)["layers"]["seccomp"]
with PluginHost(plugins, state_dir=state) as strict:
    outcome = strict.enable("hello", consent=True)
    out["strict"] = [bool(outcome), outcome.reason]
policy = Policy(isolation=Isolation.BEST_EFFORT)
with PluginHost(plugins, state_dir=state, policy=policy) as lenient:
    outcome = lenient.enable("hello", consent=True)
    out["lenient"] = [bool(outcome), lenient.isolation, lenient.call("hello", "main.run", 1)]
print(json.dumps(out))
"""


def _library_path() -> str:
    """The file the dynamic loader maps for libseccomp.so.2 (it is loaded here already)."""
    libseccomp_version()
    with open("/proc/self/maps", encoding="ascii") as maps:
        for line in maps:
            if LIBSECCOMP_SONAME in line:
                return line.split()[-1]
    raise AssertionError("libseccomp is not mapped in this process")


def test_without_libseccomp_strict_refuses_and_best_effort_says_so(
    make_plugin: PluginFactory, plugins_dir: Path, state_dir: Path
) -> None:
    make_plugin("hello")
    # As root a mount namespace is enough; an unprivileged user needs a user
    # namespace of its own to mount in (user_namespaces(7)).
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "-rm"]
    script = 'mount --bind /dev/null "$0" && exec "$@"'
    command = [
        *unshare,
        "sh",
        "-c",
        script,
        _library_path(),
        sys.executable,
        "-c",
        _CHILD,
        str(plugins_dir),
        str(state_dir),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["doctor_code"] == 1
    assert out["doctor"]["available"] is False
    assert "libseccomp cannot be loaded" in out["doctor"]["reason"]
    assert "apt-get install libseccomp2" in out["doctor"]["reason"]
    assert "apt-get install libseccomp2" in out["doctor"]["fix"]
    enabled, reason = out["strict"]
    assert enabled is False
    assert "isolation 'strict' needs the seccomp layer" in reason
    assert "libseccomp cannot be loaded" in reason
    assert "apt-get install libseccomp2" in reason
    enabled, isolation, answer = out["lenient"]
    assert enabled is True
    assert "missing: seccomp" in isolation
    assert answer == {"args": [1], "config": {}}


def _no_library() -> ctypes.CDLL:
    raise OSError(f"{LIBSECCOMP_SONAME}: cannot open shared object file: No such file or directory")


def test_the_module_reports_the_missing_library_and_never_builds_a_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("caplet._syscall._seccomp_lib._libseccomp", _no_library)
    monkeypatch.setattr(_seccomp, "_PREPARE_PROBLEM", None)
    problem = _seccomp.seccomp_problem()
    assert problem is not None
    assert problem.startswith("libseccomp cannot be loaded (libseccomp.so.2: ")
    assert "apt-get install libseccomp2" in problem
    assert _seccomp.seccomp_available() is False
    assert _seccomp.seccomp_notify_problem() == "seccomp filters are not available"
    _seccomp.prepare_filters()  # never raises: the zygote keeps running without the layer
    with pytest.raises(SandboxError, match="apt-get install libseccomp2"):
        _seccomp.build_filter.__wrapped__(allow_exec=False, machine="aarch64", notify=True)


def test_a_filter_that_cannot_be_compiled_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> bytes:
        raise SandboxError("seccomp: libseccomp could not compile the worker's filter (x)")

    monkeypatch.setattr(_seccomp, "build_filter", broken)
    monkeypatch.setattr(_seccomp, "_PREPARE_PROBLEM", None)
    _seccomp.prepare_filters()
    assert _seccomp.seccomp_problem() == "libseccomp could not compile the worker's filter (x)"
    monkeypatch.setattr(_seccomp, "_PREPARE_PROBLEM", None)
    assert _seccomp.seccomp_problem() is None
