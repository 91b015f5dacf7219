"""What a lookup's arguments are made of (caplet._scan._lookup_arguments, issue 16)."""

from __future__ import annotations

import ast

import pytest

from caplet._scan._flow import Flow
from caplet._scan._lookup_arguments import own_literals, spread_arguments

from .test_flow_memo import fresh


def _last_call(source: str) -> tuple[ast.Call, Flow]:
    """The outermost call on the source's last line, and the file's data flow."""
    flow, _ = fresh(source)
    calls = flow.calls()
    last = max(c.lineno for c in calls)
    return min((c for c in calls if c.lineno == last), key=lambda c: c.col_offset), flow


@pytest.mark.parametrize(
    ("source", "spelled"),
    [
        ("getattr(*[builtins, 'ev' + 'al'])", ["builtins", "'ev' + 'al'"]),
        ("args = (builtins, n)\ngetattr(*args)", ["builtins", "n"]),
        ("getattr(os, *['sys' + 'tem'])", ["os", "'sys' + 'tem'"]),
    ],
)
def test_a_literal_list_spread_into_a_call_gives_its_items(source: str, spelled: list[str]) -> None:
    call, flow = _last_call(source)
    spread = spread_arguments(flow, call.args)
    assert spread is not None
    assert [ast.unparse(a) for a in spread] == spelled


@pytest.mark.parametrize(
    "source",
    [
        "getattr(builtins, n)",  # nothing spread
        "getattr(*names)",  # a name bound nowhere in the file: unknown
        "args = [a]\nargs = [b]\ngetattr(*args)",  # bound twice: unknown
        "getattr(*[builtins, *more])",  # a spread inside the spread
    ],
)
def test_no_known_spread_is_none(source: str) -> None:
    call, flow = _last_call(source)
    assert spread_arguments(flow, call.args) is None


@pytest.mark.parametrize(
    ("source", "own"),
    [
        ("n = ''\nfor c in (111, 115):\n    n += chr(c)\nimport_module(n)", True),
        (
            "parts = ['o']\nparts.append('s')\nimport_module(parts[0] + parts[1])",
            True,
        ),
        # a caller's choice: a parameter, an attribute of an object, a container a
        # parameter fills (plugin loaders import what they are told)
        ("def load(name):\n    import_module('pkg.' + name)", False),
        ("import_module(self.module + '.x')", False),
        ("def f(mod):\n    found = []\n    found.append(mod)\n    import_module(found[0])", False),
    ],
)
def test_own_literals_is_the_files_own_choice_of_a_name(source: str, own: bool) -> None:
    call, flow = _last_call(source)
    assert own_literals(flow, call.args[0]) is own


def test_own_literals_gives_up_past_its_bound() -> None:
    # a name built from more than 64 nodes is not judged the file's own (the safe answer
    # for a rule that would otherwise flag it: nothing more is reported)
    source = "n = " + " + ".join(f"'{i}'" for i in range(80)) + "\nimport_module(n)"
    call, flow = _last_call(source)
    assert own_literals(flow, call.args[0]) is False
