"""mypy --strict and ruff run as part of the suite, so `pytest` alone gates a change."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.lint
@pytest.mark.slow
def test_mypy_strict() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "src", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.lint
def test_ruff_check_and_format() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    check = subprocess.run(
        [ruff, "check", "src", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = subprocess.run(
        [ruff, "format", "--check", "src", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
