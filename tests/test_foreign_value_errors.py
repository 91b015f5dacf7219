"""Every parse of text someone else wrote catches the ``ValueError`` that is no decode error.

CPython refuses ``int()`` of text past 4,300 digits with a bare ``ValueError``
(``sys.set_int_max_str_digits``): ``json.loads`` and ``tomllib.loads`` raise it for a long
integer, and packaging's ``Version`` for a long release segment, none of them as their own
decode error (``JSONDecodeError``, ``TOMLDecodeError``, ``InvalidVersion``). attack29 found
it in the manifest reader, the policy and lock files, ``--set``, the scanner's
``pyproject.toml`` and the lock's version check: each an internal error. This holds the
class: each such call in ``src/`` sits in a ``try`` that catches ``ValueError`` (or wider),
or is listed below with why its input cannot hold such a number.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "caplet"

#: The parsers that raise the digit limit's ValueError.
_PARSERS = frozenset({"json.loads", "tomllib.loads", "Version"})
_CATCHES = frozenset({"ValueError", "Exception", "BaseException"})

#: (file, parser) whose input is caplet's own or already bounded, and why.
_KNOWN = {
    ("_manifest/_read.py", "json.loads"): "parse_int refuses a number past 20 characters",
    ("_cli/_json_input.py", "json.loads"): "parse_int refuses a number past 40 digits",
    ("_host/_agent_text.py", "Version"): "a manifest's version, at most 64 characters",
    ("_host/_manager_enable.py", "Version"): "a manifest's version, at most 64 characters",
    ("_scan/_indicators.py", "tomllib.loads"): "caplet's own endpoints table",
    ("_scan/_examples_threat.py", "json.loads"): "a maintainer's script, not the product",
    ("_sandbox/_relocate.py", "json.loads"): "the host's own plan, in the jail",
    ("_trust/_rows.py", "json.loads"): "caplet's own store rows",
}


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def _caught(handlers: list[ast.ExceptHandler]) -> bool:
    for handler in handlers:
        kinds = handler.type
        names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        if kinds is None or any(_name(n) in _CATCHES for n in names if n is not None):
            return True
    return False


def _unguarded(tree: ast.AST) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []

    def walk(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Try):
            for statement in node.body:
                walk(statement, guarded or _caught(node.handlers))
            others: list[ast.AST] = [*node.handlers, *node.orelse, *node.finalbody]
            for other in others:
                walk(other, guarded)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            guarded = False  # called from elsewhere: its caller's try is not here
        if isinstance(node, ast.Call) and _name(node.func) in _PARSERS and not guarded:
            found.append((_name(node.func), node.lineno))
        for child in ast.iter_child_nodes(node):
            walk(child, guarded)

    walk(tree, False)
    return found


def test_every_parse_of_outside_text_catches_the_digit_limits_value_error() -> None:
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        for parser, line in _unguarded(ast.parse(path.read_text(encoding="utf-8"))):
            if (relative, parser) not in _KNOWN:
                problems.append(
                    f"{relative}:{line}: {parser}(...) outside a try catching ValueError"
                )
    assert problems == []


def test_the_check_sees_an_unguarded_parse_and_a_guarded_one() -> None:
    bare = ast.parse(
        "def f(t):\n    try:\n        return json.loads(t)\n    except KeyError:\n        pass\n"
    )
    assert _unguarded(bare) == [("json.loads", 3)]
    guarded = ast.parse("try:\n    v = Version(t)\nexcept (TypeError, ValueError):\n    v = None\n")
    assert _unguarded(guarded) == []
