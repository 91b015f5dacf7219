"""Static scanner benchmark: speed, precision and recall, caplet against Bandit and GuardDog.

    python benchmarks/scan_bench.py            # full run: ~100 benign packages, stdlib, malware
    python benchmarks/scan_bench.py --quick    # 20 benign packages (every 5th of the ranking)
    python benchmarks/scan_bench.py --write    # also write benchmarks/scan_results.md

What it does (issue 4, point 8):

* builds (once) ``benchmarks/.cache/tools-venv`` with pinned Bandit and GuardDog;
* resolves the 100 most downloaded PyPI projects to their latest sdist (or a
  pure wheel when there is none) through the PyPI JSON API, downloads them into
  ``benchmarks/.cache/dist`` with sha256 verification, and extracts each one
  safely into ``benchmarks/.cache/extracted/<name>/``; every tool is given the
  same extracted directory (caplet reads sdists and wheels itself, but the
  same bytes on disk keep the comparison fair);
* copies the standard library's ``.py`` files (without tests) for speed;
* runs every tool on the same trees in the same run, pinned to one CPU, and
  reports throughput per wall second and per CPU second, the share of benign
  packages each tool flags at high severity, and recall on the two malicious
  sets in ``benchmarks/malware`` (``tune`` and ``holdout``), which are only
  ever read, never imported or executed.

Nothing here runs in the test suite: downloads and tool runs happen only when
this script is run by hand.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, JustifyMethod
from rich.table import Table

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
# Downloads, extracted sdists and the tools venv live outside the repository (shared by
# every work tree, never committed); --cache or CAPLET_BENCH_CACHE moves them.
CACHE = Path(
    os.environ.get("CAPLET_BENCH_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "caplet-scan-bench"
)
DIST = CACHE / "dist"
EXTRACTED = CACHE / "extracted"
TOOLS_VENV = CACHE / "tools-venv"
MALWARE = BENCH / "malware"
RESULTS_MD = BENCH / "scan_results.md"
RESULTS_JSON = CACHE / "scan_results.json"

# Versions verified to install and run on the benchmark machine (Python 3.11, x86_64).
BANDIT_PIN = "bandit==1.9.4"
GUARDDOG_PIN = "guarddog==3.2.0"

# The most downloaded PyPI projects, most downloaded first (the file says where the
# ranking comes from). The benchmark takes the first --top of them (500 by default).
TOP_PYPI_FILE = BENCH / "top_pypi.txt"


def top_pypi(count: int) -> tuple[str, ...]:
    """The first ``count`` names of the ranking file (comments and blank lines skipped)."""
    names = [
        line.strip()
        for line in TOP_PYPI_FILE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return tuple(names[:count])


# A wall-clock budget per slow tool over the benign corpus: past it, the tool scans no
# further packages and its benign numbers cover the packages scanned so far (ranking order).
DEFAULT_BUDGET_S = 600.0
# One pathological package must not eat the whole budget.
PER_TARGET_TIMEOUT_S = 300.0
# Refuse archives that expand beyond this (decompression bombs); the largest top-100
# sdist expands to a few hundred MB.
MAX_EXTRACTED_BYTES = 2 * 1024**3
USER_AGENT = "caplet-scan-bench/1 (+https://github.com/caplet)"

console = Console(stderr=True)


# ----------------------------------------------------------------------------- corpus


@dataclass(frozen=True, slots=True)
class Dist:
    """One downloadable file of a project's latest release, as PyPI describes it."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str
    kind: str  # "sdist" or "wheel"


@dataclass(frozen=True, slots=True)
class Target:
    """A directory every tool scans, and the Python source bytes the throughput counts."""

    name: str
    path: Path
    py_files: int
    py_bytes: int
    note: str = ""


def python_source_size(root: Path) -> tuple[int, int]:
    """(files, bytes) of ``*.py`` under ``root``: the common denominator for all tools."""
    files = 0
    size = 0
    for path in root.rglob("*.py"):
        if path.is_file() and not path.is_symlink():
            files += 1
            size += path.stat().st_size
    return files, size


