"""attack34: glob32's walk attacked (the expansion of a glob at enable).

The walk was bounded by its matches alone: a glob that matches nothing walked every
folder its ``*`` components reach (``/usr/*/*/*/*/*/*/*/*/none.csv``: all of ``/usr``,
24 s of the host's CPU here, at every enable) before it was granted as "0 files". Now
it stops past :data:`GLOB_FOLDER_CAP` folders, refusing the enable with the fix. And a
folder the walk could not list was closed twice (``EBADF`` instead of the reason, and
a descriptor number another thread of the host may have reused closed under it).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._host._glob_grants import GLOB_FOLDER_CAP
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory, give_to_worker

READER = """
def create_functions(config):
    def read(path):
        with open(path) as handle:
            return handle.read()

    return {"tools": {"read": read}}
"""


def _reader(make_plugin: PluginFactory, capability: str) -> None:
    make_plugin(
        "reader",
        source=READER,
        extra=f'capabilities = ["{capability}"]\n',
        modules='[modules.tools]\nfunctions = ["read"]\n',
    )


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


def _tree(root: Path, wide: int, deep: int) -> None:
    """``wide`` folders, each holding ``deep`` folders (no file anywhere)."""
    for outer in range(wide):
        for inner in range(deep):
            (root / f"d{outer:03}" / f"e{inner:03}").mkdir(parents=True)


@pytest.mark.security
def test_a_glob_that_walks_too_many_folders_is_refused_naming_the_fix(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    """On main the enable went through every folder and granted "0 files"."""
    root = tmp_path / "wide"
    # 1 + 65 + 65 * 64 folders listed or entered: past the cap by a few.
    _tree(root, 65, 64)
    assert GLOB_FOLDER_CAP < 1 + 65 + 65 * 64
    give_to_worker(root)
    _reader(make_plugin, f"fs.read:{root}/*/*/*.csv")
    host.discover()
    refused = host.enable("reader", consent=True)
    assert not refused
    assert refused.reason == (
        f"plugin 'reader': capability 'fs.read:{root}/*/*/*.csv' walks more than "
        f"{GLOB_FOLDER_CAP} folders to find its matches (each is listed or entered at every "
        "enable); name the folders the files are in (fewer '*' or '?' folder components), "
        f"or grant the folder itself (fs.read:{root}) if the plugin needs all of it"
    )


@pytest.mark.security
def test_near_miss_a_glob_over_folders_within_the_cap_is_granted(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    root = tmp_path / "some"
    _tree(root, 30, 30)
    (root / "d007" / "e011" / "r.csv").write_text("a,b\n", encoding="utf-8")
    give_to_worker(root)
    _reader(make_plugin, f"fs.read:{root}/*/*/*.csv")
    host.discover()
    assert host.enable("reader", consent=True)
    assert host.call("reader", "tools.read", f"{root}/d007/e011/r.csv") == "a,b\n"


#: Runs the walk with fewer and fewer descriptors to spare (RLIMIT_NOFILE), in a process
#: of its own: each failure must be caplet's refusal, and no descriptor may be left open.
_SPARE_DESCRIPTORS = """
import os, resource, sys
from caplet._capabilities._parse import parse_capability
from caplet._errors import CapletError
from caplet._host._glob_grants import expand_glob
from caplet._sandbox._identity import WorkerIdentity

cap = parse_capability(f"fs.read:{sys.argv[1]}/*/*/*.csv")
me = WorkerIdentity(os.getuid(), os.getgid())
expand_glob("p", cap, me).close()  # every import made before the limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
free = os.open("/", os.O_PATH)
os.close(free)
for spare in range(8):
    resource.setrlimit(resource.RLIMIT_NOFILE, (free + spare, hard))
    try:
        expand_glob("p", cap, me).close()
        print(spare, "granted")
    except CapletError as exc:
        print(spare, "refused", "cannot be" in str(exc))
    except OSError as exc:
        print(spare, "OSError", exc.strerror)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    left = os.open("/", os.O_PATH)
    os.close(left)
    print(spare, "leaked" if left != free else "none left open")
"""


@pytest.mark.security
def test_a_folder_the_walk_cannot_list_is_refused_and_closed_once(tmp_path: Path) -> None:
    """On main a listing that failed (here EMFILE; /proc's fdinfo folders give EACCES)
    raised EBADF from a second close of the folder's descriptor, or the raw OSError of
    ``os.scandir``: a traceback instead of the folder and the reason."""
    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "r.csv").write_text("x", encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "-c", _SPARE_DESCRIPTORS, str(root)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = ran.stdout.splitlines()
    answers = [line.split(" ", 1)[1] for line in lines[0::2]]
    assert all(answer in ("refused True", "granted") for answer in answers), ran.stdout
    # The near miss: with enough descriptors the same glob is granted.
    assert answers[-1] == "granted", ran.stdout
    assert all(line.endswith("none left open") for line in lines[1::2]), ran.stdout


@pytest.mark.security
def test_a_glob_over_proc_is_refused_not_a_read_grant_like_any_other(
    host: PluginHost, make_plugin: PluginFactory
) -> None:
    """attack34's note, closed by the lead: ``fs.read:/proc/*/cmdline`` handed the plugin
    every host process's command line; each match is refused by its file system."""
    _reader(make_plugin, "fs.read:/proc/1/cmd*")  # one match: the 256 cap never first
    host.discover()
    refused = host.enable("reader", consent=True)
    assert not refused
    assert "lies in /proc (a proc file system)" in refused.reason
