"""How often the data flow's bounds fire on the stdlib and every 5th benign package (issue 16).

    python benchmarks/flow_cuts.py [--stdlib-only]

Scans like the benchmark (package mode) and prints :data:`caplet._scan._flow_memo.CUTS`
per corpus: cycles met (exact), filtering components (answered per question), nodes
deferred at the depth bound, deferrals left truncated, questions over their budget and
over their file's, and the evaluator's per-file budget spent (``evaluator budget``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from scan_corpus import benign_targets, stdlib_target, top_pypi

import caplet
from caplet._scan import _evaluate, _flow_memo


def _count_evaluator_budget() -> None:
    """Count each time the evaluator's per-file budget is spent (its first refusal)."""
    original = _evaluate.Evaluator._step

    def step(self: _evaluate.Evaluator) -> None:
        try:
            original(self)
        except _evaluate.BudgetError:
            if self._steps == _evaluate._BUDGET + 1:
                _flow_memo.CUTS["evaluator budget"] += 1
            raise

    _evaluate.Evaluator._step = step  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stdlib-only", action="store_true")
    args = parser.parse_args(argv)
    _count_evaluator_budget()
    corpora = [("stdlib", [stdlib_target().path])]
    if not args.stdlib_only:
        corpora.append(
            ("benign (every 5th)", [t.path for t in benign_targets(top_pypi(500)[::5], False)[0]])
        )
    for name, roots in corpora:
        _flow_memo.CUTS.clear()
        for root in roots:
            caplet.scan_tree(root, mode=caplet.ScanMode.PACKAGE)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(_flow_memo.CUTS.items())) or "none"
        print(f"{name}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
