"""A mount below a grant that shows caplet's own files again (red team, round 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from caplet._host._mirrors import MountTable, _Mount, read_mount_table

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _table(*mounts: tuple[str, str, str]) -> MountTable:
    return MountTable(tuple(_Mount(device, root, point) for device, root, point in mounts))


def test_a_mount_below_a_grant_is_judged_by_its_place_in_its_file_system() -> None:
    table = _table(
        ("8:1", "/", "/"),
        ("8:1", "/home/u/.local/state", "/data/mirror"),  # an ancestor of the state dir
        ("8:1", "/home/u/.local/state/caplet/run", "/data/run"),  # inside it
        ("8:1", "/home/u/projects", "/data/projects"),  # unrelated
        ("0:50", "/", "/data/usb"),  # another file system
    )
    state = "/home/u/.local/state/caplet"
    assert table.mirror_below("/data", state, inside_too=True) == "/data/mirror"
    assert table.mirror_below("/data/run", state, inside_too=True) == ""  # the grant itself
    assert table.mirror_below("/srv", state, inside_too=True) == ""
    only_run = _table(("8:1", "/", "/"), ("8:1", "/home/u/.local/state/caplet/run", "/data/r"))
    assert only_run.mirror_below("/data", state, inside_too=True) == "/data/r"
    assert only_run.mirror_below("/data", state, inside_too=False) == ""
    # A later mount at the same point covers the earlier one.
    covered = _table(("8:1", "/", "/"), ("8:1", "/", "/home"), ("8:2", "/", "/home"))
    assert covered.mirror_below("/data", state, inside_too=True) == ""


def test_the_table_reads_this_process_mounts() -> None:
    table = read_mount_table()
    assert any(mount.point == "/" for mount in table.mounts)


_SCRIPT = """
import json, os, subprocess, sys
from pathlib import Path
sys.path.insert(0, {src!r})
from caplet._capabilities._parse import parse_capability
from caplet._errors import CapabilityError
from caplet._host._grant_check import plan_grants
from caplet._host._protected import ProtectedPaths
from caplet._sandbox._identity import WorkerIdentity

base = Path({base!r})
state, data = base / "state", base / "data"
subprocess.run(["mount", "--bind", str(state), str(data / "mirror")], check=True)
identity = WorkerIdentity(os.geteuid(), os.getegid(), privileged=False, source="test")
protected = lambda: ProtectedPaths(
    state_dir=state, lockfile=base / "caplet.lock", plugins_dir=base / "plugins", runtime=()
)
out = {{}}
for kind in ("fs.write", "fs.read"):
    try:
        plan_grants("p", (parse_capability(f"{{kind}}:{{data}}"),), protected=protected,
                    identity=identity)
        out[kind] = "granted"
    except CapabilityError as exc:
        out[kind] = str(exc)
out["elsewhere"] = "granted"
plan_grants("p", (parse_capability(f"fs.write:{{base / 'other'}}"),), protected=protected,
            identity=identity)
print(json.dumps(out))
"""


@pytest.mark.security
def test_a_grant_with_a_bind_mount_of_the_state_directory_below_it_is_refused(
    tmp_path: Path,
) -> None:
    """Red team, round 4: ``/data/mirror`` a bind mount of the state directory,
    ``fs.write:/data`` granted: the jail binds ``/data`` recursively and the plugin
    rewrote ``caplet.db`` (forged approvals); ``fs.read:/data`` read every plugin's
    ``ctx.kv``. Containment walked up from the state directory by inode, which
    never meets ``/data``."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare(1) and mount(8) for a private mount namespace")
    for name in ("state", "data/mirror", "other", "plugins"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "state" / "caplet.db").write_bytes(b"")
    script = _SCRIPT.format(src=SRC, base=str(tmp_path))
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no private mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    mirror = str(tmp_path / "data" / "mirror")
    for kind in ("fs.write", "fs.read"):
        assert f"the mount {mirror} inside it shows {tmp_path / 'state'} again" in out[kind]
        assert "caplet's state directory" in out[kind]
    assert out["elsewhere"] == "granted"
