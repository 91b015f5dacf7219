"""A full disk while writing state: a clear error, exit 3, and no damage (issue 8, point 4).

The state directory, the plugins and the lock file live on a tmpfs of
512 KiB mounted in a private user and mount namespace (``unshare --user
--map-root-user --mount``: no real root needed where user namespaces are
allowed, and nothing mounted outside the test). The work inside the
namespace is tests/_trust/fulldisk.py; this test asserts on its report:
every write (audit cache, approval, lock file, unapproval, decision log)
fails with exit 3 and a message naming the file, saying "no space left on
device" and what to do, without a traceback; once space is freed the state
is exactly what it was, ``caplet doctor --check-state`` passes, and writes
work again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

TMPFS_SIZE = "512k"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux unshare is needed (apt-get install util-linux)"
    mountpoint = tmp_path_factory.mktemp("tmpfs")
    home = tmp_path_factory.mktemp("home")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAPLET_")},
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "NO_COLOR": "1",
    }
    script = (
        f'mount -t tmpfs -o size={TMPFS_SIZE} tmpfs "$1" && exec "$2" -m tests._trust.fulldisk "$1"'
    )
    namespace = [unshare, "--user", "--map-root-user", "--mount"]
    result = subprocess.run(
        [*namespace, "sh", "-c", script, "sh", str(mountpoint), sys.executable],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    assert not any(mountpoint.iterdir()), "the tmpfs was private to the namespace"
    return document


def test_the_setup_succeeded_and_the_disk_was_full(report: dict[str, Any]) -> None:
    assert [step["code"] for step in report["setup"]] == [0, 0, 1]
    assert report["filled"] > 0
    assert report["free_blocks"] == 0


@pytest.mark.parametrize(
    ("write", "blamed", "doing"),
    [
        ("open", "state/caplet.db", "opening failed"),
        # The audit's snapshot is the first write (in the state directory's run dir).
        ("audit", "state/run/", "copying plugin 'other' for its snapshot failed"),
        ("approve", "state/caplet.db", "writing the approval of 'hello' failed"),
        ("unapprove", "state/caplet.db", "deleting the approval of 'hello' failed"),
        ("log", "state/caplet.db", "logging a decision about 'bad' failed"),
        ("lock", "caplet.lock", "cannot write the lock file"),
    ],
)
def test_a_full_disk_is_a_clear_state_error(
    report: dict[str, Any], write: str, blamed: str, doing: str
) -> None:
    outcome = report["full"][write]
    assert outcome["code"] == 3, outcome
    assert "Traceback" not in outcome["stderr"]
    error = outcome["json"]["error"]
    message = error["message"]
    assert f"{report['root']}/{blamed}" in message
    assert doing in message
    assert "no space left on device" in message
    assert "free space on the file system holding" in message
    assert "run the command again" in message
    expected = "LockfileWriteError" if write == "lock" else "StoreError"
    assert error["type"] == expected


def test_nothing_changed_and_the_state_is_healthy_after_space_is_freed(
    report: dict[str, Any],
) -> None:
    assert report["after"] == report["before"]
    assert report["before"]["approval"] is not None
    assert not report["before"]["other_audited"]
    assert "[plugins.hello]" in report["before"]["lockfile"]
    doctor = report["doctor"]
    assert doctor["code"] == 0, doctor
    assert doctor["json"]["ok"] is True
    assert doctor["json"]["problems"] == [], "no temporary file or anything else left over"


def test_writes_work_again_once_there_is_space(report: dict[str, Any]) -> None:
    assert report["again"]["audit"]["code"] == 0, report["again"]["audit"]
    assert report["again"]["lock"]["code"] == 0, report["again"]["lock"]
