"""caplet benchmarks: one command, tables with ratios against alternatives run side by side.

    python benchmarks/run.py            # print the tables
    python benchmarks/run.py --write    # also rewrite docs/benchmarks.md

What is measured (design.md section 9):

* warm call round trip to one plugin worker, against a direct in-process
  call and a bare socketpair ping-pong with a child process (the IPC floor);
* cold start, enable to first result, against ``python -I -S -c pass`` and
  ``bwrap ... python -I -S -c pass`` (when bubblewrap is installed);
* guest snippet start: ``host.exec("1 + 1")`` taking a worker from the warm
  pool, against the same with no pool (start, run and close a guest worker);
* 100 plugins enabled at once in one host, each answering a call;
* static scan throughput over a copy of the standard library, against
  ``ast.parse`` alone;
* idle worker memory (USS: private clean + private dirty from smaps_rollup);
* the warm call with the per-plugin metrics on (the default) against the same
  call with them off (``Policy.metrics.enabled = False``), interleaved in
  one run (issue 17: within 5 %).

Timings are wall-clock medians over many repetitions on whatever machine
runs this; they are never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import ast
import functools
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

from caplet import GuestLimits, MetricsSettings, PluginHost, Policy
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO / "benchmarks"
#: Where the sections written by other scripts begin in docs/benchmarks.md.
_FIRST_OTHER_SECTION = "\n## Static scanner"

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


def bench_metrics(root: Path, repeat: int) -> dict[str, float]:
    """The warm call with metrics on and off, on one worker, call by call in turn.

    One host, one warm worker: the blocks differ only in the plugin's meter
    counting or not (``counting`` and the OpenTelemetry ``record`` hook, exactly
    what ``Policy.metrics.enabled = False`` leaves off on the call path), so the
    ratio is the cost of the metrics and not of two workers' scheduling. A host
    built with metrics off is checked to have that same meter state.
    """
    off_policy = Policy(metrics=MetricsSettings(enabled=False))
    with PluginHost(root / "plugins", state_dir=root / "state-off", policy=off_policy) as off:
        assert off.enable("bench", consent=True)
        off_meter = off.observer.meter("bench")
        assert not off_meter.counting
        assert off_meter.record is None
    samples: dict[str, list[float]] = {"on": [], "off": []}
    with PluginHost(root / "plugins", state_dir=root / "state-metrics") as host:
        assert host.enable("bench", consent=True)
        echo = functools.partial(host.functions("bench")["bench"]["echo"], "x")
        meter = host.observer.meter("bench")
        record = meter.record
        for _ in range(500):
            echo()
        # Call by call, on and off in turn (the order flipping every pair), so the
        # machine's drift and its noise fall on both alike.
        for number in range(repeat):
            for key in ("on", "off") if number % 2 == 0 else ("off", "on"):
                meter.counting = key == "on"
                meter.record = record if key == "on" else None
                start = time.perf_counter()
                echo()
                samples[key].append(time.perf_counter() - start)
        meter.counting, meter.record = True, record
        assert host.observer.stats()[0].calls >= repeat // 2
    return {key: median_us(values) for key, values in samples.items()}


#: Idle time before each cold start (not timed): long enough for the zygote's
#: spare to prepare its jail, as it has whenever enables are not back to back
#: (back-to-back starts are what the "many plugins" row measures).
SETTLE_S = 0.1


def bench_cold_start(host: PluginHost, repeat: int) -> dict[str, float]:
    """Enable-to-first-result: snapshot + verify + sandboxed worker + plugin load + one call."""
    samples = []
    for _ in range(repeat):
        host.disable("bench")
        time.sleep(SETTLE_S)
        start = time.perf_counter()
        # The benchmark's own plugins, not approved: running it is the consent.
        host.enable("bench", consent=True)
        host.call("bench", "bench.echo", "x")
        samples.append(time.perf_counter() - start)

    def run(*argv: str) -> float:
        return statistics.median(time_each(lambda: subprocess.run(argv, check=True), repeat)) * 1e3

    results = {
        "caplet_enable": statistics.median(samples) * 1e3,
        "python_isolated": run(sys.executable, "-I", "-S", "-c", "pass"),
    }
    bwrap = shutil.which("bwrap")
    if bwrap is not None:
        results["bwrap_python"] = run(
            bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            os.path.realpath(sys.executable),  # the venv may live under the covered /tmp
            "-I",
            "-S",
            "-c",
            "pass",
        )
    return results


def bench_guest(root: Path, repeat: int) -> dict[str, float]:
    """``exec("1 + 1")`` from a full warm pool, and cold (no pool: a worker started for it;
    its close, in a thread of the pool's own, comes after the answer)."""
    plugins = root / "guest-plugins"
    plugins.mkdir()

    def measure(pool_size: int) -> float:
        policy = Policy(guest=GuestLimits(pool_size=pool_size))
        samples = []
        with PluginHost(
            plugins, state_dir=root / f"guest-state-{pool_size}", policy=policy
        ) as host:
            assert host.exec("1 + 1").value == 2  # the zygote and the runner snapshot
            for _ in range(repeat):
                host.warm_guests()  # the refill is not timed: a full pool before each exec
                time.sleep(SETTLE_S)  # and a prepared spare for the cold one
                start = time.perf_counter()
                result = host.exec("1 + 1")
                samples.append(time.perf_counter() - start)
                assert result.value == 2, result.error
        return statistics.median(samples) * 1e3

    return {"warm_ms": measure(2), "cold_ms": measure(0)}


def bench_many(root: Path, count: int) -> dict[str, float]:
    """``count`` plugins enabled at once in one host, each answering a call."""
    plugins = root / "many"
    for index in range(count):
        directory = plugins / f"p{index:03d}"
        directory.mkdir(parents=True)
        (directory / "plugin.toml").write_text(MANIFEST.replace('"bench"', f'"p{index:03d}"', 1))
        (directory / "plugin.py").write_text(PLUGIN)
    with PluginHost(plugins, state_dir=root / "many-state") as host:
        start = time.perf_counter()
        for index in range(count):
            assert host.enable(f"p{index:03d}", consent=True)
        enabled_s = time.perf_counter() - start
        answers = sum(
            host.call(f"p{index:03d}", "bench.echo", index) == index for index in range(count)
        )
        uss = 0
        for index in range(count):
            pid = host.worker_pid(f"p{index:03d}")
            assert pid is not None
            uss += sandbox_uss_kib(pid)
    return {"count": count, "answered": answers, "enable_s": enabled_s, "uss_mib": uss / 1024}


def sandbox_uss_kib(pid: int) -> int:
    """USS of a worker and of the processes under it (the jail's monitor and pid 1)."""
    total = worker_uss_kib(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for child in children:
        total += sandbox_uss_kib(int(child))
    return total


def worker_uss_kib(pid: int) -> int:
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def bench_scan(tree: Path) -> dict[str, float]:
    files = [p for p in tree.rglob("*.py") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    scan_tree(tree, mode=ScanMode.PACKAGE)  # warm-up: the rule self-check runs once
    start = time.process_time()
    report = scan_tree(tree)
    scan_s = time.process_time() - start
    start = time.process_time()
    package = scan_tree(tree, mode=ScanMode.PACKAGE)
    package_s = time.process_time() - start
    start = time.process_time()
    for path in files:
        try:
            ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            pass
    parse_s = time.process_time() - start
    return {
        "megabytes": size / 1e6,
        "files": len(files),
        "findings": len(report.findings),
        "caplet_mb_s": size / 1e6 / scan_s,
        "package_mb_s": size / 1e6 / package_s,
        "package_parsed": package.files_parsed,
        "ast_parse_mb_s": size / 1e6 / parse_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--many", type=int, default=100)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="caplet-bench-"))
    try:
        plugin = work / "plugins" / "bench"
        plugin.mkdir(parents=True)
        (plugin / "plugin.toml").write_text(MANIFEST)
        (plugin / "plugin.py").write_text(PLUGIN)
        with PluginHost(work / "plugins", state_dir=work / "state") as host:
            assert host.enable("bench", consent=True)
            calls = bench_calls(host, args.calls)
            pid = host.worker_pid("bench")
            assert pid is not None
            uss = sandbox_uss_kib(pid)
            starts = bench_cold_start(host, args.starts)
            isolation = host.isolation
        guest = bench_guest(work, args.starts)
        metrics = bench_metrics(work, args.calls)
        many = bench_many(work, args.many)
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

    if "bwrap_python" in starts:
        bwrap_row = (
            f"`bwrap --unshare-all ... python -I -S -c pass` | {starts['bwrap_python']:.1f} ms | "
            f"{starts['bwrap_python'] / starts['caplet_enable']:.2f} |"
        )
    else:
        bwrap_row = "bwrap + python | not installed (apt-get install bubblewrap) | - |"
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"Python {platform.python_version()}, isolation: {isolation}"
    )
    tables = f"""\
Machine: {machine}

Command: `python benchmarks/run.py --calls {args.calls} --starts {args.starts} --many {args.many}` (bubblewrap installed for the comparison row)

### Warm call round trip (tiny argument), median of {args.calls}

| what | median | ratio to caplet |
|---|---:|---:|
| caplet `host.call` to a warm worker | {calls["caplet"]:.1f} µs | 1.00 |
| bare socketpair ping-pong with a child process (IPC floor) | {calls["socketpair"]:.1f} µs | {calls["socketpair"] / calls["caplet"]:.2f} |
| direct in-process call (no isolation at all) | {calls["direct"]:.2f} µs | {calls["direct"] / calls["caplet"]:.3f} |

Sustained: {calls["calls_per_s"]:,.0f} calls/s to one plugin from one thread.

### Warm call with per-plugin metrics on and off, median of {args.calls} each (alternating call by call)

| what | median | ratio to metrics off |
|---|---:|---:|
| caplet `host.call`, metrics off (`Policy.metrics.enabled = false`) | {metrics["off"]:.1f} µs | 1.00 |
| caplet `host.call`, metrics on (the default: counters, latency histogram, OpenTelemetry API present, no SDK) | {metrics["on"]:.1f} µs | {metrics["on"] / metrics["off"]:.3f} |

### Cold start, enable to first result, median of {args.starts}

| what | median | ratio to caplet |
|---|---:|---:|
| caplet enable + first call after 0.1 s idle (snapshot, verify, the request's grants on the spare's prepared jail, Landlock, seccomp, rlimits, plugin load) | {starts["caplet_enable"]:.1f} ms | 1.00 |
| `python -I -S -c pass` (no isolation) | {starts["python_isolated"]:.1f} ms | {starts["python_isolated"] / starts["caplet_enable"]:.2f} |
| {bwrap_row}

### Guest snippet start, `host.exec("1 + 1")`, median of {args.starts}

| what | median | ratio to the warm pool |
|---|---:|---:|
| caplet `exec` from the warm pool (a pre-started zero-capability worker; the snippet, its reply) | {guest["warm_ms"]:.1f} ms | 1.00 |
| caplet `exec` cold (`pool_size=0`: start a sandboxed worker on a prepared spare, run the snippet; the worker is closed after the answer) | {guest["cold_ms"]:.1f} ms | {guest["cold_ms"] / guest["warm_ms"]:.2f} |
| `python -I -S -c pass` (no isolation) | {starts["python_isolated"]:.1f} ms | {starts["python_isolated"] / guest["warm_ms"]:.2f} |

### Many plugins

{many["answered"]:.0f} of {many["count"]:.0f} plugins enabled in one host answered a call; enabling all took {many["enable_s"]:.2f} s; their workers use {many["uss_mib"]:.0f} MiB USS in total.

### Static scan of the standard library ({scan["files"]:.0f} files, {scan["megabytes"]:.1f} MB)

| what | throughput | ratio to caplet |
|---|---:|---:|
| caplet `scan_tree`, package mode (prefilter; {scan["package_parsed"]:.0f} files parsed) | {scan["package_mb_s"]:.2f} MB/s | 1.00 |
| caplet `scan_tree`, plugin mode (every file parsed; {scan["findings"]:.0f} findings) | {scan["caplet_mb_s"]:.2f} MB/s | {scan["caplet_mb_s"] / scan["package_mb_s"]:.2f} |
| `ast.parse` alone | {scan["ast_parse_mb_s"]:.2f} MB/s | {scan["ast_parse_mb_s"] / scan["package_mb_s"]:.2f} |

CPU seconds of this process (`time.process_time`), one core. Bandit and
GuardDog on the same trees, recall and precision: the scanner section below
(`benchmarks/scan_bench.py`).

### Idle worker memory

| what | USS |
|---|---:|
| one idle plugin worker (jail monitor + worker) | {uss / 1024:.1f} MiB |
"""
    bwrap_ms = starts.get("bwrap_python")
    bars = [
        ("warm call ≤ 30 µs median", f"{calls['caplet']:.1f} µs", calls["caplet"] <= 30),
        (
            "warm call within 3x of the bare echo",
            f"{calls['caplet'] / calls['socketpair']:.1f}x",
            calls["caplet"] <= 3 * calls["socketpair"],
        ),
        (
            "≥ 20,000 calls/s to one plugin",
            f"{calls['calls_per_s']:,.0f}/s",
            calls["calls_per_s"] >= 20_000,
        ),
        (
            "cold enable-to-first-result ≤ 10 ms",
            f"{starts['caplet_enable']:.1f} ms",
            starts["caplet_enable"] <= 10,
        ),
        (
            "cold start ≥ 2x faster than bwrap + python",
            f"{bwrap_ms / starts['caplet_enable']:.2f}x" if bwrap_ms else "bwrap not installed",
            bwrap_ms is not None and bwrap_ms >= 2 * starts["caplet_enable"],
        ),
        (
            "guest snippet start ≤ 10 ms (warm pool)",
            f"{guest['warm_ms']:.1f} ms",
            guest["warm_ms"] <= 10,
        ),
        (
            "guest snippet start ≤ 10 ms (cold, no pool)",
            f"{guest['cold_ms']:.1f} ms",
            guest["cold_ms"] <= 10,
        ),
        (
            "cold guest snippet ≥ 2x faster than bwrap + python",
            f"{bwrap_ms / guest['cold_ms']:.2f}x" if bwrap_ms else "bwrap not installed",
            bwrap_ms is not None and bwrap_ms >= 2 * guest["cold_ms"],
        ),
        ("idle worker ≤ 15 MB USS", f"{uss / 1024:.1f} MiB", uss / 1024 <= 15),
        (
            "warm call with metrics within 5% of without (issue 17)",
            f"{metrics['on'] / metrics['off']:.3f}x",
            metrics["on"] <= 1.05 * metrics["off"],
        ),
        (
            "100 plugins enabled at once, all answering",
            f"{many['answered']:.0f}/{many['count']:.0f}",
            many["count"] >= 100 and many["answered"] == many["count"],
        ),
        (
            "static scan ≥ 10 MB/s (package mode)",
            f"{scan['package_mb_s']:.2f} MB/s",
            scan["package_mb_s"] >= 10,
        ),
    ]
    tables += "\n### Against the bars (design.md section 9, issue 3)\n\n| bar | measured | met |\n|---|---|---|\n"
    tables += "".join(f"| {bar} | {value} | {'yes' if ok else 'no'} |\n" for bar, value, ok in bars)
    print(tables)
    if args.write:
        target = REPO / "docs" / "benchmarks.md"
        intro = (
            "# Benchmarks\n\nLatest results of `benchmarks/run.py` (design.md section 9 has "
            "the bars). Re-run it after any change to the call path, the launcher or the "
            "scanner, and commit the new tables. Where the time goes, and why some bars are "
            "missed: docs/architecture.md, section Performance.\n\n"
        )
        # The scanner comparison (Bandit, GuardDog, recall) takes ~35 minutes
        # and downloads 100 sdists, and the soak a few minutes, so each has
        # its own script; their latest sections are carried along here (the
        # soak's between markers, which benchmarks/soak.py --write replaces).
        extra = ""
        for section in (BENCH_DIR / "scan_results.md", BENCH_DIR / "soak_results.md"):
            if section.exists():
                extra += "\n" + section.read_text()
        # Only this script's own section is replaced: what follows it in the
        # document (the scanner's, the soak's, and the prose written beside
        # them) is kept as it is; rebuilding it from the result files dropped
        # everything written into the document by hand.
        existing = target.read_text() if target.exists() else ""
        start = existing.find(_FIRST_OTHER_SECTION)
        if start >= 0:
            extra = "\n" + existing[start + 1 :]
        target.write_text(intro + tables + extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