def http_get(url: str, timeout: float = 60.0) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data: bytes = response.read()
    return data


def resolve(name: str) -> Dist | None:
    """Latest release's sdist, else a pure-Python wheel, else ``None``."""
    api = f"https://pypi.org/pypi/{name}/json"
    meta = json.loads(http_get(api))
    version = str(meta["info"]["version"])
    files = [f for f in meta["urls"] if not f.get("yanked", False)]
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    wheels = [
        f for f in files if f["packagetype"] == "bdist_wheel" and f["filename"].endswith("-any.whl")
    ]
    chosen = sdists[0] if sdists else (wheels[0] if wheels else None)
    if chosen is None:
        return None
    return Dist(
        name=name,
        version=version,
        filename=str(chosen["filename"]),
        # Mirrors in front of pypi.org may answer with URLs relative to the JSON document.
        url=urllib.parse.urljoin(api, str(chosen["url"])),
        sha256=str(chosen["digests"]["sha256"]),
        kind="sdist" if chosen["packagetype"] == "sdist" else "wheel",
    )


def load_resolutions(names: Sequence[str], refresh: bool) -> tuple[list[Dist], list[str]]:
    """Resolve every name once and remember it, so re-runs scan the same versions."""
    index_path = CACHE / "resolved.json"
    known: dict[str, Dist] = {}
    if index_path.exists() and not refresh:
        for entry in json.loads(index_path.read_text()):
            known[entry["name"]] = Dist(**entry)
    dists: list[Dist] = []
    problems: list[str] = []
    unknown = [name for name in names if name not in known]

    def look_up(name: str) -> tuple[str, Dist | None, str]:
        try:
            return name, resolve(name), ""
        except (OSError, ValueError, KeyError) as exc:
            return name, None, f"resolve failed ({exc})"

    # Network-bound: a few requests at once (one JSON document per project).
    with ThreadPoolExecutor(max_workers=8) as pool:
        for name, found, error in pool.map(look_up, unknown):
            if found is not None:
                known[name] = found
            elif error:
                problems.append(f"{name}: {error}")
    for name in names:
        dist = known.get(name)
        if dist is None:
            if name not in {p.split(":", 1)[0] for p in problems}:
                problems.append(f"{name}: no sdist and no pure wheel")
            continue
        dists.append(dist)
    CACHE.mkdir(parents=True, exist_ok=True)
    entries = [
        {
            "name": d.name,
            "version": d.version,
            "filename": d.filename,
            "url": d.url,
            "sha256": d.sha256,
            "kind": d.kind,
        }
        for d in sorted(known.values(), key=lambda d: d.name)
    ]
    index_path.write_text(json.dumps(entries, indent=1) + "\n")
    return dists, problems


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(dist: Dist) -> Path:
    """Fetch ``dist`` into the cache unless a file with the right digest is already there."""
    DIST.mkdir(parents=True, exist_ok=True)
    target = DIST / dist.filename
    if target.exists() and sha256_of(target) == dist.sha256:
        return target
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    request = urllib.request.Request(dist.url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(request, timeout=120) as response, partial.open("wb") as out:
        for block in iter(lambda: response.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != dist.sha256:
        partial.unlink()
        raise ValueError(f"sha256 mismatch for {dist.filename}")
    partial.replace(target)
    return target


def extract_zip(archive: Path, dest: Path) -> None:
    """Extract a wheel, refusing absolute paths, ``..``, links and bombs."""
    root = dest.resolve()
    total = 0
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = info.filename
            parts = Path(name).parts
            if name.startswith(("/", "\\")) or ".." in parts or ":" in name:
                raise ValueError(f"unsafe member {name!r} in {archive.name}")
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                continue  # a symlink: never materialise it
            out = (root / name).resolve()
            if not out.is_relative_to(root):
                raise ValueError(f"member {name!r} escapes {archive.name}")
            total += info.file_size
            if total > MAX_EXTRACTED_BYTES:
                raise ValueError(f"{archive.name} expands beyond {MAX_EXTRACTED_BYTES} bytes")
            if info.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst)


def extract_tar(archive: Path, dest: Path) -> None:
    """Extract an sdist with the ``data`` filter (no links out, no devices, no absolute paths)."""
    with tarfile.open(archive) as tf:
        total = sum(m.size for m in tf.getmembers() if m.isfile())
        if total > MAX_EXTRACTED_BYTES:
            raise ValueError(f"{archive.name} expands beyond {MAX_EXTRACTED_BYTES} bytes")
        tf.extractall(dest, filter="data")


def extract(dist: Dist, archive: Path) -> Path:
    """``extracted/<name>/``, rebuilt when the cached archive changed (a new release)."""
    dest = EXTRACTED / dist.name
    marker = EXTRACTED / f"{dist.name}.done"
    if dest.is_dir() and marker.exists() and marker.read_text() == dist.filename:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if dist.filename.endswith(".whl") or dist.filename.endswith(".zip"):
        extract_zip(archive, dest)
    else:
        extract_tar(archive, dest)
    marker.write_text(dist.filename)
    return dest


def benign_targets(names: Sequence[str], refresh: bool) -> tuple[list[Target], list[str]]:
    dists, problems = load_resolutions(names, refresh)

    def fetch(dist: Dist) -> Path | str:
        try:
            return extract(dist, download(dist))
        except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as exc:
            return f"{dist.name}: {exc}"

    targets: list[Target] = []
    # Downloads overlap (network-bound); the ranking order of the targets is kept.
    with ThreadPoolExecutor(max_workers=4) as pool:
        for number, (dist, got) in enumerate(zip(dists, pool.map(fetch, dists), strict=True), 1):
            console.print(f"[dim]benign {number}/{len(dists)}: {dist.filename}[/dim]")
            if isinstance(got, str):
                problems.append(got)
                continue
            files, size = python_source_size(got)
            note = f"{dist.version} {dist.kind}"
            targets.append(Target(dist.name, got, files, size, note))
    return targets, problems


def stdlib_target() -> Target:
    """The stdlib's ``.py`` files without tests (as benchmarks/run.py), copied once."""
    source = Path(sysconfig.get_paths()["stdlib"])
    dest = CACHE / f"stdlib-{platform.python_version()}"
    if not (CACHE / f"stdlib-{platform.python_version()}.done").exists():
        shutil.rmtree(dest, ignore_errors=True)
        skip = {"site-packages", "__pycache__", "test", "tests"}
        for path in source.rglob("*.py"):
            relative = path.relative_to(source)
            if skip.intersection(relative.parts[:-1]) or not path.is_file():
                continue
            out = dest / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)
        (CACHE / f"stdlib-{platform.python_version()}.done").write_text("ok")
    files, size = python_source_size(dest)
    return Target("stdlib", dest, files, size, f"Python {platform.python_version()}")


