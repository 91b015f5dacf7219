"""The inside of the full-disk test: runs in a private mount namespace on a small tmpfs.

``python -m tests._trust.fulldisk DIR`` is started by tests/_trust/test_full_disk.py
through ``unshare --user --map-root-user --mount``, after mounting a tmpfs of
a few hundred KiB on DIR; that tmpfs exists only inside the namespace, so
everything that needs it happens here, and the result goes back as one JSON
document on stdout (the test asserts on it).

Here: a plugins directory, a state directory and a lock file on the tmpfs,
with one plugin audited, approved and pinned. Then a filler file takes every
free block, and each kind of state write runs as a real ``caplet`` process:
an audit (the audit cache), an approval, a lock, an unapproval and a refused
enable (the decision log). First with no block free at all (opening the
database fails), then with room for SQLite's WAL index only (opening works,
the write fails). Then the filler goes, ``caplet doctor --check-state`` and
the state itself are examined, and writes are shown to work again.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from caplet._trust._sqlite import SqliteStore
from tests.conftest import PluginFactory

BAD = """
import subprocess


def create_functions(config):
    def run():
        return subprocess.run(["sh", "-c", "id"], check=False).returncode

    return {"main": {"run": run}}
"""

#: Each state write, as caplet arguments (before the common options).
WRITES = {
    "audit": ["audit", "other", "--fresh"],
    "approve": ["approve", "hello", "--yes"],
    "lock": ["lock", "hello", "--yes"],
    "unapprove": ["unapprove", "hello"],
    "log": ["enable", "bad"],
}


#: The first region of SQLite's WAL index (the ``-shm`` file), allocated when
#: a connection opens the database and removed with the last connection.
WAL_INDEX_BYTES = 32 * 1024


def caplet(root: Path, *args: str) -> dict[str, Any]:
    options = ["--plugins-dir", str(root / "plugins"), "--state-dir", str(root / "state")]
    result = subprocess.run(
        [sys.executable, "-m", "caplet", *args, *options, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
        check=False,
    )
    try:
        document = json.loads(result.stdout)
    except json.JSONDecodeError:
        document = None
    return {"code": result.returncode, "json": document, "stderr": result.stderr}


def snapshot(root: Path) -> dict[str, Any]:
    """What must survive the full disk unchanged."""
    with SqliteStore(root / "state") as store:
        approval = store.get_approval("hello")
        decisions = len(store.decisions(limit=1_000_000))
        other = store.get_audit(store_hash(root, "other"))
    return {
        "approval": None if approval is None else approval.content_hash,
        "decisions": decisions,
        "other_audited": other is not None,
        "lockfile": (root / "caplet.lock").read_text(encoding="utf-8"),
    }


def store_hash(root: Path, name: str) -> str:
    from caplet._trust._hashing import tree_hash

    return tree_hash(root / "plugins" / name)


def fill(path: Path) -> int:
    """Write *path* until the file system is full; return how many bytes it took."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for size in (64 * 1024, 4096, 512, 1):
            chunk = b"\0" * size
            while True:
                try:
                    written += os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return written


def main(root: Path) -> dict[str, Any]:
    factory = PluginFactory(root / "plugins")
    factory("hello")
    factory("other")
    factory("bad", source=BAD)
    setup = [
        caplet(root, "approve", "hello", "--yes"),
        caplet(root, "lock", "hello", "--yes"),
        caplet(root, "audit", "bad"),  # cached, so enabling it only writes the refusal
    ]
    before = snapshot(root)
    filler = root / "filler"
    filled = fill(filler)
    free = os.statvfs(root).f_bavail
    # Not one block free: the database cannot even map its WAL index.
    full = {"open": caplet(root, *WRITES["approve"])}
    # Room for the WAL index (what opening needs) and nothing more: opening
    # and reading work, the write itself is what finds the disk full.
    os.truncate(filler, filled - WAL_INDEX_BYTES)
    full.update({name: caplet(root, *args) for name, args in WRITES.items()})
    filler.unlink()
    after = snapshot(root)
    doctor = caplet(root, "doctor", "--check-state")
    again = {name: caplet(root, *WRITES[name]) for name in ("audit", "lock")}
    return {
        "setup": setup,
        "filled": filled,
        "free_blocks": free,
        "before": before,
        "full": full,
        "after": after,
        "doctor": doctor,
        "again": again,
        "root": str(root),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(Path(sys.argv[1]))) + "\n")
