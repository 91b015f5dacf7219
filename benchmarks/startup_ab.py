"""`caplet scan` start-up of several checkouts side by side, in the same minutes (issue 16).

``scan_bench.startup_cpu`` measures the checkout it runs from; a change to the
start-up is judged against the commit before it, on the same machine at the same
load. This runs the installed ``caplet`` console script with each given source
folder first on ``PYTHONPATH`` (a worktree's ``src``), alternating between them run
by run, both as a ``--json`` run and as a run that draws the table for people,
each with a self-check cache of its own (remembered by a first, uncounted run), and
prints the median CPU of each beside the first folder's::

    git worktree add --detach /tmp/base REV
    python benchmarks/startup_ab.py /tmp/base/src src
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path


def _cpu_ms(command: Sequence[str], env: dict[str, str]) -> float:
    """CPU milliseconds of one child process (user + system, ``RUSAGE_CHILDREN``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return spent * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("sources", nargs="+", type=Path, help="a checkout's src folder")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    script = Path(sys.executable).with_name("caplet")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "caplet"]
    modes = {"--json": ["--json"], "table": []}
    spent: dict[tuple[Path, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as work:
        empty = Path(work, "empty")
        empty.mkdir()
        envs = {}
        for number, source in enumerate(args.sources):
            # bytecode compiled first, as pip does when it installs a wheel
            compileall.compile_dir(source, quiet=1)
            cache = Path(work, f"cache{number}")
            envs[source] = {**os.environ, "PYTHONPATH": str(source), "XDG_CACHE_HOME": str(cache)}
            for mode, extra in modes.items():
                _cpu_ms([*command, "scan", str(empty), *extra], envs[source])  # the replay
                spent[source, mode] = []
        for _ in range(args.runs):
            for source in args.sources:
                for mode, extra in modes.items():
                    run = _cpu_ms([*command, "scan", str(empty), *extra], envs[source])
                    spent[source, mode].append(run)
        bare = statistics.median(
            _cpu_ms([sys.executable, "-c", "pass"], dict(os.environ)) for _ in range(args.runs)
        )
    first = args.sources[0]
    print(f"| source | mode | median CPU of {args.runs} runs | against {first} |")
    print("|---|---|---:|---:|")
    for source in args.sources:
        for mode in modes:
            median = statistics.median(spent[source, mode])
            ratio = median / statistics.median(spent[first, mode])
            print(f"| {source} | {mode} | {median:.1f} ms | {ratio:.2f}x |")
    print(f"| `python -c pass` | | {bare:.1f} ms | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
