"""benchmarks/store_bench.py keeps working: run small, as documented, in a child process.

Like the soak's test, nothing about time is asserted: only that one command
measures every row on both backends (its own PostgreSQL server included)
and prints the table docs/benchmarks.md and docs/fleet.md quote.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "store_bench.py"


def test_store_bench_measures_both_backends() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH), "--count", "16"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = [
        line for line in result.stdout.splitlines() if re.match(r"\| (approvals|log|quar)", line)
    ]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == [
        "approvals/s, 1 process",
        "approvals/s, 4 processes",
        "log rows/s, 1 process",
        "log rows/s, 4 processes",
        "quarantine reads/s, 1 process",
    ]
    for row in rows:
        _, sqlite, postgres, ratio, _ = row.split("|")[1:]
        assert float(sqlite.replace(",", "")) > 0
        assert float(postgres.replace(",", "")) > 0
        assert ratio.strip().endswith("x")
