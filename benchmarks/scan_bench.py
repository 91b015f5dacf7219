"""Static scanner benchmark: speed, precision and recall, caplet beside Bandit and GuardDog.

    python benchmarks/scan_bench.py --write   # the full run; the tables go to docs/benchmarks.md
    python benchmarks/scan_bench.py --quick   # every 5th benign package
    python benchmarks/scan_bench.py --fetch-only
    python benchmarks/scan_bench.py --speed-only [--quick]  # caplet beside ast.parse only
    python benchmarks/scan_bench.py --recall-only  # caplet's findings on the samples, digested

What it does (issue 16, point 3):

* builds (once) a venv with pinned Bandit and GuardDog in the cache;
* fetches the benign corpus (the 500 most downloaded PyPI projects' sdists)
  into a cache outside the repository and lists the stdlib and the malware
  samples (``scan_corpus``);
* runs every tool on the same trees in the same run, pinned to one CPU:
  throughput per wall and CPU second, beside ``ast.parse`` of the same files;
  the share of benign packages each tool flags at high severity; recall per
  malware class on ``tune`` and on ``holdout`` (samples are only ever read,
  never imported or executed); and the CPU a ``caplet scan`` process needs
  to start;
* prints the tables (``scan_report``), and with ``--write`` puts them into
  ``benchmarks/scan_results.md`` and docs/benchmarks.md.

Nothing here runs in the test suite: downloads and tool runs happen only when
this script is run by hand.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scan_corpus import (
    CACHE,
    CLASS_ORDER,
    Target,
    benign_targets,
    console,
    malware_targets,
    stdlib_target,
    top_pypi,
)
from scan_report import Measured, ToolInfo, build_report, markdown, show, write

import caplet

# --------------------------------------------------------------------------------------
# caplet adapter: the only code in this file that knows caplet's scanning API.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hit:
    """One high-severity finding, kept for the per-family shares and the miss lists."""

    rule_id: str
    file: str
    line: int


@dataclass(frozen=True, slots=True)
class CapletResult:
    """What the benchmark needs from one caplet scan of one tree."""

    danger: tuple[Hit, ...]
    findings: int
    files_scanned: int
    bytes_scanned: int


def caplet_scan(path: Path) -> CapletResult:
    """Scan ``path`` with caplet in package mode (what ``caplet scan DIR`` does without a
    manifest): threats and chains are danger, bare capabilities only observed."""
    report = caplet.scan_tree(path, mode=caplet.ScanMode.PACKAGE)
    danger = tuple(
        Hit(f.rule_id, f.file, f.line)
        for f in report.findings
        if f.severity is caplet.Severity.DANGER
    )
    return CapletResult(danger, len(report.findings), report.files_scanned, report.bytes_scanned)


# --------------------------------------------------------------------------------------

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TOOLS_VENV = CACHE / "tools-venv"
RESULTS_MD = BENCH / "scan_results.md"
RESULTS_JSON = CACHE / "scan_results.json"

# Versions verified to install and run on the benchmark machine (Python 3.11, x86_64).
BANDIT_PIN = "bandit==1.9.4"
GUARDDOG_PIN = "guarddog==3.2.0"

# A wall-clock budget per slow tool over the benign corpus: past it, the tool scans no
# further packages and its benign numbers cover the packages scanned so far (ranking order).
DEFAULT_BUDGET_S = 600.0
# One pathological package must not eat the whole budget.
PER_TARGET_TIMEOUT_S = 300.0


# ----------------------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class Outcome:
    """One tool's verdict on one target, under each of the tool's severity mappings."""

    target: str
    wall_s: float
    cpu_s: float
    flags: tuple[bool, ...]  # one per Tool.mappings entry
    hits: tuple[str, ...] = ()  # rule ids behind the first mapping, for the report
    error: str = ""


@dataclass(frozen=True, slots=True)
class Mapping:
    """How one tool's output becomes "flagged at high severity": a short label and the rule."""

    label: str
    rule: str


