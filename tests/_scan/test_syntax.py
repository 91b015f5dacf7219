"""The survey's helpers: the nodes below a focus statement (issue 16)."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

from caplet._scan._syntax import TooComplex, node_ids, survey

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "tarfile.py"
#: What ast.walk yields that the survey never lists (and no rule visits).
_TOKENS = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def test_node_ids_are_ast_walks_nodes_the_survey_lists() -> None:
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    roots = [s for s in tree.body if isinstance(s, ast.ClassDef | ast.FunctionDef)][:5]
    assert roots
    walked = {id(n) for r in roots for n in ast.walk(r) if not isinstance(n, _TOKENS)}
    assert node_ids(roots) == walked
    surveyed = survey(tree, 100, 1_000_000)
    assert not isinstance(surveyed, TooComplex)
    listed = {id(n) for n in surveyed.nodes}
    assert node_ids(roots) <= listed
    assert node_ids([]) == frozenset()
