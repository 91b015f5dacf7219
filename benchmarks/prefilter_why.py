"""Which files reach the AST pass in package mode, and which trigger sent them (issue 16).

    python benchmarks/prefilter_why.py            # the stdlib and every 5th benign package
    python benchmarks/prefilter_why.py --stdlib-only

For each tree: the bytes of ``.py`` the prefilter sends to the AST pass (whole, or
around focus lines for a large file; an install script is always parsed), and per
trigger (``soloN``: a solo pattern, ``pairN``: a conjunction of ``_PAIRS``) the bytes
of the files it fired in (shared between the triggers of a file) and the bytes of
the files it alone sent: what narrowing it could save. Uses the benchmark's cache
(benchmarks/scan_corpus.py); nothing is fetched or scanned beyond the prefilter.
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence
from pathlib import Path

from scan_corpus import benign_targets, stdlib_target, top_pypi

from caplet._scan._filepass import ALWAYS_PARSED
from caplet._scan._prefilter import Need, prefilter


def _report(label: str, roots: Sequence[Path]) -> None:
    check = prefilter()
    total = parsed = focused = 0
    files: collections.Counter[str] = collections.Counter()
    shared: collections.Counter[str] = collections.Counter()
    alone: collections.Counter[str] = collections.Counter()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            total += len(data)
            if path.name == "setup.py" or path.name in ALWAYS_PARSED:
                parsed += len(data)
                files["always"] += 1
                continue
            text = data.decode("utf-8", "replace")
            need = check.check(text)
            if need is Need.NOTHING:
                continue
            parsed += len(data)
            if isinstance(need, Need):
                files["whole"] += 1
            else:
                files["focus"] += 1
                focused += len(data)
            found = set(check._match(text.encode("utf-8", "surrogatepass"))[0])
            reasons = [f"solo{i}" for i in sorted(found) if i < check._solo]
            reasons += [f"pair{k}" for k, t in enumerate(check._pairs) if found.issuperset(t)]
            for reason in reasons:
                shared[reason] += len(data) // len(reasons)
            if len(reasons) == 1:
                alone[reasons[0]] += len(data)
    print(
        f"{label}: {total / 1e6:.1f} MB of .py, {parsed / 1e6:.1f} MB parsed "
        f"({parsed / max(total, 1):.1%}; {focused / 1e6:.1f} MB of it around focus lines); "
        f"files: {dict(files)}"
    )
    for reason, size in shared.most_common(12):
        print(f"  {reason:8} {size / 1e6:6.2f} MB shared, {alone[reason] / 1e6:6.2f} MB alone")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdlib-only", action="store_true")
    args = parser.parse_args(argv)
    _report("stdlib", [stdlib_target().path])
    if not args.stdlib_only:
        targets = benign_targets(top_pypi(500)[::5], False)[0]
        _report("benign, every 5th package", [t.path for t in targets])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