@dataclass(frozen=True, slots=True)
class Tool:
    """A scanner as the benchmark drives it."""

    name: str
    version: str
    mappings: tuple[Mapping, ...]  # how each flag is derived, shown in the output
    run: Callable[[Target], Outcome] = field(repr=False)
    slow: bool = False  # gets a time budget over the benign corpus
    unavailable: str = ""  # why it could not run here; then it is reported, not faked


@dataclass(frozen=True, slots=True)
class ChildRun:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    timed_out: bool


def run_json_child(
    command: list[str], target: Target, mappings: int
) -> tuple[ChildRun, dict[str, Any], Outcome | None]:
    """Run a tool that prints one JSON report; a timeout or non-JSON output is an Outcome."""
    child = run_child(command, PER_TARGET_TIMEOUT_S)
    unflagged = (False,) * mappings
    if child.timed_out:
        return (
            child,
            {},
            Outcome(target.name, child.wall_s, child.cpu_s, unflagged, error="timeout"),
        )
    try:
        report = json.loads(child.stdout)
    except ValueError:
        error = f"no JSON (exit {child.returncode}): {child.stderr[-200:]}"
        return child, {}, Outcome(target.name, child.wall_s, child.cpu_s, unflagged, error=error)
    return child, report, None


def run_child(argv: Sequence[str], timeout: float, env: dict[str, str] | None = None) -> ChildRun:
    """Run a CLI and charge it the CPU time of the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        timed_out = True
        code = -1
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ChildRun(code, out, err, wall, cpu, timed_out)


def family(rule_id: str) -> str:
    """``CPL-PROC-001`` -> ``PROC``: the middle part names the rule family."""
    parts = rule_id.split("-")
    return parts[1] if len(parts) >= 3 else rule_id


def caplet_tool() -> Tool:
    def run(target: Target) -> Outcome:
        start = time.perf_counter()
        cpu_start = time.process_time()
        try:
            result = caplet_scan(target.path)
        except Exception as exc:  # a crash is a result to report, not a reason to stop
            return Outcome(
                target.name,
                time.perf_counter() - start,
                time.process_time() - cpu_start,
                (False,),
                error=f"{type(exc).__name__}: {exc}",
            )
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        rules = tuple(sorted({h.rule_id for h in result.danger}))
        return Outcome(target.name, wall, cpu, (bool(result.danger),), rules)

    return Tool(
        "caplet",
        caplet.__version__,
        (
            Mapping(
                "any DANGER",
                "any finding of severity DANGER from `caplet.scan_tree(DIR, "
                "mode=ScanMode.PACKAGE)`, what `caplet scan DIR` does for code without a manifest",
            ),
        ),
        run,
    )


def bandit_tool(venv: Path, problem: str) -> Tool:
    exe = venv / "bin" / "bandit"

    def run(target: Target) -> Outcome:
        child, report, failed = run_json_child(
            [str(exe), "-r", str(target.path), "-f", "json", "-q"], target, 1
        )
        if failed is not None:
            return failed
        high = sorted(
            {
                str(issue["test_id"])
                for issue in report.get("results", [])
                if issue["issue_severity"] == "HIGH"
                and issue["issue_confidence"] in {"HIGH", "MEDIUM"}
            }
        )
        return Outcome(target.name, child.wall_s, child.cpu_s, (bool(high),), tuple(high))

    return Tool(
        "Bandit",
        BANDIT_PIN.split("==")[1],
        (
            Mapping(
                "HIGH severity",
                "any issue of HIGH severity with HIGH or MEDIUM confidence from "
                "`bandit -r DIR -f json` (default profile, `# nosec` honoured)",
            ),
        ),
        run,
        slow=True,
        unavailable=problem,
    )


def guarddog_flags(report: dict[str, object]) -> tuple[tuple[bool, bool, bool], tuple[str, ...]]:
    """(any source rule, any threat rule, GuardDog's own high_risk label), matched rules."""
    results = report.get("results")
    matched: list[str] = []
    if isinstance(results, dict):
        # GuardDog 3 names its source-code rules capability-* and threat-*; the metadata
        # rules (typosquatting, deceptive_author, ...) need --metadata and are not source.
        matched = sorted(
            rule
            for rule, found in results.items()
            if found and rule.startswith(("capability-", "threat-"))
        )
    score = report.get("risk_score")
    label = score.get("label") if isinstance(score, dict) else None
    flags = (
        bool(matched),
        any(rule.startswith("threat-") for rule in matched),
        label == "high_risk",
    )
    return flags, tuple(matched)


def guarddog_tool(venv: Path, problem: str) -> Tool:
    exe = venv / "bin" / "guarddog"

    def run(target: Target) -> Outcome:
        child, report, failed = run_json_child(
            [str(exe), "pypi", "scan", str(target.path), "--output-format", "json"], target, 3
        )
        if failed is not None:
            return failed
        flags, matched = guarddog_flags(report)
        errors = report.get("errors")
        error = f"rule errors: {', '.join(sorted(errors))}" if errors else ""
        return Outcome(target.name, child.wall_s, child.cpu_s, flags, matched, error)

    return Tool(
        "GuardDog",
        GUARDDOG_PIN.split("==")[1],
        (
            Mapping(
                "any source rule",
                "any match of a source-code rule (GuardDog 3's capability-* and threat-* rules) "
                "from `guarddog pypi scan DIR --output-format json`",
            ),
            Mapping(
                "any threat-* rule", "any match of a threat-* rule (capabilities alone ignored)"
            ),
            Mapping(
                "high_risk label",
                'GuardDog 3\'s own verdict: `risk_score.label == "high_risk"` (its risk engine '
                "correlates capabilities with threats, like caplet's threat rules)",
            ),
        ),
        run,
        slow=True,
        unavailable=problem,
    )


def venv_version(python: Path, dist: str) -> str:
    probe = run_child(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"], 60
    )
    return probe.stdout.strip() if probe.returncode == 0 else ""


def ensure_tools_venv() -> tuple[str, str]:
    """Create/refresh the tools venv; return why Bandit / GuardDog cannot run ("" if fine)."""
    python = TOOLS_VENV / "bin" / "python"
    if not python.exists():
        console.print("[bold]creating the tools venv in the cache[/bold]")
        subprocess.run([sys.executable, "-m", "venv", str(TOOLS_VENV)], check=True)
    wanted = {"bandit": BANDIT_PIN, "guarddog": GUARDDOG_PIN}
    missing = [
        pin for dist, pin in wanted.items() if venv_version(python, dist) != pin.split("==")[1]
    ]
    problems = {"bandit": "", "guarddog": ""}
    for pin in missing:
        console.print(f"[bold]pip install {pin} into the tools venv[/bold]")
        install = run_child([str(python), "-m", "pip", "install", "-q", pin], 1800)
        if install.returncode != 0:
            problems[pin.split("==")[0]] = f"pip install {pin} failed: {install.stderr[-300:]}"
    # Smoke-test GuardDog on a one-file tree: it needs a kernel sandbox and its rule engines.
    if not problems["guarddog"]:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "probe.py").write_text("import os\nos.system('true')\n")
            probe = run_child(
                [
                    str(TOOLS_VENV / "bin" / "guarddog"),
                    "pypi",
                    "scan",
                    tmp,
                    "--output-format",
                    "json",
                ],
                300,
            )
            try:
                json.loads(probe.stdout)
            except ValueError:
                problems["guarddog"] = f"guarddog does not run here: {probe.stderr[-300:]}"
    return problems["bandit"], problems["guarddog"]


