"""A scan says the same thing in every process, whatever Python's string hashing.

Sets of labels are ordered by str hashing, which PYTHONHASHSEED randomises per
process: a finding's text once depended on it, so a scan fanned out on Dask
workers (tests/test_scan_cluster.py) differed from the same scan run locally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from caplet._scan._examples import CANONICAL


def _corpus(root: Path) -> Path:
    """Every canonical example's bad and alias source, one file each, in one tree."""
    tree = root / "corpus"
    tree.mkdir()
    for index, example in enumerate(CANONICAL):
        if example.files:
            continue
        for variant, source in (("bad", example.bad), ("alias", example.alias)):
            if source is not None:
                (tree / f"e{index:03d}_{variant}.py").write_text(source, encoding="utf-8")
    return tree


def _scan(tree: Path, seed: str) -> object:
    result = subprocess.run(
        [sys.executable, "-m", "caplet", "scan", "--json", str(tree)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": seed},
        check=False,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_findings_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    tree = _corpus(tmp_path)
    assert len(list(tree.iterdir())) > 40
    first = _scan(tree, "0")
    for seed in ("1", "4242", "987654"):
        assert _scan(tree, seed) == first, f"PYTHONHASHSEED={seed}"
