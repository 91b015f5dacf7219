"""Every finding of a checkout on the benchmark's corpora, to diff two checkouts (issue 16).

    python benchmarks/findings_dump.py OUT.txt                  # package mode
    python benchmarks/findings_dump.py OUT.txt --mode plugin    # every file visited whole
    diff <(python benchmarks/findings_dump.py /dev/stdout) OUT.txt

A speed change must not change a single finding. One line per finding of the malware
``tune`` set, the stdlib and every 5th benign package: corpus, file, line, column, rule,
severity and a digest of its message, excerpt and capability. The ``holdout`` set
stays unseen: one line per sample holds only its position in the set, its number of
findings and a digest of them (the samples' names, files and findings are never
written or printed). Run it with each checkout's own interpreter (``/work/main/.venv``
for main). Uses the benchmark's cache (benchmarks/scan_corpus.py).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from pathlib import Path

from scan_corpus import benign_targets, malware_targets, stdlib_target, top_pypi

import caplet


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _lines(corpus: str, root: Path, mode: caplet.ScanMode) -> list[str]:
    report = caplet.scan_tree(root, mode=mode)
    return sorted(
        f"{corpus} {f.file}:{f.line}:{f.column} {f.rule_id} {f.severity.name} "
        + _digest("\0".join((f.message, f.excerpt, str(f.capability), str(f.covered))))
        for f in report.findings
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", choices=("package", "plugin"), default="package")
    args = parser.parse_args(argv)
    mode = caplet.ScanMode.PACKAGE if args.mode == "package" else caplet.ScanMode.PLUGIN
    out: list[str] = []
    for target in malware_targets("tune"):
        out.extend(_lines(f"tune/{target.name}", target.path, mode))
    for position, target in enumerate(malware_targets("holdout")):
        held = _lines("holdout", target.path, mode)
        out.append(f"holdout #{position}: {len(held)} findings {_digest(chr(10).join(held))}")
    out.extend(_lines("stdlib", stdlib_target().path, mode))
    for target in benign_targets(top_pypi(500)[::5], False)[0]:
        out.extend(_lines(f"benign/{target.name}", target.path, mode))
    args.out.write_text("\n".join(out) + "\n")
    counts: dict[str, int] = {}
    for line in out:
        corpus = line.split("/", 1)[0].split(" ", 1)[0]
        counts[corpus] = counts.get(corpus, 0) + (1 if corpus != "holdout" else 0)
    print(f"{len(out)} lines written to {args.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
