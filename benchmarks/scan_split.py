"""Where package mode's CPU goes, stage by stage (issue 16, speed).

    python benchmarks/scan_split.py            # the stdlib, then every 5th benign package
    python benchmarks/scan_split.py --stdlib-only
    python benchmarks/scan_split.py --profile out.prof   # cProfile of the same scans
    python benchmarks/scan_split.py --tree DIR            # one folder of your own instead

Scans as ``benchmarks/scan_bench.py --speed-only`` does (``scan_tree`` in package mode,
the stdlib first: the process's first pass over new text), with ``time.process_time``
stamps around each stage, taken by wrapping the scanner's own functions in this
process: listing (the walk), reading, decoding, prefilter (its check and the logical-
line check, and the text rules of a file it decides), parse, survey (with the focus
selection), rules (the rest of a parsed file's pass: visitor, chains, text rules),
report (the report's building and sorting) and other (the per-file bookkeeping of the
collector: name rules, counters). The wrappers cost a few microseconds per file, which
"other" absorbs. Uses the benchmark's cache (benchmarks/scan_corpus.py).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scan_corpus import benign_targets, stdlib_target, top_pypi

import caplet
from caplet._scan import _collect, _filepass, _focus, _scanner, _syntax

_clock = time.process_time
_spent: collections.defaultdict[str, float] = collections.defaultdict(float)


def _timed(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            return function(*args, **kwargs)
        finally:
            _spent[stage] += _clock() - start

    return wrapper


def _timed_walk(function: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        iterator = function(*args, **kwargs)
        while True:
            start = _clock()
            try:
                item = next(iterator)
            except StopIteration:
                _spent["listing"] += _clock() - start
                return
            _spent["listing"] += _clock() - start
            yield item

    return wrapper


class _TimedPrefilter:
    """The process's prefilter, its checks charged to "prefilter"."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.check_text = _timed("prefilter", inner.check_text)
        self.check = _timed("prefilter", inner.check)
        self.hit_lines = _timed("prefilter", inner.hit_lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _wrap(module: object, name: str, stage: str) -> None:
    """Charge ``module.name``'s calls to ``stage`` (the scanner looks it up there)."""
    setattr(module, name, _timed(stage, getattr(module, name)))


def _install() -> None:
    timed = _TimedPrefilter(getattr(_filepass, "prefilter")())  # noqa: B009
    setattr(_filepass, "prefilter", lambda: timed)  # noqa: B010
    setattr(_scanner, "walk", _timed_walk(getattr(_scanner, "walk")))  # noqa: B009, B010
    _wrap(_collect, "read_source", "reading")
    _wrap(_collect, "decode_text", "decoding")
    for name in ("with_logical_lines", "_no_text_findings"):
        _wrap(_filepass, name, "prefilter")
    _wrap(_filepass, "_parse", "parse")
    # _filepass imports these at each parsed file (issue 16's start-up), so wrapping
    # them where they live is what its next file calls
    _wrap(_syntax, "survey", "survey")
    for name in ("focus", "focus_bindings"):
        _wrap(_focus, name, "survey")
    _wrap(_collect.Collector, "report", "report")
    scan_text = getattr(_collect, "scan_text")  # noqa: B009

    def top_scan_text(*args: Any, **kwargs: Any) -> Any:
        before = dict(_spent)
        start = _clock()
        result = scan_text(*args, **kwargs)
        total = _clock() - start
        inside = sum(_spent[k] - before.get(k, 0.0) for k in ("prefilter", "parse", "survey"))
        stage = "rules" if result[1] else "prefilter"
        _spent[stage] += total - inside
        return result

    setattr(_collect, "scan_text", top_scan_text)  # noqa: B010


def _scan_all(roots: Sequence[Path]) -> float:
    start = _clock()
    for root in roots:
        caplet.scan_tree(root, mode=caplet.ScanMode.PACKAGE)
    return _clock() - start


STAGES = ("listing", "reading", "decoding", "prefilter", "parse", "survey", "rules", "report")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdlib-only", action="store_true")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the scans instead")
    parser.add_argument("--tree", type=Path, help="split the scan of this folder only")
    args = parser.parse_args(argv)
    trees = {"tree": [args.tree]} if args.tree else {"stdlib": [stdlib_target().path]}
    if not args.stdlib_only and not args.tree:
        trees["benign"] = [t.path for t in benign_targets(top_pypi(500)[::5], False)[0]]
    with tempfile.TemporaryDirectory() as tmp:  # import and rule compilation not charged
        (Path(tmp) / "warm.py").write_text("x = 1\n")
        caplet.scan_tree(Path(tmp), mode=caplet.ScanMode.PACKAGE)
    if args.profile:
        profile = cProfile.Profile()
        for roots in trees.values():
            profile.runcall(_scan_all, roots)
        profile.dump_stats(args.profile)
        return 0
    _install()
    out: dict[str, dict[str, float]] = {}
    for label, roots in trees.items():
        _spent.clear()
        total = _scan_all(roots)
        size = sum(p.stat().st_size for r in roots for p in r.rglob("*.py") if p.is_file())
        row = {stage: _spent[stage] for stage in STAGES}
        row["other"] = total - sum(row.values())
        row["total"] = total
        row["MB"] = size / 1e6
        out[label] = row
        cells = "  ".join(f"{k} {v:.3f}" for k, v in row.items())
        print(f"{label}: {cells}", flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
