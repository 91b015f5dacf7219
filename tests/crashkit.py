"""Helpers of the kill -9 tests: count an operation's state write steps, kill it at each.

A ``caplet`` command runs as a real subprocess with the test-only hooks of
:mod:`caplet._atomic`: ``CAPLET_TEST_WRITE_TRACE`` lists its write steps
(one traced run), then ``CAPLET_TEST_KILL_AT_WRITE=N`` makes a fresh copy of
the same starting state die by SIGKILL at step N. Every run starts from its
own copy of the starting state, so each one sees exactly the steps traced.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from caplet._atomic import KILL_AT_WRITE_ENV, WRITE_TRACE_ENV
from caplet._cli._app import app

_runner = CliRunner()


def caplet(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m caplet ARGS`` as a real process (no colour, nothing inherited but env)."""
    return subprocess.run(
        [sys.executable, "-m", "caplet", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        cwd=cwd,
        timeout=180,
        check=False,
    )


def write_steps(
    args: Sequence[str], trace: Path, *, env: Mapping[str, str] | None = None
) -> list[str]:
    """Run ``caplet ARGS`` to completion and return the labels of its write steps, in order."""
    result = caplet(args, env={**(env or {}), WRITE_TRACE_ENV: str(trace)})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = trace.read_text(encoding="utf-8").splitlines()
    assert [int(line.split(" ", 1)[0]) for line in lines] == list(range(1, len(lines) + 1))
    return [line.split(" ", 1)[1] for line in lines]


def kill_at(
    args: Sequence[str], step: int, *, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``caplet ARGS`` and let it SIGKILL itself at write step *step*; assert it did."""
    result = caplet(args, env={**(env or {}), KILL_AT_WRITE_ENV: str(step)})
    assert result.returncode == -9, (step, result.returncode, result.stdout, result.stderr)
    return result


def kill_each(
    world: Path,
    tmp_path: Path,
    args: Callable[[Path], Sequence[str]],
    points: Iterable[int],
    *,
    env: Mapping[str, str] | None = None,
) -> list[tuple[int, Path]]:
    """Kill ``caplet ARGS(copy)`` at each of *points*, each in its own copy of *world*.

    Two at a time: the runs are independent, and the machine has two cores.
    Returns the (step, copy) pairs to verify, in the order of *points*.
    """
    runs = [(step, copy_world(world, tmp_path / f"run-{step}")) for step in points]

    def one(run: tuple[int, Path]) -> subprocess.CompletedProcess[str]:
        step, root = run
        return kill_at(args(root), step, env=env)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(one, runs))
    return runs


def seeded_points(total: int, count: int, seed: int) -> list[int]:
    """*count* step numbers out of 1..*total*, the same ones on every run (sorted)."""
    if total <= count:
        return list(range(1, total + 1))
    return sorted(random.Random(seed).sample(range(1, total + 1), count))


def copy_world(source: Path, target: Path) -> Path:
    """A copy of a test's starting state (plugins, state dir, lock file), modes included."""
    shutil.copytree(source, target, symlinks=True)
    return target


def doctor(*args: str, code: int = 0) -> dict[str, Any]:
    """``caplet doctor --check-state --json ARGS`` in-process; assert the exit code."""
    result = _runner.invoke(app, ["doctor", "--check-state", "--json", *args])
    assert result.exit_code == code, (result.exit_code, result.output)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def warnings_only(document: Mapping[str, Any], *kinds: str) -> None:
    """The doctor report holds only warnings, each of one of *kinds*."""
    problems = document["problems"]
    assert all(not p["damaged"] and p["kind"] in kinds for p in problems), problems