def malware_targets(split: str) -> list[Target]:
    root = MALWARE / split
    targets = []
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        files, size = python_source_size(path)
        targets.append(Target(path.name, path, files, size))
    return targets


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


def run_child(argv: Sequence[str], timeout: float) -> ChildRun:
    """Run a CLI and charge it the CPU time of the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
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
        console.print("[bold]creating benchmarks/.cache/tools-venv[/bold]")
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


@dataclass(frozen=True, slots=True)
class Speed:
    tool: str
    corpus: str
    megabytes: float
    wall_s: float
    cpu_s: float
    packages: int
    note: str = ""

    @property
    def wall_mb_s(self) -> float:
        return self.megabytes / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_mb_s(self) -> float:
        return self.megabytes / self.cpu_s if self.cpu_s else 0.0


def speed_of(result: Sweep, targets: Sequence[Target], corpus: str, note: str = "") -> Speed:
    sizes = {t.name: t.py_bytes for t in targets}
    names = result.names()
    megabytes = sum(sizes[n] for n in names) / 1e6
    return Speed(result.tool, corpus, megabytes, result.wall_s, result.cpu_s, len(names), note)


def restricted(result: Sweep, names: frozenset[str]) -> Sweep:
    """The same sweep, counting only ``names`` (so two tools compare on the same bytes)."""
    return Sweep(result.tool, tuple(o for o in result.outcomes if o.target in names))


def pin_to_one_cpu() -> int:
    """Pin this process (and so every tool it starts) to one CPU: the bars are per core."""
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part}/{whole})" if whole else "n/a"


# ----------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a rendered table (both the terminal and the Markdown one)."""

    cells: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    header: tuple[str, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()
    text_columns: frozenset[int] = frozenset({0})  # left-aligned; the others are numbers


def markdown(sections: Sequence[Section], preamble: Sequence[str]) -> str:
    out = ["## Static scanner: speed, precision and recall (`benchmarks/scan_bench.py`)", ""]
    out += [*preamble, ""]
    for section in sections:
        out += [f"### {section.title}", ""]
        out.append("| " + " | ".join(section.header) + " |")
        out.append(
            "|"
            + "|".join(
                "---" if i in section.text_columns else "---:" for i in range(len(section.header))
            )
            + "|"
        )
        out += ["| " + " | ".join(row.cells) + " |" for row in section.rows]
        if section.notes:
            out.append("")
            out += list(section.notes)
        out.append("")
    return "\n".join(out)


def show(sections: Sequence[Section], preamble: Sequence[str]) -> None:
    # Piped output would otherwise wrap every table at 80 columns.
    screen = Console(width=None if sys.stdout.isatty() else 150)
    for line in preamble:
        screen.print(line, markup=False, highlight=False)
    for section in sections:
        table = Table(title=section.title, title_justify="left")
        for index, column in enumerate(section.header):
            justify: JustifyMethod = "left" if index in section.text_columns else "right"
            table.add_column(column, justify=justify, overflow="fold")
        for row in section.rows:
            table.add_row(*row.cells)
        screen.print(table)
        for note in section.notes:
            screen.print(note, markup=False, highlight=False)


def name_list(names: Sequence[str], limit: int = 12) -> str:
    """The first ``limit`` names; the full lists are in the JSON dump."""
    shown = ", ".join(names[:limit])
    return shown + (f", +{len(names) - limit} more" if len(names) > limit else "")


def ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.1f}x" if theirs else "n/a"


