"""caplet benchmarks: one command, tables with ratios against alternatives run side by side.

    python benchmarks/run.py            # print the tables
    python benchmarks/run.py --write    # also rewrite docs/benchmarks.md

What is measured (design.md section 9):

* warm call round trip to one plugin worker, against a direct in-process
  call and a bare socketpair ping-pong with a child process (the IPC floor);
* cold start of a worker (snapshot + process + plugin load), against
  ``python -c pass`` and ``python -I -S -c pass``;
* static scan throughput over a copy of the standard library, against
  ``ast.parse`` alone;
* idle worker memory (USS: private clean + private dirty from smaps_rollup).

Timings are wall-clock medians over many repetitions on whatever machine
runs this; they are never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from caplet import PluginHost
from caplet._scan._scanner import scan_tree

REPO = Path(__file__).resolve().parents[1]

PLUGIN = """
def create_functions(config):
    def echo(value):
        return value

    return {"bench": {"echo": echo}}
"""
MANIFEST = """
name = "bench"
version = "1.0.0"
description = "Benchmark plugin."

[modules.bench]
functions = ["echo"]
"""

PING_CHILD = textwrap.dedent(
    """
    import socket, sys
    sock = socket.socket(fileno=int(sys.argv[1]))
    while True:
        data = sock.recv(65536)
        if not data:
            break
        sock.sendall(data)
    """
)


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def time_each(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def bench_calls(host: PluginHost, repeat: int) -> dict[str, float]:
    echo = host.functions("bench")["bench"]["echo"]
    for _ in range(500):
        echo("x")
    caplet_samples = time_each(lambda: echo("x"), repeat)

    def direct(value: object) -> object:
        return value

    direct_samples = time_each(lambda: direct("x"), repeat)

    parent, child = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", PING_CHILD, str(child.fileno())], pass_fds=(child.fileno(),)
    )
    child.close()

    def ping() -> None:
        parent.sendall(b"\x00\x00\x00\x05hello")
        parent.recv(65536)

    for _ in range(500):
        ping()
    ping_samples = time_each(ping, repeat)
    parent.close()
    proc.wait(timeout=10)

    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < 2.0:
        echo("x")
        count += 1
    throughput = count / (time.perf_counter() - start)
    return {
        "caplet": median_us(caplet_samples),
        "direct": median_us(direct_samples),
        "socketpair": median_us(ping_samples),
        "calls_per_s": throughput,
    }


def bench_cold_start(host: PluginHost, repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        host.disable("bench")
        start = time.perf_counter()
        host.enable("bench")
        samples.append(time.perf_counter() - start)

    def run(*argv: str) -> list[float]:
        return time_each(lambda: subprocess.run(argv, check=True), repeat)

    return {
        "caplet_enable": statistics.median(samples) * 1e3,
        "python_pass": statistics.median(run(sys.executable, "-c", "pass")) * 1e3,
        "python_isolated": statistics.median(run(sys.executable, "-I", "-S", "-c", "pass")) * 1e3,
    }


def worker_uss_kib(pid: int) -> int:
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def bench_scan(tree: Path) -> dict[str, float]:
    files = [p for p in tree.rglob("*.py") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    start = time.perf_counter()
    report = scan_tree(tree)
    scan_s = time.perf_counter() - start
    start = time.perf_counter()
    for path in files:
        try:
            ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            pass
    parse_s = time.perf_counter() - start
    return {
        "megabytes": size / 1e6,
        "files": len(files),
        "findings": len(report.findings),
        "caplet_mb_s": size / 1e6 / scan_s,
        "ast_parse_mb_s": size / 1e6 / parse_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="caplet-bench-"))
    try:
        plugin = work / "plugins" / "bench"
        plugin.mkdir(parents=True)
        (plugin / "plugin.toml").write_text(MANIFEST)
        (plugin / "plugin.py").write_text(PLUGIN)
        with PluginHost(work / "plugins", state_dir=work / "state") as host:
            assert host.enable("bench")
            calls = bench_calls(host, args.calls)
            pid = host.worker_pid("bench")
            assert pid is not None
            uss = worker_uss_kib(pid)
            starts = bench_cold_start(host, args.starts)
            isolation = host.isolation
        stdlib = work / "stdlib"
        shutil.copytree(
            sysconfig.get_paths()["stdlib"],
            stdlib,
            ignore=shutil.ignore_patterns("site-packages", "__pycache__", "test", "tests"),
            symlinks=True,
        )
        scan = bench_scan(stdlib)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"Python {platform.python_version()}, isolation: {isolation}"
    )
    tables = f"""\
Machine: {machine}

Command: `python benchmarks/run.py --calls {args.calls} --starts {args.starts}`

### Warm call round trip (tiny argument), median of {args.calls}

| what | median | ratio to caplet |
|---|---:|---:|
| caplet `host.call` to a warm worker | {calls["caplet"]:.1f} µs | 1.00 |
| bare socketpair ping-pong with a child process (IPC floor) | {calls["socketpair"]:.1f} µs | {calls["socketpair"] / calls["caplet"]:.2f} |
| direct in-process call (no isolation at all) | {calls["direct"]:.2f} µs | {calls["direct"] / calls["caplet"]:.3f} |

Sustained: {calls["calls_per_s"]:,.0f} calls/s to one plugin from one thread.

### Cold start, median of {args.starts}

| what | median | ratio to caplet |
|---|---:|---:|
| caplet enable (snapshot + verify + worker start + plugin load) | {starts["caplet_enable"]:.1f} ms | 1.00 |
| `python -c pass` | {starts["python_pass"]:.1f} ms | {starts["python_pass"] / starts["caplet_enable"]:.2f} |
| `python -I -S -c pass` | {starts["python_isolated"]:.1f} ms | {starts["python_isolated"] / starts["caplet_enable"]:.2f} |

### Static scan of the standard library ({scan["files"]:.0f} files, {scan["megabytes"]:.1f} MB)

| what | throughput | ratio to caplet |
|---|---:|---:|
| caplet `scan_tree` ({scan["findings"]:.0f} findings) | {scan["caplet_mb_s"]:.2f} MB/s | 1.00 |
| `ast.parse` alone | {scan["ast_parse_mb_s"]:.2f} MB/s | {scan["ast_parse_mb_s"] / scan["caplet_mb_s"]:.2f} |

### Idle worker memory

| what | USS |
|---|---:|
| one idle plugin worker | {uss / 1024:.1f} MiB |
"""
    print(tables)
    if args.write:
        target = REPO / "docs" / "benchmarks.md"
        intro = (
            "# Benchmarks\n\nLatest results of `benchmarks/run.py` (design.md section 9 has "
            "the bars). Re-run it after any change to the call path, the launcher or the "
            "scanner, and commit the new tables.\n\n"
        )
        target.write_text(intro + tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
