"""benchmarks/scan_split.py and astpass_profile.py keep working: each wraps the
scanner's own functions by name, so a scanner refactor that moves one breaks it (the
seventeenth session's `_focus` split broke both, unnoticed for three sessions). Run on a
small folder in a child process; nothing about time is asserted, only that every stage
is charged and the scan parsed a file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "scan_split.py"


def test_scan_split_charges_every_stage(tmp_path: Path) -> None:
    tree = tmp_path / "pkg"
    tree.mkdir()
    # A file the prefilter must send to the parser (a decoder feeding exec), beside
    # one it decides alone.
    (tree / "setup.py").write_text(
        "import base64\nexec(base64.b64decode('cHJpbnQoMSk='))\n", encoding="utf-8"
    )
    (tree / "plain.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(BENCH), "--tree", str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout.strip().splitlines()[-1])["tree"]
    stages = ("listing", "reading", "decoding", "prefilter", "parse", "survey", "rules")
    assert set(stages) <= set(row)
    assert row["parse"] > 0, row  # the wrapped parser saw the install script
    assert row["MB"] > 0


ASTPASS = BENCH.with_name("astpass_profile.py")


def test_astpass_profile_times_the_pass(tmp_path: Path) -> None:
    tree = tmp_path / "pkg"
    tree.mkdir()
    (tree / "setup.py").write_text(
        "import base64\nexec(base64.b64decode('cHJpbnQoMSk='))\n", encoding="utf-8"
    )
    result = subprocess.run(
        [sys.executable, str(ASTPASS), "--tree", str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "tree: 1 files" in result.stdout, result.stdout