# ----------------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Sweep:
    """One tool over one list of targets (or as many as its budget allowed)."""

    tool: str
    outcomes: tuple[Outcome, ...]
    skipped: tuple[str, ...] = ()  # targets not scanned because the budget ran out

    @property
    def wall_s(self) -> float:
        return sum(o.wall_s for o in self.outcomes)

    @property
    def cpu_s(self) -> float:
        return sum(o.cpu_s for o in self.outcomes)

    def names(self) -> frozenset[str]:
        return frozenset(o.target for o in self.outcomes)

    def flagged(self, mapping: int) -> list[Outcome]:
        return [o for o in self.outcomes if o.flags[mapping]]


def sweep(tool: Tool, targets: Sequence[Target], label: str, budget: float | None) -> Sweep:
    outcomes: list[Outcome] = []
    skipped: list[str] = []
    spent = 0.0
    for number, target in enumerate(targets, 1):
        if budget is not None and spent > budget:
            skipped.append(target.name)
            continue
        console.print(f"[dim]{tool.name} {label} {number}/{len(targets)}: {target.name}[/dim]")
        outcome = tool.run(target)
        spent += outcome.wall_s
        outcomes.append(outcome)
    return Sweep(tool.name, tuple(outcomes), tuple(skipped))


def pin_to_one_cpu() -> int:
    """Pin this process (and so every tool it starts) to one CPU: the bars are per core."""
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def parse_speed(targets: Sequence[Target]) -> tuple[float, float]:
    """``ast.parse`` of every ``.py`` of ``targets``, in this process: (MB, CPU seconds).

    The same files and bytes caplet's throughput counts; what caplet must beat by
    deciding most files without parsing them (issue 16: 2.5x in the same run).
    """
    size = 0
    seconds = 0.0
    for target in targets:
        for path in sorted(target.path.rglob("*.py")):
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            size += len(data)
            start = time.process_time()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ast.parse(data)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass  # a file that does not parse costs its attempt, like in the scanner
            seconds += time.process_time() - start
    return size / 1e6, seconds


