"""Attribute lookups by name in every spelling (caplet._scan._lookup_forms).

Each attack is a tune sample's idiom rewritten by benchmarks/mutate_recall.py
into another spelling of ``getattr`` that escaped before (issue 16); each near
miss is the same spelling in benign code, which must stay quiet.
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from caplet._findings import Severity
from caplet._scan._lookup_forms import attribute_lookup, partial_lookup
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source


def danger(source: str, filename: str = "mod.py") -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


def _resolve(node: ast.expr) -> tuple[str, ...]:
    # what the scanner's resolver answers for plain builtin names
    return (f"builtins.{node.id}",) if isinstance(node, ast.Name) else ()


@pytest.mark.parametrize(
    ("source", "owner", "key"),
    [
        ("getattr(a, k)", "a", "k"),
        ("a.__getattribute__(k)", "a", "k"),
        ("object.__getattribute__(a, k)", "a", "k"),
        ("type(a).__getattribute__(a, k)", "a", "k"),
        ("vars(a)[k]", "a", "k"),
        ("a.__dict__[k]", "a", "k"),
    ],
)
def test_every_spelling_names_the_owner_and_the_key(source: str, owner: str, key: str) -> None:
    found = attribute_lookup(ast.parse(source, mode="eval").body, _resolve)
    assert found is not None
    assert (ast.unparse(found[0]), ast.unparse(found[1])) == (owner, key)


@pytest.mark.parametrize(
    "source",
    ["getattr(a, k, None)", "a.get(k)", "a[k]", "f(a, k)", "a.__getattribute__(b, k)", "x.y"],
)
def test_other_expressions_are_not_lookups(source: str) -> None:
    assert attribute_lookup(ast.parse(source, mode="eval").body, _resolve) is None


@pytest.mark.parametrize(
    "source",
    [
        # tune cn-dir-builtins: builtins copied into a dict by __getattribute__, not getattr
        """
        import builtins
        _all = {n: builtins.__getattribute__(n) for n in dir(builtins)}
        _all['lave'[::-1]]("__import__('os').system('id')")
        """,
        # tune cn3-py2-builtin: a builtin fetched by a name sliced out of str(oct)
        """
        try:
            import __builtin__ as _b
        except ImportError:
            import builtins as _b
        _s = str(oct)
        _f = _b.__getattribute__(''.join(map(lambda i: _s[i], [20, 21, 20])) + 'c')
        _f('print(1)')
        """,
        # tune cn5-cjk-other-interpreter: __import__ and pip's main by slices of copyright
        """
        周 = str(copyright)
        间 = __builtins__.__getattribute__('_' + '_' + 周[193] + 周[103] + 周[77] + '_' + '_')
        间(周[130] + 周[204] + 周[3]).__getattribute__(周[103] + 周[169])(['install', 'x'])
        """,
        # the same through object.__getattribute__(X, name)
        """
        import builtins
        _s = str(oct)
        object.__getattribute__(builtins, _s[20] + _s[21] + _s[20] + 'c')('print(1)')
        """,
        # through the module's own class, in a helper (blindcn, tune cn7-aiohttp-socksx)
        """
        import builtins
        def attr(obj, name):
            return type(obj).__getattribute__(obj, name)
        attr(builtins, 'cexe'[::-1])(payload)
        """,
    ],
)
def test_getattr_spelled_otherwise_is_still_a_computed_lookup(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


@pytest.mark.parametrize(
    "source",
    [
        # a proxy forwarding attribute access: a variable name, not one computed
        """
        class Proxy:
            def __getattr__(self, name):
                return object.__getattribute__(self._target, name)
        """,
        # a namespace copied for documentation (pydoc's shape)
        """
        import builtins
        names = {n: builtins.__getattribute__(n) for n in dir(builtins)}
        print(sorted(names))
        """,
        "import json\nmethod = json.__getattribute__('du' + 'mps')\n",
    ],
)
def test_benign_getattribute_stays_quiet(source: str) -> None:
    assert danger(source) == set()


# -- getattr under another name: functools.partial (issue 16's mutation testing) ----------


def _partial_of(source: str) -> tuple[str, str] | None:
    tree = ast.parse(source)
    bound = {
        s.targets[0].id: [s.value]
        for s in tree.body
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
    }
    last = tree.body[-1]
    assert isinstance(last, ast.Expr)
    assert isinstance(last.value, ast.Call)

    def resolve(node: ast.expr) -> tuple[str, ...]:
        if isinstance(node, ast.Attribute) and node.attr == "partial":
            return ("functools.partial",)
        return _resolve(node)

    looked = partial_lookup(last.value, resolve, lambda name: bound.get(name, []))
    return None if looked is None else (ast.unparse(looked[0]), ast.unparse(looked[1]))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("g = functools.partial(getattr, os)\ng(k)", ("os", "k")),
        ("g = functools.partial(getattr)\ng(os, k)", ("os", "k")),
        ("g = functools.partial(getattr, os, k)\ng()", ("os", "k")),
        ("functools.partial(getattr, os)(k)", ("os", "k")),
    ],
)
def test_a_partial_of_getattr_is_a_lookup(source: str, expected: tuple[str, str]) -> None:
    assert _partial_of(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "g = functools.partial(print, os)\ng(k)",  # another function
        "g = functools.partial(getattr, os)\ng = other\ng(k)",  # rebound
        "g = functools.partial(getattr, os)\ng(k, None, 1)",  # not two arguments
        "g = functools.partial(getattr, *xs)\ng(k)",
    ],
)
def test_other_partials_are_not_lookups(source: str) -> None:
    assert _partial_of(source) is None


@pytest.mark.parametrize(
    "source",
    [
        # tune cn6-partial-getattr, cn6-partial-getattr-os, cn6-lambda-getattr
        "import builtins, functools\nf = functools.partial(getattr, builtins)\n"
        "f('ex' + 'ec')('import os')\n",
        "import functools, os\nf = functools.partial(getattr, os)\nf('sys' + 'tem')('id')\n",
        "import builtins\ng = lambda o, n: getattr(o, n)\ng(builtins, 'ex' + 'ec')('import os')\n",
    ],
)
def test_getattr_by_another_name_with_a_computed_name_is_a_threat(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


def test_a_partial_of_getattr_given_a_written_name_is_no_threat() -> None:
    source = (
        "import functools\nfrom app import cfg\nf = functools.partial(getattr, cfg)\nf('timeout')\n"
    )
    assert danger(source) == set()


# -- blind16: inspect.getattr_static is getattr without descriptors ---------------------------

STATIC_LOOKUPS = [
    "import inspect, builtins, base64\n"
    "n = bytes([99, 101, 120, 101][::-1]).decode()\n"
    "inspect.getattr_static(builtins, n)(base64.b64decode(P))\n",
    "import inspect, os\ninspect.getattr_static(os, 'sys' + 'tem')('id')\n",
    "from inspect import getattr_static as g\nimport builtins\ng(builtins, 'ev' + 'al')(X)\n",
]


@pytest.mark.parametrize("source", STATIC_LOOKUPS)
def test_getattr_static_of_a_computed_name_is_a_hidden_lookup(source: str) -> None:
    assert "CPL-THR-003" in danger(source)


def test_getattr_static_fetches_the_builtin_the_data_flow_follows() -> None:
    assert "CPL-THR-001" in danger(STATIC_LOOKUPS[0])


@pytest.mark.parametrize(
    "source",
    [
        # what it is for: reading an attribute without triggering properties
        "import inspect\nfor name in dir(cls):\n    member = inspect.getattr_static(cls, name)\n",
        "import inspect\nwrapped = inspect.getattr_static(func, '__wrapped__', None)\n",
    ],
)
def test_getattr_static_of_a_plain_name_stays_clean(source: str) -> None:
    assert not danger(source)
