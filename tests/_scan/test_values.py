"""The evaluator's values stay within their bound while they are built, not only after.

Attacks (scanfuzz): each expression below is a few dozen bytes of source whose
value is gigabytes. The evaluator computed the value and only then compared it
with ``MAX_VALUE``: a ``MemoryError`` out of ``scan_tree`` (a traceback for the
user) or, where the allocation succeeds, gigabytes held by the scan. Each test
scans a real file and asserts the payload beside the bomb is still found and
the scan's peak allocation (``tracemalloc``) stayed far below the bomb's size.
``add`` and ``int-square`` held on the old code too (a chain of names is not
folded that far); they stay as the attacks that were tried.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._values import MAX_VALUE

PAYLOAD = 'import base64\nexec(base64.b64decode("aW1wb3J0IG9zOyBvcy5zeXN0ZW0oJ2lkJyk="))\n'
#: What a scan of one of these small files may allocate at its peak: a few values
#: of MAX_VALUE and the scanner's own tables, nowhere near a bomb's size.
PEAK = 16 * MAX_VALUE

BOMBS = {
    # each value is at least 100 MB; their sources are under 200 bytes
    "join": "s = 'a' * 10_000\nexec(s.join(s))\n",
    "replace": "s = 'a' * 10_000\nexec(s.replace('a', s))\n",
    "format": "s = 'a' * 4_000_000\nexec(('{0}' * 30).format(s))\n",
    "percent": "s = 'a' * 4_000_000\nexec(('%s' * 30) % (" + "s, " * 30 + "))\n",
    "add": "s = 'a' * 4_000_000\nexec(" + " + ".join(["s"] * 30) + ")\n",
    "join-list": "s = 'a' * 4_000_000\nexec(''.join([" + ", ".join(["s"] * 30) + "]))\n",
    "int-square": "x = 0x"
    + "f" * 64
    + "\n"
    + "".join(f"x{i} = x{i - 1 if i else ''} * x{i - 1 if i else ''}\n" for i in range(24))
    + "exec(hex(x23))\n",
}

#: Many values each under the cap, kept by the evaluator's memo and by the text the
#: indicator rules read (_computed_strings evaluates up to 2,000 expressions a file): 40
#: lines of under 20 bytes were 460 MB at their peak, 2,000 would be 23 GB (attack5; new
#: with _computed_strings, 2 MB at 38b4048).
BOMBS.update(
    {
        f"many-{name}": "s = 'a' * 4_000_000\n" + "".join(f"x{i} = {expr}\n" for i in range(40))
        for name, expr in [
            ("lower", "s.lower()"),
            ("slice", "s[::1]"),
            ("fstring", "f'{s}'"),
            ("percent", "'%s' % s"),
        ]
    }
)


@pytest.fixture(scope="module", autouse=True)
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The self-check and the prefilter's sets built before any peak is measured."""
    scan_tree(tmp_path_factory.mktemp("warm"))


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN], ids=lambda m: m.value)
@pytest.mark.parametrize("bomb", BOMBS.values(), ids=BOMBS.keys())
def test_a_value_bomb_is_never_built(tmp_path: Path, bomb: str, mode: ScanMode) -> None:
    (tmp_path / "mod.py").write_text(bomb + PAYLOAD)
    tracemalloc.start()
    try:
        report = scan_tree(tmp_path, mode=mode)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK
    dropper = bomb.count("\n") + 2  # the payload's exec line
    assert ("CPL-THR-001", dropper) in {(f.rule_id, f.line) for f in report.uncovered_dangers()}


@pytest.mark.parametrize("mode", [ScanMode.PLUGIN, ScanMode.PACKAGE])
@pytest.mark.parametrize(
    "field",
    [
        "\u00b2",  # a digit (isdigit) that int() refuses
        "9" * 5000,  # past int()'s 4300 digits
    ],
)
def test_a_format_field_int_refuses_ends_the_scan_with_findings(
    tmp_path: Path, mode: ScanMode, field: str
) -> None:
    # attack11: both raised ValueError out of the scan (no verdict at all)
    (tmp_path / "setup.py").write_text(
        "import os\nx = '{" + field + "}'.format('a')\nos.system(x)\n", encoding="utf-8"
    )
    report = scan_tree(tmp_path, mode=mode)
    assert any(f.rule_id == "CPL-PROC-001" for f in report.findings)