def startup_cpu(runs: int) -> tuple[float, float, float]:
    """CPU milliseconds of ``caplet scan EMPTY --json``: the median of ``runs``, the first
    run on an empty cache, and the median of ``python -c pass``.

    The console script next to this interpreter is what a user runs; each run is a
    new process, charged through ``RUSAGE_CHILDREN``. caplet's bytecode is compiled
    first, as pip does when it installs a wheel: an editable checkout run under
    ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in every run,
    which no installed caplet does. The runs get a cache directory of their own: the
    first one replays the scanner's self-check and remembers the pass there
    (caplet._scan._checkcache), the others find it, as a user's second scan does.
    """
    compileall.compile_dir(Path(caplet.__file__).parent, quiet=1)
    script = Path(sys.executable).with_name("caplet")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "caplet"]
    scans: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        first = run_child([*command, "scan", empty, "--json"], 60, env=env)
        if first.returncode != 0:
            raise RuntimeError(f"caplet scan failed: {first.stderr[-300:]}")
        for _ in range(runs):
            child = run_child([*command, "scan", empty, "--json"], 60, env=env)
            if child.returncode != 0:
                raise RuntimeError(f"caplet scan failed: {child.stderr[-300:]}")
            scans.append(child.cpu_s * 1000)
            bare.append(run_child([sys.executable, "-c", "pass"], 60).cpu_s * 1000)
    return statistics.median(scans), first.cpu_s * 1000, statistics.median(bare)


def speed_child(benign: Sequence[Target]) -> int:
    """One repetition of :func:`speed_only`, in a fresh process: the stdlib, then ``benign``
    (as the full run orders them: the stdlib is the process's first pass over new text),
    then ``ast.parse`` of both; one JSON line of (MB, caplet CPU s, ast.parse CPU s)."""
    stdlib = stdlib_target()
    with tempfile.TemporaryDirectory() as tmp:  # import and rule compilation not charged
        (Path(tmp) / "warm.py").write_text("x = 1\n")
        caplet_scan(Path(tmp))
    cpu: dict[str, float] = {}
    for label, targets in (("stdlib", [stdlib]), ("benign", list(benign))):
        start = time.process_time()
        for target in targets:
            caplet_scan(target.path)
        cpu[label] = time.process_time() - start
    out = {}
    for label, targets in (("stdlib", [stdlib]), ("benign", list(benign))):
        if targets:
            mb, parse_cpu = parse_speed(targets)
            out[label] = (mb, cpu[label], parse_cpu)
    print(json.dumps(out))
    return 0