def build_report(
    tools: Sequence[Tool],
    stdlib: Target,
    benign: Sequence[Target],
    benign_problems: Sequence[str],
    runs: dict[tuple[str, str], Sweep],
    tune: Sequence[Target],
    holdout: Sequence[Target],
    command: str,
    cpu: int,
) -> tuple[list[str], list[Section]]:
    available = [t for t in tools if not t.unavailable]
    caplet_std = runs[("caplet", "stdlib")]
    caplet_benign = runs[("caplet", "benign")]
    benign_mb = sum(t.py_bytes for t in benign) / 1e6
    preamble = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (every tool pinned to CPU {cpu}), "
        f"Linux {platform.release()}, Python {platform.python_version()}; "
        f"run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Command: `{command}`",
        "",
        "Tools: "
        + "; ".join(
            f"{t.name} {t.version}" + (f" (NOT RUN: {t.unavailable})" if t.unavailable else "")
            for t in tools
        )
        + ".",
        "",
        f"Corpora: stdlib {stdlib.py_files} `.py` files, {stdlib.py_bytes / 1e6:.1f} MB "
        f"(no tests, as `benchmarks/run.py`); benign: {len(benign)} of the most downloaded "
        f"PyPI projects, latest sdist (pure wheel when there is none), {benign_mb:.1f} MB of "
        f"`.py`; malicious: {len(tune)} tune + {len(holdout)} holdout reconstructions "
        "(benchmarks/malware/README.md).",
        "",
        "Throughput counts the bytes of `.py` files in each tree (the same denominator for "
        "every tool, whatever else a tool reads); MB = 10^6 bytes. caplet runs in-process on "
        "one thread (CPU = `time.process_time`); Bandit and GuardDog run as their CLIs, one "
        "process per package (CPU = `getrusage(RUSAGE_CHILDREN)`, user + system, including "
        "their interpreter start-up).",
    ]
    if benign_problems:
        preamble += ["", "Benign packages not scanned: " + "; ".join(benign_problems) + "."]

    # Speed.
    speed_rows: list[Row] = []
    caplet_speed = {
        "stdlib": speed_of(caplet_std, [stdlib], "stdlib"),
        "benign": speed_of(caplet_benign, benign, "benign"),
    }
    for corpus, speed in caplet_speed.items():
        speed_rows.append(
            Row(
                (
                    f"caplet, {corpus}",
                    f"{speed.megabytes:.1f}",
                    f"{speed.wall_mb_s:.2f}",
                    f"{speed.cpu_mb_s:.2f}",
                    "1.0x",
                    "1.0x",
                )
            )
        )
    speed_notes: list[str] = []
    for tool in available:
        if tool.name == "caplet":
            continue
        for corpus, targets in (("stdlib", [stdlib]), ("benign", list(benign))):
            theirs = runs[(tool.name, corpus)]
            subset = theirs.names()
            mine = speed_of(restricted(runs[("caplet", corpus)], subset), targets, corpus)
            other = speed_of(theirs, targets, corpus)
            label = f"{tool.name}, {corpus}"
            if theirs.skipped:
                label += f" (first {len(subset)} of {len(targets)})"
                speed_notes.append(
                    f"{tool.name} on the benign corpus stopped at its {DEFAULT_BUDGET_S:.0f} s "
                    f"budget after {len(subset)} packages (ranking order); its ratio compares "
                    "caplet on those same packages."
                )
            speed_rows.append(
                Row(
                    (
                        label,
                        f"{other.megabytes:.1f}",
                        f"{other.wall_mb_s:.2f}",
                        f"{other.cpu_mb_s:.2f}",
                        ratio(mine.wall_mb_s, other.wall_mb_s),
                        ratio(mine.cpu_mb_s, other.cpu_mb_s),
                    )
                )
            )
    for tool in tools:
        if tool.unavailable:
            speed_rows.append(Row((f"{tool.name}", "-", "not run", "not run", "-", "-")))
    speed_section = Section(
        "Throughput on one core",
        (
            "tool, corpus",
            "MB of .py",
            "MB/s (wall)",
            "MB/s (CPU)",
            "caplet / tool (wall)",
            "caplet / tool (CPU)",
        ),
        tuple(speed_rows),
        tuple(speed_notes),
    )

    # Precision and recall.
    pr_rows: list[Row] = []
    mapping_notes: list[str] = []
    for tool in available:
        benign_run = runs[(tool.name, "benign")]
        for index, mapping in enumerate(tool.mappings):
            mapping_notes.append(f"{tool.name}, {mapping.label}: {mapping.rule}.")
            scanned = len(benign_run.outcomes)
            flagged = len(benign_run.flagged(index))
            tune_hit = len(runs[(tool.name, "tune")].flagged(index))
            hold_hit = len(runs[(tool.name, "holdout")].flagged(index))
            coverage = "" if not benign_run.skipped else f" (first {scanned})"
            pr_rows.append(
                Row(
                    (
                        f"{tool.name}: {mapping.label}",
                        pct(flagged, scanned) + coverage,
                        pct(tune_hit, len(tune)),
                        pct(hold_hit, len(holdout)),
                    )
                )
            )
    for tool in tools:
        if tool.unavailable:
            pr_rows.append(Row((f"{tool.name}: not run here ({tool.unavailable})", "-", "-", "-")))
    errors = [
        f"{tool.name} errors on {corpus}: "
        + ", ".join(
            f"{o.target} ({o.error[:80]})" for o in runs[(tool.name, corpus)].outcomes if o.error
        )
        for tool in available
        for corpus in ("benign", "tune", "holdout")
        if any(o.error for o in runs[(tool.name, corpus)].outcomes)
    ]
    precision = Section(
        "Precision and recall (a target counts when the tool gives it at least one high-severity finding)",
        (
            "tool: high-severity mapping",
            "benign packages flagged",
            "recall, tune",
            "recall, holdout",
        ),
        tuple(pr_rows),
        (
            'How each tool\'s output is mapped to "flagged at high severity":',
            "",
            *(f"* {note}" for note in mapping_notes),
            "",
            *errors,
        ),
    )

    # caplet per rule family on the benign corpus.
    families: dict[str, set[str]] = {}
    for outcome in caplet_benign.outcomes:
        for rule in outcome.hits:
            families.setdefault(family(rule), set()).add(outcome.target)
    family_rows = tuple(
        Row((fam, pct(len(pkgs), len(caplet_benign.outcomes)), name_list(sorted(pkgs))))
        for fam, pkgs in sorted(families.items(), key=lambda item: (-len(item[1]), item[0]))
    )
    family_section = Section(
        "caplet DANGER findings on the benign corpus, per rule family (CPL-<FAMILY>-nnn)",
        ("family", "benign packages", "which"),
        family_rows or (Row(("(none)", "0", "")),),
        (f"Every verdict with its rule ids: `{RESULTS_JSON.relative_to(REPO)}` (not committed).",),
        frozenset({0, 2}),
    )

    # Misses on the tuning set only: the holdout names stay out of sight of rule tuning.
    tune_missed = [o.target for o in runs[("caplet", "tune")].outcomes if not o.flags[0]]
    hold_missed = sum(1 for o in runs[("caplet", "holdout")].outcomes if not o.flags[0])
    caplet_notes = [
        f"caplet misses on tune: {', '.join(tune_missed) or 'none'}; on holdout: {hold_missed} "
        "(names withheld on purpose: the holdout must stay unseen by rule tuning).",
    ]

    # Against the bars.
    bandit_std = runs.get(("Bandit", "stdlib"))
    bars: list[Row] = [
        Row(
            (
                "≥ 10 MB/s on one core (stdlib, CPU)",
                f"{caplet_speed['stdlib'].cpu_mb_s:.2f} MB/s",
                "yes" if caplet_speed["stdlib"].cpu_mb_s >= 10 else "no",
            )
        )
    ]
    if bandit_std is not None:
        b = speed_of(bandit_std, [stdlib], "stdlib")
        x = caplet_speed["stdlib"].cpu_mb_s / b.cpu_mb_s if b.cpu_mb_s else 0.0
        bars.append(
            Row(
                ("≥ 20x Bandit's throughput (stdlib, CPU)", f"{x:.1f}x", "yes" if x >= 20 else "no")
            )
        )
    hold_recall = 1 - hold_missed / len(holdout) if holdout else 0.0
    benign_share = len(caplet_benign.flagged(0)) / len(caplet_benign.outcomes) if benign else 1.0
    bars.append(
        Row(
            (
                "recall ≥ 90% (holdout)",
                f"{100 * hold_recall:.1f}%",
                "yes" if hold_recall >= 0.9 else "no",
            )
        )
    )
    bars.append(
        Row(
            (
                "≤ 2% of top benign packages with any DANGER",
                f"{100 * benign_share:.1f}%",
                "yes" if benign_share <= 0.02 else "no",
            )
        )
    )
    bar_section = Section(
        "Against the bars (issue 4, point 8)",
        ("bar", "measured", "met"),
        tuple(bars),
        tuple(caplet_notes),
    )
    return preamble, [speed_section, precision, family_section, bar_section]


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
    parser.add_argument("--write", action="store_true", help="write benchmarks/scan_results.md")
    parser.add_argument("--refresh", action="store_true", help="re-resolve latest releases")
    parser.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="seconds of wall time per slow tool over the benign corpus (default 600)",
    )
    args = parser.parse_args(argv)

    cpu = pin_to_one_cpu()
    CACHE.mkdir(parents=True, exist_ok=True)
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
    # the first corpus (the CLIs' start-up is charged to them, but it is per process).
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

    command = "python benchmarks/scan_bench.py" + (" --quick" if args.quick else "")
    if args.budget != DEFAULT_BUDGET_S:
        command += f" --budget {args.budget:g}"
    preamble, sections = build_report(
        chosen, stdlib, benign, problems, runs, tune, holdout, command, cpu
    )
    show(sections, preamble)
    if args.write:
        RESULTS_MD.write_text(markdown(sections, preamble))
        console.print(f"wrote {RESULTS_MD.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
