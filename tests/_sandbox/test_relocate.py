"""The runtime at neutral paths (issue 13, point 7): the zygote and its jails name no
host path of the interpreter, its packages or caplet, and a grant of / still is the
host's root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet._sandbox._grants import PathGrant
from caplet._sandbox._jail import DISABLE_LAYERS_ENV, runtime_grants
from caplet._sandbox._jail_model import package_parent
from caplet._sandbox._launcher import WorkerSpec
from caplet._sandbox._relocate import (
    _STAGE,
    PROBLEM_ENV,
    RELOCATION,
    RUNTIME_ROOT,
    SYSTEM,
    runtime_layout,
)
from caplet._sandbox._sandboxed import SandboxLauncher, isolation_report
from caplet._sandbox._subprocess import SubprocessWorker
from caplet._selftest._grants import VIEWS, host_runtime_paths, named_host_paths

LOOKER = f"""
import os
{VIEWS}

def listdir(path):
    return sorted(os.listdir(path))

def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()

def create_functions(config):
    return {{"probe": {{"views": run, "listdir": listdir, "read": read}}}}
"""


def _start(launcher: SandboxLauncher, tmp_path: Path, *grants: PathGrant) -> SubprocessWorker:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir(exist_ok=True)
    (snapshot / "plugin.py").write_text(textwrap.dedent(LOOKER), encoding="utf-8")
    workdir = tmp_path / f"work-{len(list(tmp_path.iterdir()))}"
    workdir.mkdir()
    return launcher.start(
        WorkerSpec(
            plugin="looker",
            snapshot_dir=snapshot,
            entry="plugin.py",
            config={},
            modules={"probe": ("views", "listdir", "read")},
            workdir=workdir,
            grants=grants,
        )
    )


def _views(launcher: SandboxLauncher, tmp_path: Path) -> dict[str, str]:
    with _start(launcher, tmp_path) as worker:
        views = worker.call("probe", "views", (), {}, timeout_s=10)
    assert isinstance(views, dict)
    assert views["maps"].count("\n") > 10  # the real file, not an error
    return views


def test_the_layout_puts_every_runtime_directory_under_the_runtime_root() -> None:
    layout = runtime_layout()
    assert layout.problem == ""
    assert layout.layers
    for host, inside in layout.layers:
        assert Path(host).is_dir()
        assert inside.startswith(f"{RUNTIME_ROOT}/")
    prefix = os.path.realpath(sys.base_prefix)
    system = any(prefix == top or prefix.startswith(f"{top}/") for top in SYSTEM)
    # A pyenv or a self-built interpreter moves; a distribution's /usr stays.
    assert layout.executable.startswith(f"{RUNTIME_ROOT}/python/") != system
    caplet = package_parent("caplet")
    assert layout.first == (
        next(inside for host, inside in layout.layers if caplet.startswith(host)),
    )
    named = named_host_paths(
        " ".join((layout.executable, layout.library_path, *layout.first, *layout.last)),
        host_runtime_paths(),
    )
    assert not named


def test_the_zygote_and_its_workers_name_no_host_path_of_the_runtime(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    assert launcher.relocation_problem() == ""
    views = _views(launcher, tmp_path)
    secrets = host_runtime_paths()
    assert secrets
    for view, text in views.items():
        assert not named_host_paths(text, secrets), (view, text[:3000])
    assert views["exe"].startswith((f"{RUNTIME_ROOT}/", "/usr/"))
    assert f"{RUNTIME_ROOT}/" in views["sys"]
    assert f"{RUNTIME_ROOT}/" in views["modules"]  # caplet's own modules, from its overlay
    overlays = [line for line in views["mountinfo"].splitlines() if f" {RUNTIME_ROOT}/" in line]
    assert overlays
    for line in overlays:
        assert " - overlay overlay ro," in line
        assert "lowerdir=/proc/self/fd/" in line


def test_outside_a_relocated_zygote_the_runtime_grants_are_host_paths() -> None:
    # Only the relocated zygote's sys.path holds RUNTIME_ROOT entries; the host's
    # own runtime grants (a plain-process launcher's) stay its host paths.
    assert not any(grant.path.startswith(f"{RUNTIME_ROOT}/") for grant in runtime_grants())


def test_a_pinned_grant_of_the_root_is_the_hosts_root(
    launcher: SandboxLauncher, tmp_path: Path
) -> None:
    # The zygote's own root is a mirror (a tmpfs holding the host's top-level
    # entries): the inode pinned at enable is the host's root, kept aside.
    info = os.stat("/")
    grant = PathGrant("/", device=info.st_dev, inode=info.st_ino)
    with _start(launcher, tmp_path, grant) as worker:
        top = worker.call("probe", "listdir", ("/",), {}, timeout_s=10)
        release = worker.call("probe", "read", ("/etc/os-release",), {}, timeout_s=10)
    assert isinstance(top, list)
    assert {"etc", "usr", RUNTIME_ROOT.lstrip("/")} <= set(top)
    assert release == Path("/etc/os-release").read_text(encoding="utf-8")


@pytest.fixture
def unrelocated(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxLauncher]:
    monkeypatch.setenv(DISABLE_LAYERS_ENV, RELOCATION)
    launcher = SandboxLauncher(strict=True)
    yield launcher
    launcher.close()


def test_without_relocation_the_runtime_shows_and_doctor_says_why(
    unrelocated: SandboxLauncher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attack the relocation stops, seen through the fallback a machine
    # without it gets: the same views then name the host's runtime.
    assert "disabled by" in unrelocated.relocation_problem()
    views = _views(unrelocated, tmp_path)
    secrets = host_runtime_paths()
    assert named_host_paths(views["mountinfo"], secrets)
    assert named_host_paths(views["maps"], secrets)
    assert named_host_paths(views["sys"], secrets)
    monkeypatch.setenv(DISABLE_LAYERS_ENV, RELOCATION)
    report = isolation_report()
    assert report.details["runtime paths"].startswith("the host's own (disabled by")


def test_a_stage_that_cannot_relocate_starts_the_fallback_with_the_reason(
    tmp_path: Path,
) -> None:
    # A runtime directory whose neutral place cannot be made fails after the
    # staging tmpfs covers /tmp: the fallback must still see the host's /tmp
    # (the tmpfs was unmounted) and learn why.
    marker = tmp_path / "marker"
    marker.write_text("here", encoding="utf-8")
    probe = f"import os, sys; print(os.environ[sys.argv[1]]); print(open({str(marker)!r}).read())"
    plan = {
        "layers": [[str(tmp_path), f"{RUNTIME_ROOT}/missing/parent"]],
        "library_path": "",
        "relocated": ["/nonexistent"],
        "fallback": [sys.executable, "-I", "-S", "-c", probe, PROBLEM_ENV],
        "env": {},
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _STAGE, json.dumps(plan)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    problem, seen = done.stdout.splitlines()
    assert f"{RUNTIME_ROOT}/missing/parent" in problem
    assert "relocating the runtime needs a mount namespace and overlayfs" in problem
    assert seen == "here"
