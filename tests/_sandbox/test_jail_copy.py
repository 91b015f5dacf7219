"""The snapshot's copy in the jail, in process: its hash is the trust layer's.

The copy itself (a tmpfs, sealed, refused when its hash is not the approved
one) is exercised through real jails in tests/_sandbox/test_jail.py.
"""

from __future__ import annotations

from pathlib import Path

from caplet._sandbox._jail_copy import copy_hash
from caplet._trust._hashing import tree_hash


def test_the_jails_hash_of_its_copy_is_the_trees_hash(tmp_path: Path) -> None:
    # The jail checks its copy of the snapshot with its own walk (it may not
    # import the trust layer): both must give the approved hash.
    tree = tmp_path / "tree"
    (tree / "pkg" / "deep").mkdir(parents=True)
    (tree / "plugin.py").write_text("x = 1\n", encoding="utf-8")
    (tree / "pkg" / "deep" / "data-é.txt").write_bytes(b"\x00\x01" * 5000)
    (tree / "pkg" / "empty").write_bytes(b"")
    (tree / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (tree / "run.sh").chmod(0o755)
    assert copy_hash(str(tree)) == tree_hash(tree)
    (tree / "run.sh").chmod(0o644)
    assert copy_hash(str(tree)) == tree_hash(tree)
