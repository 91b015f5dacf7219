"""What a file that reaches the AST pass costs, phase by phase, beside its ``ast.parse``.

    python benchmarks/astpass_profile.py                 # stdlib and every 5th benign package
    python benchmarks/astpass_profile.py --stdlib-only
    python benchmarks/astpass_profile.py --profile 30    # and cProfile's top 30 (cumulative)
    python benchmarks/astpass_profile.py --record F      # and the AST-pass files kept in F
    python benchmarks/astpass_profile.py --replay F      # only those files' passes again
    python benchmarks/astpass_profile.py --tree DIR      # one folder of your own instead

Scans each tree in package mode exactly as ``caplet scan`` does (``caplet.scan_tree``)
with timers around the phases of :func:`caplet._scan._filepass._scan_text` (issue 16
point 4): ``parse`` (:func:`ast.parse`), ``survey`` (the survey walk, the focus
statements and their node ids) and ``rules`` (the rule visitor: its set-up, its visit
of the nodes and the sinks it checks at the end; a nested pass of Python source found
in a string is charged to its own phases, not to the rules that found it). ``other``
is the rest of those files' passes (text rules, chains). Only files the AST pass ran on
are counted; CPU time (``time.process_time``), with the cycle collector as the scan
leaves it. The ratio ``(survey + rules) / parse`` is what the analysis after parsing
costs in ``ast.parse`` units. Uses the benchmark's cache (benchmarks/scan_corpus.py).
``--record`` keeps the texts and arguments of the files that reached the AST pass (a
pickle, outside the repository); ``--replay`` runs only their passes (prefilter
included, charged to ``other``), for a quick comparison of two versions of the pass.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pickle
import pstats
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scan_corpus import benign_targets, stdlib_target, top_pypi

import caplet
from caplet._scan import _filepass, _focus, _syntax, _visitor

PHASES = ("parse", "survey", "rules", "other")


class Clock:
    """Exclusive CPU time per phase: an inner phase's time is not its outer phase's."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(PHASES, 0.0)
        self.files = 0
        self.size = 0
        self._stack: list[str] = []
        self._since = 0.0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        now = time.process_time()
        if self._stack:
            self.spent[self._stack[-1]] += now - self._since
        self._stack.append(name)
        self._since = now
        try:
            yield
        finally:
            now = time.process_time()
            self.spent[self._stack.pop()] += now - self._since
            self._since = now


def _timed(clock: Clock, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with clock.phase(name):
            return func(*args, **kwargs)

    return wrapper


@contextmanager
def instrumented(clock: Clock, record: list[Any] | None = None) -> Iterator[None]:
    """The pass's phases timed, by wrapping the names ``_filepass`` calls them by."""
    # _filepass imports the survey and the visitor from their modules at each parsed
    # file (issue 16's start-up): they are wrapped there.
    owners: dict[str, Any] = {
        "_parse": _filepass,
        "_scan_text": _filepass,
        "survey": _syntax,
        "focus": _focus,
        "focus_bindings": _focus,
        "RuleVisitor": _visitor,
    }
    saved = {name: getattr(owner, name) for name, owner in owners.items()}
    visitor_class = saved["RuleVisitor"]

    class TimedVisitor(visitor_class):  # type: ignore[misc,valid-type]
        # a subclass, not a wrapper stored on the instance: that would be a reference
        # cycle, the whole syntax tree left to the cycle collector (charged to "other")
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            with clock.phase("rules"):
                super().__init__(*args, **kwargs)

        def run(self) -> None:
            with clock.phase("rules"):
                super().run()

    scan_text = saved["_scan_text"]

    def counted(text: str, file: str, **kwargs: Any) -> Any:
        before = dict(clock.spent)
        with clock.phase("other"):
            found, parsed = scan_text(text, file, **kwargs)
        if parsed:
            if kwargs.get("depth", 0) == 0:
                if record is not None:
                    record.append((text, file, kwargs))
                clock.files += 1
                clock.size += len(text.encode("utf-8", "surrogatepass"))
        else:  # not an AST-pass file: its prefilter and text rules are not counted
            clock.spent = before
        return found, parsed

    _filepass._parse = _timed(clock, "parse", saved["_parse"])
    for name in ("survey", "focus", "focus_bindings"):
        setattr(owners[name], name, _timed(clock, "survey", saved[name]))
    setattr(_visitor, "RuleVisitor", TimedVisitor)  # noqa: B010
    _filepass._scan_text = counted
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(owners[name], name, value)


def measure(
    label: str,
    roots: Sequence[Path],
    profile: int,
    record: list[Any] | None = None,
    replay: Sequence[tuple[str, str, dict[str, Any]]] = (),
) -> dict[str, float]:
    clock = Clock()
    profiler = cProfile.Profile() if profile else None
    with instrumented(clock, record):
        if profiler is not None:
            profiler.enable()
        for root in roots:
            caplet.scan_tree(root, mode=caplet.ScanMode.PACKAGE)
        for text, file, kwargs in replay:
            _filepass.scan_text(text, file, **kwargs)
        if profiler is not None:
            profiler.disable()
    spent = clock.spent
    parse = spent["parse"] or 1e-9
    after = spent["survey"] + spent["rules"]
    print(
        f"{label}: {clock.files} files, {clock.size / 1e6:.2f} MB through the AST pass; "
        + ", ".join(f"{p} {spent[p]:.3f} s" for p in PHASES)
        + f"; (survey + rules) / parse = {after / parse:.2f}x, "
        f"whole pass / parse = {(after + parse + spent['other']) / parse:.2f}x"
    )
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(profile)
        stats.sort_stats("cumulative").print_stats(profile)
        print(out.getvalue())
    return spent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stdlib-only", action="store_true")
    parser.add_argument("--benign-only", action="store_true")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile's top N")
    parser.add_argument("--record", type=Path, help="keep the AST-pass files in this pickle")
    parser.add_argument("--replay", type=Path, help="only the AST-pass files of this pickle")
    parser.add_argument("--tree", type=Path, help="only this folder of your own")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:  # imports and rule compilation not charged
        (Path(tmp) / "warm.py").write_text("import os\nos.system('x')\n")
        caplet.scan_tree(Path(tmp), mode=caplet.ScanMode.PACKAGE)
    if args.replay is not None:
        recorded = pickle.loads(args.replay.read_bytes())  # our own file, from --record
        for label, files in recorded.items():
            if (label == "stdlib" and args.benign_only) or (label != "stdlib" and args.stdlib_only):
                continue
            measure(label, [], args.profile, replay=files)
        return 0
    if args.tree is not None:
        measure("tree", [args.tree], args.profile)
        return 0
    kept: dict[str, list[Any]] = {}
    if not args.benign_only:
        kept["stdlib"] = []
        measure("stdlib", [stdlib_target().path], args.profile, kept["stdlib"])
    if not args.stdlib_only:
        targets = benign_targets(top_pypi(500)[::5], False)[0]
        kept["benign, every 5th package"] = []
        measure(
            "benign, every 5th package",
            [t.path for t in targets],
            args.profile,
            kept["benign, every 5th package"],
        )
    if args.record is not None:
        args.record.write_bytes(pickle.dumps(kept))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
