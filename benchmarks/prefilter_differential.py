"""The prefilter against the whole-file pass over whole corpora (issue 16, soundness).

    python benchmarks/prefilter_differential.py            # the stdlib and every cached benign package
    python benchmarks/prefilter_differential.py --quick    # the stdlib, every 5th benign package
    python benchmarks/prefilter_differential.py --rest     # the benign packages --quick leaves out
    python benchmarks/prefilter_differential.py --stdlib-only

Each tree is scanned in package mode as ``caplet scan`` does, and again with the
prefilter answering "the whole file" for every file (what
tests/_scan/test_prefilter_trees.py does on a slice of the stdlib and the tuned
samples). Package mode's verdict is DANGER-driven and its report keeps the
lower severities of the files the AST pass saw only (docs/rules.md, "Package"),
so the contract compared is DANGER: every (rule, file, line) the whole-file
pass finds must be found with the prefilter too. A finding only the prefiltered
pass has is printed as well (it would mean the focus pass and the whole-file
pass disagree the other way). Also printed: the share of files and bytes that
needed the AST pass. Uses the benchmark's cache (benchmarks/scan_corpus.py);
nothing is fetched.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from scan_corpus import benign_targets, stdlib_target, top_pypi

from caplet._findings import Severity
from caplet._scan import _filepass
from caplet._scan._model import ScanMode
from caplet._scan._prefilter import Need, Prefilter
from caplet._scan._scanner import scan_tree

Danger = set[tuple[str, str, int]]


class _Blind(Prefilter):
    """A prefilter that sends every file, whole, to the AST pass."""

    def check_text(self, text: str) -> tuple[Need | frozenset[int], bool]:
        return Need.FULL, True


def _danger(root: Path, *, blind: bool) -> tuple[Danger, int, int, int]:
    """DANGER findings of ``root`` in package mode; files scanned, parsed, bytes."""
    saved = getattr(_filepass, "prefilter")  # noqa: B009 -- not exported: patched as tests do
    if blind:
        setattr(_filepass, "prefilter", _Blind)  # noqa: B010
    try:
        report = scan_tree(root, mode=ScanMode.PACKAGE)
    finally:
        setattr(_filepass, "prefilter", saved)  # noqa: B010
    found = {(f.rule_id, f.file, f.line) for f in report.findings if f.severity is Severity.DANGER}
    return found, report.files_scanned, report.files_parsed, report.bytes_scanned


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 5th benign package only")
    parser.add_argument(
        "--rest", action="store_true", help="only the benign packages --quick leaves out"
    )
    parser.add_argument("--stdlib-only", action="store_true")
    args = parser.parse_args(argv)
    targets = [] if args.rest else [stdlib_target()]
    if not args.stdlib_only:
        names = top_pypi(500)
        if args.quick:
            names = names[::5]
        elif args.rest:
            names = tuple(n for i, n in enumerate(names) if i % 5)
        targets += benign_targets(names, False)[0]
    missed = extra = 0
    files = parsed = 0
    start = time.process_time()
    for number, target in enumerate(targets, 1):
        filtered, scanned, needed, _ = _danger(target.path, blind=False)
        whole, _, _, _ = _danger(target.path, blind=True)
        files += scanned
        parsed += needed
        for kind, diff in (("MISSED", whole - filtered), ("EXTRA", filtered - whole)):
            for rule, file, line in sorted(diff):
                print(f"{kind} {target.name}: {rule} {file}:{line}", flush=True)
        missed += len(whole - filtered)
        extra += len(filtered - whole)
        if number % 25 == 0:
            print(
                f"... {number}/{len(targets)} trees, {time.process_time() - start:.0f} s CPU",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"{len(targets)} trees, {files} files ({parsed} needed the AST pass): "
        f"{missed} DANGER findings missed by the prefilter, {extra} found only with it"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
