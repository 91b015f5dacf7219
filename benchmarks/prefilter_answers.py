"""The prefilter's answer for every file of the speed corpora, to compare two checkouts.

    python benchmarks/prefilter_answers.py --dump OUT.tsv      # this checkout's answers
    python benchmarks/prefilter_answers.py --dump OUT.tsv --rest   # the other benign packages
    python benchmarks/prefilter_answers.py --compare A.tsv B.tsv

A change to how the prefilter *runs* its patterns (which RE2 set holds which, what
is searched only where another side hit: issue 16) must not change what it answers.
For each ``.py`` file of the stdlib and of every 5th benign package (the trees of
``scan_bench.py --speed-only --quick``; ``--rest``: the benign packages those leave
out, as ``prefilter_differential.py --rest``), read as the package-mode pass reads it
(``\\r`` newlines made ``\\n``), this writes one line: the answer of
``Prefilter.check_text`` (nothing, the whole file, or the focus lines), whether text
aimed at the auditor may be there, the answer after the logical lines and the
glued literals widen it, and after the escapes read widen that, as ``_filepass`` asks; for a file that needs the whole AST
and is large, also the lines ``hit_lines`` locates around the set's answer (what the
oversized path and the large-file focus read). Run it with each checkout's own
interpreter (main: ``cd /work/main && .venv/bin/python /path/to/this --dump A``);
``--compare`` prints every file whose line differs and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from scan_corpus import benign_targets, stdlib_target, top_pypi

from caplet._scan._escaped_strings import with_escaped_strings
from caplet._scan._glued_strings import with_glued_strings
from caplet._scan._logical_lines import with_logical_lines
from caplet._scan._prefilter import Need, prefilter


def _files(rest: bool) -> Iterator[tuple[str, Path]]:
    names = top_pypi(500)
    if rest:
        roots = []
        names = tuple(n for i, n in enumerate(names) if i % 5)
    else:
        roots = [("stdlib", stdlib_target().path)]
        names = names[::5]
    roots += [(t.name, t.path) for t in benign_targets(names, False)[0]]
    for label, root in roots:
        for path in sorted(root.rglob("*.py")):
            if path.is_file() and not path.is_symlink():
                yield f"{label}/{path.relative_to(root)}", path


def _show(answer: Need | frozenset[int] | None) -> str:
    if answer is None:
        return "none"
    if isinstance(answer, Need):
        return answer.value
    digest = hashlib.sha256(",".join(map(str, sorted(answer))).encode()).hexdigest()[:16]
    return f"{len(answer)}:{digest}"


def _answers(name: str, text: str) -> str:
    check = prefilter()
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    need, auditor = check.check_text(text)
    widened = with_glued_strings(text, with_logical_lines(text, need, check.check), check.check)
    escaped = with_escaped_strings(text, widened, check.check)
    fields = [name, _show(need), str(auditor), _show(widened), _show(escaped)]
    if need is not Need.NOTHING and len(text) > 12_000:
        # the lines the large-file focus reads, located around the set's answer
        fields.append(_show(check.hit_lines(text, 400)))
    return "\t".join(fields)


def _dump(out: Path, rest: bool) -> int:
    count = 0
    with out.open("w") as stream:
        for name, path in _files(rest):
            text = path.read_bytes().decode("utf-8", "replace")
            stream.write(_answers(name, text) + "\n")
            count += 1
    print(f"{count} files written to {out}")
    return 0


def _compare(first: Path, second: Path) -> int:
    a = first.read_text().splitlines()
    b = second.read_text().splitlines()
    differ = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
    for x, y in differ[:50]:
        print(f"- {x}\n+ {y}")
    print(f"{len(a)} and {len(b)} files, {len(differ)} answers differ")
    return 1 if differ or len(a) != len(b) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--dump", type=Path)
    group.add_argument("--compare", type=Path, nargs=2)
    parser.add_argument("--rest", action="store_true", help="the benign packages --dump leaves out")
    args = parser.parse_args(argv)
    if args.dump:
        return _dump(args.dump, args.rest)
    return _compare(*args.compare)


if __name__ == "__main__":
    sys.exit(main())
