"""Cold start and warm call of several commits, measured in one run, alternating.

    python benchmarks/compare.py BASE=3715cd1 MAIN=main PERF2=perf2
    python benchmarks/compare.py --starts 60 --calls 20000 OLD=3715cd1 NEW=HEAD

Each ``LABEL=REF`` is checked out in its own detached worktree under
``--work`` (default: a directory in the system temporary directory) with its
own virtual environment (``pip install -e '.[test]'`` of that commit), so each
commit runs with the dependencies it declares. One driver process per commit
holds a ``PluginHost`` with the benchmark plugin of ``benchmarks/run.py``; the
parent then alternates between them:

* cold start, enable to first result (as ``run.py``: disable, 0.1 s idle so
  the zygote's spare is ready, then time ``enable`` + the first ``call``),
  one start per commit in turn, ``--starts`` rounds;
* warm call, ``host.functions(...)`` echo of a tiny argument, timed call by
  call: after each round of starts a block of ``--calls / --starts`` calls
  per commit in turn, to the worker that round started.

Only one driver works at a time, so the machine's load drifts over all of
them alike. Medians and ratios to the first commit are printed (and written
to ``--out`` as Markdown when given). Timings vary by tens of percent between
runs on a shared 2-core VM: compare ratios of one run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The driver run by each commit's interpreter: JSON lines in, JSON lines out.
DRIVER = textwrap.dedent(
    """
    import inspect, json, sys, tempfile, time
    from pathlib import Path
    from caplet import PluginHost

    PLUGIN = '''
    def create_functions(config):
        def echo(value):
            return value

        return {"bench": {"echo": echo}}
    '''
    MANIFEST = '''
    name = "bench"
    version = "1.0.0"
    description = "Benchmark plugin."

    [modules.bench]
    functions = ["echo"]
    '''
    work = Path(tempfile.mkdtemp(prefix="caplet-compare-"))
    plugin = work / "plugins" / "bench"
    plugin.mkdir(parents=True)
    (plugin / "plugin.toml").write_text(MANIFEST)
    (plugin / "plugin.py").write_text(PLUGIN)
    host = PluginHost(work / "plugins", state_dir=work / "state")
    # Commits before the consent switch enable an unapproved plugin as is.
    consent = {"consent": True} if "consent" in inspect.signature(host.enable).parameters else {}
    assert host.enable("bench", **consent)
    echo = host.functions("bench")["bench"]["echo"]
    for _ in range(500):
        echo("x")
    print(json.dumps({"ready": host.isolation}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "cold":
            host.disable("bench")
            time.sleep(command["settle_s"])
            start = time.perf_counter()
            host.enable("bench", **consent)
            host.call("bench", "bench.echo", "x")
            samples = [time.perf_counter() - start]
            echo = host.functions("bench")["bench"]["echo"]
            for _ in range(200):  # warm again for the call blocks
                echo("x")
        elif command["do"] == "warm":
            time.sleep(command["settle_s"])  # what the start left to do (a new spare) is done
            samples = []
            for _ in range(command["calls"]):
                start = time.perf_counter()
                echo("x")
                samples.append(time.perf_counter() - start)
        else:
            break
        print(json.dumps({"samples": samples}), flush=True)
    host.close()
    """
)


@dataclass
class Commit:
    label: str
    ref: str
    sha: str = ""
    root: Path = Path()
    python: Path = Path()
    process: subprocess.Popen[str] | None = None
    isolation: str = ""
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)

    def ask(self, command: dict[str, object]) -> list[float]:
        assert self.process is not None
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.label}: the driver exited (see its stderr above)")
        samples: list[float] = json.loads(line)["samples"]
        return samples


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def prepare(commit: Commit, work: Path) -> None:
    """A detached worktree of the commit and a venv with it installed (reused when present)."""
    commit.sha = git("rev-parse", "--verify", f"{commit.ref}^{{commit}}")
    commit.root = work / f"{commit.label}-{commit.sha[:10]}"
    commit.python = commit.root / ".venv" / "bin" / "python"
    if not commit.root.exists():
        git("worktree", "add", "--detach", str(commit.root), commit.sha)
    if not commit.python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(commit.root / ".venv")], check=True)
        subprocess.run(
            [str(commit.python), "-m", "pip", "install", "-q", "-e", f"{commit.root}[test]"],
            check=True,
        )


def start(commit: Commit) -> None:
    commit.process = subprocess.Popen(
        [str(commit.python), "-I", "-c", DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    assert commit.process.stdout is not None
    line = commit.process.stdout.readline()
    if not line:
        raise SystemExit(f"{commit.label}: the driver did not start")
    commit.isolation = json.loads(line)["ready"]


def stop(commit: Commit) -> None:
    if commit.process is not None and commit.process.stdin is not None:
        commit.process.stdin.write(json.dumps({"do": "stop"}) + "\n")
        commit.process.stdin.close()
        commit.process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("commits", nargs="+", metavar="LABEL=REF")
    parser.add_argument("--starts", type=int, default=40)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--settle", type=float, default=0.1)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "caplet-compare")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    commits = [Commit(*item.split("=", 1)) for item in args.commits]
    args.work.mkdir(parents=True, exist_ok=True)
    for commit in commits:
        prepare(commit, args.work)
    try:
        for commit in commits:
            start(commit)
        # Each round: a cold start of each commit in turn, then a block of warm
        # calls of each in turn, to the worker that start made. A worker keeps
        # the CPU placement it got (host and worker on one core or on two make
        # a several-fold difference to a round trip): fresh workers every
        # round spread that over all commits alike.
        block = -(-args.calls // args.starts)
        for _ in range(args.starts):
            for commit in commits:
                commit.cold += commit.ask({"do": "cold", "settle_s": args.settle})
            for commit in commits:
                commit.warm += commit.ask({"do": "warm", "calls": block, "settle_s": args.settle})
    finally:
        for commit in commits:
            stop(commit)
    base = commits[0]
    base_cold, base_warm = statistics.median(base.cold), statistics.median(base.warm)
    command = " ".join(["python benchmarks/compare.py", *sys.argv[1:]])
    lines = [
        f"Command: `{command}`",
        "",
        f"Cold start: median of {args.starts} each, one start per commit in turn after "
        f"{args.settle:g} s idle; warm call: median of {len(base.warm)} each, one block per "
        "commit in turn after each round of starts, to the worker that start made.",
        "",
        "| commit | cold enable-to-first-result | ratio | warm call | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for commit in commits:
        cold, warm = statistics.median(commit.cold), statistics.median(commit.warm)
        lines.append(
            f"| {commit.label} `{commit.sha[:7]}` | {cold * 1e3:.2f} ms | "
            f"{cold / base_cold:.3f} | {warm * 1e6:.1f} µs | {warm / base_warm:.3f} |"
        )
    lines += ["", *(f"- {c.label}: {c.isolation}" for c in commits)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.pop("PYTHONPATH", None)
    raise SystemExit(main())