def speed_only(repeat: int, quick: bool) -> int:
    """Package mode beside ``ast.parse``, ``repeat`` fresh processes: medians of MB/s of CPU.

    The quick check for issue 16's speed bars (>= 20 MB/s, >= 2.5x ``ast.parse``): no
    other tool, no write; the stdlib, and with ``--quick`` every 5th benign package.
    Each repetition is a new process, so each pays the first pass over new text that
    every ``caplet scan`` pays (RE2 builds its DFA lazily), and runs both sides, so a
    noisy neighbour slows the pair it lands on, not one side of the ratio.
    """
    command = [sys.executable, __file__, "--speed-child"] + (["--quick"] if quick else [])
    rows: dict[str, list[tuple[float, float]]] = {}
    for number in range(1, repeat + 1):
        child = subprocess.run(command, capture_output=True, text=True, check=True)
        measured = json.loads(child.stdout.strip().splitlines()[-1])
        for label, (mb, scan_cpu, parse_cpu) in measured.items():
            rows.setdefault(label, []).append((mb / scan_cpu, mb / parse_cpu))
            console.print(
                f"run {number} {label}: {mb:.1f} MB; caplet {mb / scan_cpu:.2f} MB/s, "
                f"ast.parse {mb / parse_cpu:.2f} MB/s, {parse_cpu / scan_cpu:.2f}x"
            )
    for label, pairs in rows.items():
        scan = statistics.median(p[0] for p in pairs)
        parse = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[0] / p[1] for p in pairs)
        console.print(
            f"{label}, median of {repeat}: caplet package mode {scan:.2f} MB/s (CPU), "
            f"ast.parse {parse:.2f} MB/s, ratio {ratio:.2f}x"
        )
    return 0


def recall_only() -> int:
    """caplet alone on the malware samples: flagged per set, and a digest of every finding.

    Two checkouts with the same digest found the same findings (rule, severity, file,
    line) on every sample, the check a speed change must pass (recall unchanged,
    issue 16); the holdout's sample names are never printed (it stays unseen by
    rule tuning).
    """
    for split in ("tune", "holdout"):
        targets = malware_targets(split)
        digest = hashlib.sha256()
        flagged = 0
        per_class: dict[str, list[int]] = {}
        missed: list[str] = []
        for target in targets:
            report = caplet.scan_tree(target.path, mode=caplet.ScanMode.PACKAGE)
            lines = sorted(
                f"{f.rule_id} {f.severity.name} {f.file}:{f.line}" for f in report.findings
            )
            digest.update("\n".join([target.name, *lines, ""]).encode())
            hit = any(f.severity is caplet.Severity.DANGER for f in report.findings)
            flagged += hit
            counts = per_class.setdefault(target.group, [0, 0])
            counts[0] += hit
            counts[1] += 1
            if not hit:
                missed.append(target.name)
        console.print(
            f"{split}: {flagged}/{len(targets)} flagged (any DANGER); "
            f"every finding's digest {digest.hexdigest()[:16]}"
        )
        for group in sorted(per_class, key=_class_rank):
            hits, total = per_class[group]
            console.print(f"  {group}: {hits}/{total}")
        # The tune set's misses are named (the rules are tuned on them); the holdout's
        # only counted, so that nobody tunes on its names.
        if split == "tune" and missed:
            console.print(f"  missed: {', '.join(missed)}")
    return 0


def _class_rank(group: str) -> int:
    return CLASS_ORDER.index(group) if group in CLASS_ORDER else len(CLASS_ORDER)


