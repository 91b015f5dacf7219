"""A namespace walked for a computed name (caplet._scan._sink_walked, CPL-THR-003): the
entry found by comparing keys with a name the code computes (branch blindcn), and the
walks that compare with names written out.
"""

from __future__ import annotations

import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str) -> list[str]:
    findings = scan_source(textwrap.dedent(source), "pkg/__init__.py", mode=ScanMode.PACKAGE)
    return [f.message for f in findings if f.severity is Severity.DANGER]


@pytest.mark.parametrize(
    "source",
    [
        """\
        import builtins
        for k, v in vars(builtins).items():
            if k == 'cexe'[::-1]:
                v(payload)
        """,
        """\
        import builtins
        f = next(v for k, v in builtins.__dict__.items() if k == ''.join(['ex', 'ec']))
        f(payload)
        """,
        """\
        import sys
        for name, mod in list(sys.modules.items()):
            if name == 'so'[::-1]:
                mod.system('id')
        """,
    ],
)
def test_a_namespace_walked_for_a_computed_name_is_a_lookup(source: str) -> None:
    assert any("walked for" in m for m in danger(source))


@pytest.mark.parametrize(
    "source",
    [
        # a walk that compares with a name written out
        """\
        import builtins
        for k, v in vars(builtins).items():
            if k == 'print':
                v('hi')
        """,
        # a computed name that spells nothing worth hiding
        """\
        import builtins
        f = next(v for k, v in vars(builtins).items() if k == 'nel'[::-1])
        f([])
        """,
        # a dict of the file's own walked for a computed key
        """\
        handlers = {'run': print}
        for k, v in handlers.items():
            if k == 'nur'[::-1]:
                v('x')
        """,
    ],
)
def test_walks_for_written_or_harmless_names_are_not_lookups(source: str) -> None:
    assert not any("walked for" in m for m in danger(source))
