"""This file's small helpers run statement by statement (caplet._scan._evaluate_steps).

The attack is tune sample b16-cn-base36-name: ``"os"`` and ``"system"`` stored as base-36
integers and unpacked by a ``while``/``divmod`` loop before ``importlib.import_module``
and ``getattr`` (clean on main, recall17). The near misses: a base-36 encoder that makes
identifiers (its values are computed, but nothing looks a name up with them), ``int(s,
36)`` of an identifier, and helpers the runner must not guess (an unknown argument, a
global state, an endless loop).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._evaluate import Evaluator, Value
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from caplet._scan._syntax import Survey, survey
from tests._scan.prefilterkit import found_in_a_package

SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "benchmarks/malware/tune/b16-cn-base36-name/fastjsonx/__init__.py"
)

_BASE36 = """
import string
_D = string.digits + string.ascii_lowercase
def _u(n):
    s = ""
    while n:
        n, r = divmod(n, 36)
        s = _D[r] + s
    return s
"""


def value_of(source: str) -> Value | None:
    """The value the file's last line (an expression) evaluates to, nothing run."""
    tree = ast.parse(textwrap.dedent(source))
    surveyed = survey(tree, 100, 100_000)
    assert isinstance(surveyed, Survey)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr)
    return Evaluator(surveyed.bindings).evaluate(last.value)


def danger(source: str) -> set[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_BASE36 + "_u(892)", "os"),
        (_BASE36 + "_u(1751504350)", "system"),
        # a for loop over digits, break and continue, an if, an augmented assignment
        (
            """
            def name(codes):
                out = ""
                for c in codes:
                    if c == 0:
                        continue
                    if c == 255:
                        break
                    out += chr(c)
                return out
            name([101, 0, 120, 101, 99, 255, 33])
            """,
            "exec",
        ),
        # a base given as a parameter, the digits written out
        (
            """
            def conv(n, b):
                a = "0123456789abcdefghijklmnopqrstuvwxyz"
                s = ""
                while n > 0:
                    s = a[n % b] + s
                    n = n // b
                return s
            conv(1751504350, 36)
            """,
            "system",
        ),
        ("int('zz', 36)", 1295),
        ("divmod(892, 36)", [24, 28]),
    ],
)
def test_a_small_helper_is_run_on_constants(source: str, expected: Value) -> None:
    assert value_of(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        # an argument the file does not show
        _BASE36 + "import sys\n_u(int(sys.argv[1]))",
        # an endless loop stops at the bound, unknown
        "def f(n):\n    while True:\n        n += 1\n    return n\nf(1)",
        # a statement the runner does not know (a call for its effect, a try)
        "def f(n):\n    print(n)\n    return str(n)\nf(1)",
        "def f(n):\n    try:\n        s = str(n)\n    except ValueError:\n        s = ''\n"
        "    return s\nf(1)",
        # a local read before it is bound on this path: not the other binding's value
        "def f(n):\n    if n:\n        s = 'a'\n    return s\nf(0)",
        # a global the function changes is no constant
        "S = ''\ndef f(n):\n    global S\n    S = 'x'\n    return S\nf(1)",
    ],
)
def test_what_a_helper_cannot_be_known_to_return_is_not_guessed(source: str) -> None:
    assert value_of(source) is None


def test_a_name_unpacked_from_base_36_is_a_hidden_lookup() -> None:
    assert {"CPL-THR-003", "CPL-THR-015"} <= danger(SAMPLE.read_text(encoding="utf-8"))


def test_a_name_unpacked_from_base_36_is_kept_by_the_prefilter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, SAMPLE.read_text(encoding="utf-8"), "CPL-THR-003")
    text = _BASE36 + "import os\ngetattr(os, _u(1751504350))('id')\n"
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(text), "CPL-THR-003")


def test_base_36_identifiers_are_clean() -> None:
    """A short-id encoder (hashids, shortuuid's kin) and ``int(s, 36)`` of an id: the values
    are computed, but no name is looked up with them."""
    source = (
        _BASE36
        + """
import itertools
_ids = itertools.count(1)
def next_id():
    return "job-" + _u(next(_ids) + 46656)
def parse(key):
    return int(key.removeprefix("job-"), 36)
CACHE = {_u(892): 1, _u(1751504350): 2}
"""
    )
    assert danger(source) == set()


def test_helpers_that_never_return_do_not_hide_a_later_lookup() -> None:
    """An endless helper whose value is asked for 40 times, then a name glued from
    pieces: the lookup is still found (the helpers' steps are their own account, given
    back to the file's, and an endless helper runs once)."""
    calls = "\n".join(f"getattr(os, _spin({i}))" for i in range(40))
    source = (
        "import os\n"
        "def _spin(n):\n    while True:\n        n += 1\n    return n\n"
        f"{calls}\n"
        "getattr(os, 'sys' + 'tem')('id')\n"
    )
    assert "CPL-THR-003" in danger(source)
