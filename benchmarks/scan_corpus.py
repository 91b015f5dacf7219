"""The scanner benchmark's corpora: the most downloaded PyPI projects, the stdlib, the malware.

* the benign corpus: the first ``--top`` names of ``benchmarks/top_pypi.txt``
  (a download ranking, most downloaded first), each resolved to its latest
  sdist (a pure wheel when there is none) through the PyPI JSON API,
  downloaded with sha256 verification and extracted safely into a cache
  outside the repository (``~/.cache/caplet-scan-bench`` by default,
  ``CAPLET_BENCH_CACHE`` to move it); resolutions are remembered so re-runs
  scan the same versions;
* the standard library's ``.py`` files without tests, copied into the cache;
* the malicious samples of ``benchmarks/malware/{tune,holdout}``, each with
  its class (``SAMPLE.toml``), only ever read.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sysconfig
import tarfile
import tomllib
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

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
    #: The malware class a sample belongs to (SAMPLE.toml ``class``); "" for benign trees.
    group: str = ""


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


#: The class of the samples written for issue 4, before the classes of issue 16.
EARLIER_CLASS = "issue-4 families"
#: Issue 16's classes in its order (1-6, then its list of other held-out samples).
CLASS_ORDER = (
    "computed-names",
    "literal-stage",
    "download-run",
    "recon-egress",
    "decoder-sinks",
    "non-python",
    "other",
    EARLIER_CLASS,
)


def malware_targets(split: str) -> list[Target]:
    """The samples of ``tune`` or ``holdout``, each with its class (SAMPLE.toml)."""
    root = MALWARE / split
    targets = []
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        files, size = python_source_size(path)
        meta = tomllib.loads((path / "SAMPLE.toml").read_text(encoding="utf-8"))
        group = str(meta.get("class", EARLIER_CLASS))
        targets.append(Target(path.name, path, files, size, group=group))
    return targets