def dump_json(runs: dict[tuple[str, str], Sweep]) -> None:
    """Every verdict, for whoever tunes rules next (not committed: it lives in the cache)."""
    data = [
        {
            "tool": tool,
            "corpus": corpus,
            "skipped": list(result.skipped),
            "outcomes": [
                {
                    "target": o.target,
                    "wall_s": round(o.wall_s, 4),
                    "cpu_s": round(o.cpu_s, 4),
                    "flags": list(o.flags),
                    "hits": list(o.hits),
                    "error": o.error,
                }
                for o in result.outcomes
            ],
        }
        for (tool, corpus), result in runs.items()
    ]
    RESULTS_JSON.write_text(json.dumps(data, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--top", type=int, default=500, help="benign corpus: the N most downloaded projects"
    )
    parser.add_argument("--quick", action="store_true", help="every 5th benign package only")
    parser.add_argument(
        "--fetch-only", action="store_true", help="download the corpora, scan nothing"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write benchmarks/scan_results.md and the scanner section of docs/benchmarks.md",
    )
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="only caplet package mode and ast.parse, stdlib (--quick: and the benign subset)",
    )
    parser.add_argument("--speed-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--recall-only",
        action="store_true",
        help="only caplet on the malware samples: flagged per set and a digest of all findings",
    )
    parser.add_argument("--repeat", type=int, default=3, help="--speed-only: processes (median)")
    parser.add_argument("--refresh", action="store_true", help="re-resolve latest releases")
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="seconds of wall time per slow tool over the benign corpus (default 600)",
    )
    parser.add_argument(
        "--startup-runs", type=int, default=15, help="caplet scan start-ups to time (median)"
    )
    args = parser.parse_args(argv)

    cpu = pin_to_one_cpu()
    CACHE.mkdir(parents=True, exist_ok=True)
    if args.speed_only:
        return speed_only(args.repeat, args.quick)
    if args.recall_only:
        return recall_only()
    if args.speed_child:
        names = top_pypi(args.top)[::5] if args.quick else []
        return speed_child(benign_targets(names, args.refresh)[0] if names else [])
    bandit_problem, guarddog_problem = ensure_tools_venv()
    ranking = top_pypi(args.top)
    names = ranking[::5] if args.quick else ranking
    benign, problems = benign_targets(names, args.refresh)
    if args.fetch_only:
        console.print(f"fetched {len(benign)} benign packages into {CACHE}; problems: {problems}")
        return 0
    stdlib = stdlib_target()
    tune = malware_targets("tune")
    holdout = malware_targets("holdout")

    chosen = [
        caplet_tool(),
        bandit_tool(TOOLS_VENV, bandit_problem),
        guarddog_tool(TOOLS_VENV, guarddog_problem),
    ]
    # Warm caplet up on a tiny tree so its import and rule compilation are not charged to
    # the first corpus (the CLIs' start-up is charged to them, but it is per process; the
    # start-up of caplet's own CLI is measured on its own below).
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "warm.py").write_text("x = 1\n")
        caplet_scan(Path(tmp))

    runs: dict[tuple[str, str], Sweep] = {}
    for tool in chosen:
        if tool.unavailable:
            continue
        runs[(tool.name, "stdlib")] = sweep(tool, [stdlib], "stdlib", None)
        runs[(tool.name, "benign")] = sweep(
            tool, benign, "benign", args.budget if tool.slow else None
        )
        runs[(tool.name, "tune")] = sweep(tool, tune, "tune", None)
        runs[(tool.name, "holdout")] = sweep(tool, holdout, "holdout", None)
    dump_json(runs)
    console.print("[dim]ast.parse of the same trees[/dim]")
    parse = {"stdlib": parse_speed([stdlib]), "benign": parse_speed(benign)}
    console.print("[dim]caplet scan start-up[/dim]")
    startup_ms, first_ms, python_ms = startup_cpu(args.startup_runs)

    command = "python benchmarks/scan_bench.py" + (" --quick" if args.quick else "")
    if args.top != 500:
        command += f" --top {args.top}"
    if args.budget != DEFAULT_BUDGET_S:
        command += f" --budget {args.budget:g}"
    measured = Measured(
        tools=tuple(
            ToolInfo(t.name, t.version, tuple((m.label, m.rule) for m in t.mappings), t.unavailable)
            for t in chosen
        ),
        runs=dict(runs),
        stdlib=stdlib,
        benign=tuple(benign),
        benign_problems=tuple(problems),
        tune=tuple(tune),
        holdout=tuple(holdout),
        parse=parse,
        startup_ms=startup_ms,
        first_ms=first_ms,
        python_ms=python_ms,
        startup_runs=args.startup_runs,
        command=command + (" --write" if args.write else ""),
        cpu=cpu,
        budget_s=args.budget,
    )
    preamble, sections = build_report(measured)
    show(sections, preamble)
    if args.write:
        write(
            markdown(sections, preamble), RESULTS_MD, REPO / "docs" / "benchmarks.md", console.print
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
